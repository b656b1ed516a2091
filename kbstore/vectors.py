"""Small vector utilities shared by embedders, the write path and backends.
numpy is imported lazily: the search path must not pay for it."""

from __future__ import annotations

import math
from array import array
from typing import TYPE_CHECKING, Any

from .errors import InvalidQueryError

if TYPE_CHECKING:
    import numpy as np


def normalize(vectors: Any) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero)."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).astype(np.float32)


def usable(vector: Any, dim: int) -> bool:
    """A vector that can be stored: ``dim`` finite floats, not all zero."""
    import numpy as np

    try:
        with np.errstate(over="ignore", invalid="ignore"):  # 1e39 becomes inf: refused below
            vec = np.asarray(vector, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError):
        return False
    return vec.shape == (dim,) and bool(np.all(np.isfinite(vec))) and bool(np.any(vec))


def unit(vector: Any) -> np.ndarray:
    """float32, L2-normalised; an already-unit vector is kept bit for bit so a
    reused vector is exactly the one that was exported."""
    import numpy as np

    vec = np.asarray(vector, dtype=np.float32).reshape(-1)
    if abs(float(np.linalg.norm(vec)) - 1.0) <= 1e-5:
        return vec
    return normalize(vec)[0]


def unit_rows(vectors: Any, dim: int) -> list[np.ndarray | None]:
    """``unit(v)`` for each vector ``usable(v, dim)`` accepts, None for the
    others. An embedder's (n, dim) batch is checked and normalised in one
    pass over the array (per vector, the two calls cost ~60 us: more than
    the SQL that stores it); anything else goes vector by vector."""
    import numpy as np

    try:
        with np.errstate(over="ignore", invalid="ignore"):
            batch = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError):
        batch = None
    if batch is None or batch.ndim != 2 or batch.shape[1] != dim:
        return [unit(v) if usable(v, dim) else None for v in vectors]
    with np.errstate(over="ignore", invalid="ignore"):
        good = np.asarray(np.isfinite(batch).all(axis=1) & batch.any(axis=1))
        norms = np.linalg.norm(batch, axis=1, keepdims=True)
    out: list[np.ndarray | None] = []
    for i in range(batch.shape[0]):
        if not good[i]:
            out.append(None)
        elif abs(float(norms[i, 0]) - 1.0) <= 1e-5:
            out.append(batch[i])  # kept bit for bit, as unit() does
        else:
            out.append((batch[i] / norms[i]).astype(np.float32))
    return out


def query_blob(vector: Any, dim: int) -> bytes:
    """float32 bytes of a query vector given as bytes, a list of floats or a
    numpy array, checked against the store's dimension."""
    if isinstance(vector, (bytes, bytearray, memoryview)):
        blob = bytes(vector)
        values = array("f")
        if len(blob) % 4 == 0:
            values.frombytes(blob)
    else:
        try:
            values = array("f", [float(x) for x in _flat(vector)])
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidQueryError(f"query_vector must be numbers ({exc})") from None
        blob = values.tobytes()
    if len(values) != dim or len(blob) != 4 * dim:
        raise InvalidQueryError(
            f"query_vector has {len(blob) // 4 if len(blob) % 4 == 0 else len(blob) / 4} "
            f"dimensions; this store's vectors have {dim}")
    # One pass in C: a NaN or an infinity makes the sum NaN or infinite, and
    # float32 values summed as doubles cannot overflow.
    if not math.isfinite(sum(values)):
        raise InvalidQueryError("query_vector contains NaN or infinity")
    return blob


def _flat(vector: Any) -> Any:
    tolist = getattr(vector, "tolist", None)
    data = tolist() if callable(tolist) else vector
    if data and isinstance(data[0], (list, tuple)):  # a (1, D) array
        if len(data) != 1:
            raise InvalidQueryError("query_vector must be one vector")
        data = data[0]
    return data

"""search.sql's sign-bit scan, done in numpy on a copy of the bits held in memory.

search.sql ranks each kind of vector ('doc', 'hype', 'chunk') by the Hamming
distance of its sign bits to the query's, ties by vector_id, and takes the
top k (then rescores those by exact cosine). In SQL that scan costs ~0.13 us
a vector (the B-tree step, two function calls and the top-k sorter): ~9 ms
of a 10k-document search (70,000 vectors). The same ranking over a numpy
copy of the bits costs a XOR and a popcount a vector, ~7x less.

The copy is one connection's, read in the search's own snapshot, and is used
only while the file is as it was when it was read: the key is SQLite's
``PRAGMA data_version`` (it changes when another connection commits) and the
connection's ``total_changes`` (its own writes). A copy is read when two
searches in a row see the same key, so a one-shot `kbstore search` and a
process that writes before every search keep the SQL scan (reading the copy
costs ~2 SQL scans) and never pay for it; a process that searches a file
more often than it changes it pays once. With no copy -- another key, a
topic, no query vector, more than MAX_BYTES of bits -- the parameters are
NULL and the statement scans in SQL as before (the sqlite3 shell always
does): the same candidates, in the same order (tests/sqlite/test_bits_scan.py).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from .connection import Connection
from .vectors import CHUNK_BASE, SLOTS

# Each kind's partial index and its predicate, written as the index's WHERE
# (migrations/sqlite/0005_sign_bits_index.sql), so SQLite can use the index.
_KINDS = {
    "doc": ("vector_bits_doc",
            f"vector_id < {CHUNK_BASE} AND vector_id % {SLOTS} = 0 AND bits IS NOT NULL"),
    "hype": ("vector_bits_hype",
             f"vector_id < {CHUNK_BASE} AND vector_id % {SLOTS} > 0 AND bits IS NOT NULL"),
    "chunk": ("vector_bits_chunk", f"vector_id >= {CHUNK_BASE} AND bits IS NOT NULL"),
}
PARAMS = {kind: f"bits_{kind}" for kind in _KINDS}
# Above this many bytes of bits (+ 8 for each id) no copy is kept: 64 MiB is
# ~1.2 M 384-d vectors, 170k documents of 7 vectors each.
MAX_BYTES = 64 << 20


def has_indexes(conn: Connection) -> bool:
    """Whether the file has vector_data's bits indexes (schema v5; a v3/v4
    file opened read-only has none)."""
    names = [index for index, _ in _KINDS.values()]
    return conn.execute(
        f"SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
        f"({', '.join('?' * len(names))})", names).fetchone()[0] == len(names)


def _read(conn: Connection, kind: str, nbytes: int) -> tuple[Any, Any] | None:
    """(ids ascending, the bits as columns of words) of one kind, or None if any row's
    bits are not nbytes long (a damaged row: the SQL scan handles it).

    One aggregate row instead of a Python tuple per vector (60k vectors:
    ~23 vs ~75 ms): the bits concatenated as text and cast back to a BLOB
    (SQLite copies the bytes; the length check below catches anything else)."""
    import numpy as np

    index, where = _KINDS[kind]
    n, blob, ids = conn.execute(
        f"SELECT count(*), CAST(group_concat(bits, '') AS BLOB), group_concat(vector_id) "
        f"FROM vector_data INDEXED BY {index} WHERE {where}").fetchone()
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros((nbytes, 0), dtype=np.uint8)
    if blob is None or len(blob) != n * nbytes:
        return None
    id_array = np.array(ids.split(","), dtype=np.int64)
    bits = np.frombuffer(blob, dtype=_word(nbytes)).reshape(n, -1)
    order = np.argsort(id_array, kind="stable")
    return id_array[order], columns(bits, order)


def columns(rows: Any, order: Any = None) -> Any:
    """Rows of bit words (in ``order``, if given) as one contiguous array per
    word position (words x n), made in one copy: the distance is then summed
    word by word over whole columns, 0.5 ms for 60k 384-d vectors against
    3.5 ms row by row (numpy's sum along a short axis)."""
    import numpy as np

    return np.ascontiguousarray(rows.T if order is None else rows.T[:, order])


# Columns per block of the distance computation: its temporaries (the XOR
# words, their popcounts) stay ~3 MB whatever the copy's size.
_BLOCK = 1 << 16


def _top(ids: Any, bits: Any, query: Any, k: int) -> list[int]:
    """The k vector ids with the fewest differing bits, ties by vector_id:
    what search.sql's ``ORDER BY vec_distance_hamming(...), vector_id LIMIT k``
    returns. ``bits``: columns() of the rows, in the order of ``ids``.

    The distances are small integers (0 .. bits per row), so the k-th
    smallest comes from their histogram instead of a partition (60k
    questions: ~0.35 vs ~0.7 ms a search with the word-by-word sum)."""
    import numpy as np

    if k <= 0 or not len(ids):
        return []
    n = len(ids)
    dist = np.empty(n, dtype=np.uint16)
    for start in range(0, n, _BLOCK):
        block = np.bitwise_xor(bits[:, start:start + _BLOCK], query[:, None])
        np.bitwise_count(block).sum(axis=0, dtype=np.uint16, out=dist[start:start + _BLOCK])
    if k < n:
        kth = int(np.searchsorted(np.cumsum(np.bincount(dist)), k))  # the k-th smallest
        below = np.flatnonzero(dist < kth)
        pick = np.concatenate([below, np.flatnonzero(dist == kth)[: k - len(below)]])
    else:
        pick = np.arange(n)
    pick = pick[np.lexsort((ids[pick], dist[pick]))]  # ids ascend within a distance
    return ids[pick].tolist()


class BitsScan:
    """One connection's copy of the sign bits and the key it was read at."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None  # the previous search's key
        self._key: tuple[int, int] | None = None  # the copy's key
        self._copy: dict[str, tuple[Any, Any]] = {}
        self.reads = 0  # copies read (tests)

    def params(self, conn: Connection, qvec: bytes | None, dim: int,
               k: dict[str, int]) -> dict[str, str | None]:
        """search.sql's :bits_doc / :bits_hype / :bits_chunk: each kind's top
        k vector ids as a JSON array (k per kind; the statement takes the first
        of them it needs), or NULL for the SQL scan. Call inside the search's
        snapshot: the copy is read, and its key checked, in that snapshot."""
        out: dict[str, str | None] = dict.fromkeys(PARAMS.values())
        if qvec is None or dim % 8:
            return out
        with self._lock:
            key = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
            if key != self._key:
                self._copy, self._key = {}, None
                if key != self._seen:
                    self._seen = key
                    return out
                copy = self._read_all(conn, dim // 8)
                if copy is None:
                    return out
                self._copy, self._key = copy, key
                self.reads += 1
            self._seen = key
            query = _query_bits(qvec, dim)
            for kind, name in PARAMS.items():
                ids, bits = self._copy[kind]
                if k.get(kind, 0) > 0 and len(ids):
                    out[name] = json.dumps(_top(ids, bits, query, k[kind]))
        return out

    def _read_all(self, conn: Connection, nbytes: int) -> dict[str, tuple[Any, Any]] | None:
        import numpy as np

        if not hasattr(np, "bitwise_count"):  # numpy < 2.0 (the declared range allows 1.24)
            return None
        rows = sum(conn.execute(f"SELECT count(*) FROM vector_data INDEXED BY {index} "
                                f"WHERE {where}").fetchone()[0]
                   for index, where in _KINDS.values())
        if rows * (nbytes + 8) > self.max_bytes:
            return None
        copy = {}
        for kind in _KINDS:
            got = _read(conn, kind, nbytes)
            if got is None:
                return None
            copy[kind] = got
        return copy


def _query_bits(qvec: bytes, dim: int) -> Any:
    """vec_quantize_binary(vec_f32(:qvec)) as uint64 words: bit i (LSB first)
    set when component i > 0 (kbstore/backends/sqlite/vectors.py sign_bits),
    in the words _read uses for a row of dim / 8 bytes."""
    import numpy as np

    floats = np.frombuffer(qvec, dtype=np.float32, count=dim)
    return np.packbits(floats > 0, bitorder="little").view(_word(dim // 8))


def _word(nbytes: int) -> Any:
    """The widest unsigned integer that divides a row of nbytes (fewer popcounts)."""
    import numpy as np

    return np.uint64 if nbytes % 8 == 0 else np.uint8

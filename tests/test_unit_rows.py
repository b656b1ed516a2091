"""kbstore.vectors.unit_rows: the write path's one-pass check of an
embedder's batch must accept, refuse and normalise exactly as the
per-vector ``usable`` and ``unit`` do."""

from __future__ import annotations

import numpy as np

from kbstore.vectors import unit, unit_rows, usable

DIM = 8


def _expected(vectors: list) -> list:  # type: ignore[type-arg]
    return [unit(v) if usable(v, DIM) else None for v in vectors]


def _same(got: list, want: list) -> None:  # type: ignore[type-arg]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None)
        if w is not None:
            assert g.dtype == np.float32 and g.tobytes() == w.tobytes()


def test_a_batch_is_checked_and_normalised_like_each_vector() -> None:
    rng = np.random.default_rng(7)
    rows = rng.normal(size=(6, DIM)).astype(np.float32)
    rows[1] /= np.linalg.norm(rows[1])      # already unit: kept bit for bit
    rows[2] = 0.0                           # zero: refused
    rows[3, 4] = np.nan                     # NaN: refused
    rows[4, 0] = np.inf                     # infinite: refused
    rows[5] *= 1000.0                       # far from unit: normalised
    got = unit_rows(rows, DIM)
    _same(got, _expected(list(rows)))
    assert [g is None for g in got] == [False, False, True, True, True, False]
    assert got[1] is not None and got[1].tobytes() == rows[1].tobytes()
    assert got[5] is not None and abs(float(np.linalg.norm(got[5])) - 1.0) < 1e-5


def test_overflowing_and_ragged_input_goes_vector_by_vector() -> None:
    big = [[1e39] + [0.0] * (DIM - 1), [1.0] * DIM]  # 1e39 is inf as float32
    _same(unit_rows(big, DIM), _expected(big))
    assert unit_rows(big, DIM)[0] is None
    ragged = [[1.0] * DIM, [1.0] * (DIM - 1), "not a vector"]
    _same(unit_rows(ragged, DIM), _expected(ragged))
    assert [v is None for v in unit_rows(ragged, DIM)] == [False, True, True]
    assert unit_rows(np.ones((3, DIM + 1), np.float32), DIM) == [None, None, None]
    assert unit_rows(np.zeros((0, DIM), np.float32), DIM) == []

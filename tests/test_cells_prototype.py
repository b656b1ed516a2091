"""benchmarks/cells_sql.py's prototype statement: search.sql with each sign-bit
KNN replaced by one KNN per probed cell. Probing every cell deeply must give
the bit plan's hits; probing one cell must take candidates from that cell only
(one vec0 KNN per cell of the join, not a KNN over the whole kind)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import benchmarks.latency as latency
from benchmarks.cells_sql import build_cells, cells_statement
from benchmarks.latency import build_params
from benchmarks.speed_ab import use
from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite.search import search_sql

QUERIES = ("picobot deployment", "how do I write a skill", "python testing tips",
           "user preferences", "sqlite search ranking")
DEEP = {"vec_k_doc": 4096, "vec_k_hype": 2048, "vec_plan": "bits"}


@pytest.fixture
def kb(tmp_path: Path, sample_db_with_questions: Path) -> Iterator[KnowledgeStore]:
    db = sample_db_with_questions
    cells = tmp_path / "cells.sqlite"
    info = build_cells(db, cells, cell_size=4, sample=1000, iters=5)
    assert info["doc"]["cells"] >= 2 and info["hype"]["cells"] >= 4
    store = KnowledgeStore.open(db, FakeEmbedder(64), hype=True)
    store.backend.conn.execute("ATTACH DATABASE ? AS cells", (str(cells),))
    yield store
    use(search_sql())
    store.close()


def _hits(store: KnowledgeStore, query: str) -> list[tuple[str, float]]:
    return [(h.path, h.score) for h in store.search(query, limit=20, now="2026-01-01", **DEEP)]


def test_probing_every_cell_deeply_gives_the_bit_plans_hits(kb: KnowledgeStore) -> None:
    conn = kb.backend.conn
    n = {k: conn.execute("SELECT count(*) FROM cells.centroids WHERE kind = ?", (k,)
                         ).fetchone()[0] for k in ("doc", "hype")}
    every = cells_statement(search_sql(), n, {"doc": 4096, "hype": 4096},
                            {"doc": 10**6, "hype": 10**6})
    assert every != search_sql()
    for query in QUERIES:
        use(search_sql())
        bits = _hits(kb, query)
        use(every)
        cells = _hits(kb, query)
        assert bits and [p for p, _ in cells] == [p for p, _ in bits]
        assert [s for _, s in cells] == pytest.approx([s for _, s in bits], abs=1e-9)


def test_one_probe_takes_candidates_from_the_nearest_cell_only(kb: KnowledgeStore) -> None:
    conn = kb.backend.conn
    one = cells_statement(search_sql(), {"doc": 1, "hype": 1}, {"doc": 4096, "hype": 4096},
                          {"doc": 10**6, "hype": 10**6})
    use(one)

    for query in QUERIES:
        params = build_params(kb, query, None, **DEEP)
        for kind, cte in (("doc", "vec_doc"), ("hype", "vec_hype")):
            got = {r[0] for r in conn.execute(
                latency.sql_upto_fusion(f"SELECT vector_id FROM {cte}"), params)}
            nearest = conn.execute(
                "SELECT cell FROM cells.centroids WHERE kind = ? ORDER BY "
                "vec_distance_cosine(centroid, vec_f32(?)) LIMIT 1", (kind, params["qvec"])
            ).fetchone()[0]
            members = {r[0] for r in conn.execute(
                "SELECT vector_id FROM cells.vectors_cells WHERE kind = ? AND cell = ?",
                (kind, nearest))}
            total = conn.execute("SELECT count(*) FROM cells.vectors_cells WHERE kind = ?",
                                 (kind,)).fetchone()[0]
            assert got and got <= members and len(members) < total, (query, kind)

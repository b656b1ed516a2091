"""How SQLite plans search.sql: no step may read every document row outside
the exact vector plan's own scan. The fusion once did that without anyone
noticing: SQLite flattened the hits into `scored` and scanned the documents
table with an automatic index on the hits. Same output, but 60 ms per search
at 100k documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite import search as sqlite_search

NOW = "2026-01-01T00:00:00+00:00"
# The documents table's aliases in search.sql, and the scans that are meant to
# visit every document: the exact plan's cosine scan and the plan's row count
# (both through a covering index, bounded by LIMIT where it matters).
DOCUMENT_NAMES = ("documents", "d")
MEANT = ("USING COVERING INDEX documents_topic", "USING COVERING INDEX documents_created")


@pytest.fixture
def kb(tmp_path: Path, sample_workspace: Path) -> KnowledgeStore:
    store = KnowledgeStore.open(tmp_path / "kb.sqlite", FakeEmbedder(32), hype=False)
    store.import_directory(sample_workspace)
    return store


def _plan(store: KnowledgeStore, query: str, **settings: object) -> list[str]:
    request, _ = store._request(query, None, 10, False, None, NOW, dict(settings))
    params = sqlite_search.compile_params(request, 32)
    rows = store.backend.conn.execute("EXPLAIN QUERY PLAN " + sqlite_search.search_sql(),
                                      params).fetchall()
    return [row[3] for row in rows]


@pytest.mark.parametrize("settings", [{}, {"fusion": "convex"}, {"min_similarity": 0.2},
                                      {"latest": True}, {"vec_plan": "bits"}])
def test_no_step_scans_every_document(kb: KnowledgeStore, settings: dict[str, object]) -> None:
    plan = _plan(kb, "picobot deployment last week", **settings)
    assert any(step.startswith("SEARCH d USING INTEGER PRIMARY KEY") for step in plan)
    full_scans = [step for step in plan
                  if step.split(" ")[0] == "SCAN" and step.split(" ")[1] in DOCUMENT_NAMES
                  and not any(reason in step for reason in MEANT)]
    assert full_scans == []


def test_the_check_sees_a_full_scan_of_documents(kb: KnowledgeStore,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # the former plan: the hits flattened into scored, documents scanned first
    sql = sqlite_search.search_sql().replace(
        "        CROSS JOIN documents AS d ON d.id = f.doc_id\n",
        "        JOIN documents AS d ON d.id = f.doc_id\n")
    assert sql != sqlite_search.search_sql()
    monkeypatch.setattr(sqlite_search, "search_sql", lambda: sql)
    plan = _plan(kb, "picobot deployment last week")
    assert "SCAN d" in plan

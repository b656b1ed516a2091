"""The vector plan of search.sql (:vec_plan): 'exact' scans the float
vectors, 'bits' runs the sign-bit KNN, 'auto' picks exact on a small file.
On a file where every KNN depth covers every vector of its kind, the two
plans must give the same hits in the same order with the same scores; with
a shallow depth the exact plan still finds the true nearest vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.embed import embedding_text
from kbstore.errors import InvalidQueryError

QUERIES = ("picobot deployment", "how do I write a skill", "python testing tips",
           "what did I do last week", "user preferences", "sqlite search ranking")
DEEP = {"vec_k_doc": 4096, "vec_k_hype": 4096, "vec_k_chunk": 4096}


@pytest.fixture
def kb(tmp_path: Path, sample_workspace: Path, fake_llm) -> KnowledgeStore:  # type: ignore[no-untyped-def]
    fake_llm.answer = lambda prompt: ("What does this note say?\nWhich project is it about?\n"
                                      f"Why does it matter? {len(prompt) % 7}")
    store = KnowledgeStore.open(tmp_path / "kb.sqlite", FakeEmbedder(64), hype=True)
    store.import_directory(sample_workspace)
    return store


def _hits(store: KnowledgeStore, query: str, **settings: object) -> list[tuple[str, float]]:
    return [(h.path, h.score) for h in store.search(query, limit=20, now="2026-01-01",
                                                    **settings)]


def test_exact_and_bit_plans_rank_alike_when_the_knn_sees_every_vector(
        kb: KnowledgeStore) -> None:
    assert len(kb) >= 10
    for query in QUERIES:
        for topic in (None, "projects"):
            exact = kb.search(query, topic=topic, limit=20, now="2026-01-01", explain=True,
                              vec_plan="exact", **DEEP)
            bits = kb.search(query, topic=topic, limit=20, now="2026-01-01", explain=True,
                             vec_plan="bits", **DEEP)
            auto = kb.search(query, topic=topic, limit=20, now="2026-01-01", explain=True,
                             **DEEP)
            assert [h.path for h in exact] == [h.path for h in bits] == [h.path for h in auto]
            assert [h.score for h in exact] == pytest.approx([h.score for h in bits], abs=1e-9)
            assert [h.explain["ranks"] for h in exact] == [h.explain["ranks"] for h in bits]
            if topic is None:
                assert exact, query


def test_auto_is_exact_below_the_bound_and_bits_above(kb: KnowledgeStore) -> None:
    # Depth 1 per kind: the bit plan ranks by sign bits first, the exact plan
    # by cosine, so the plans can differ -- auto must follow the bound.
    shallow = {"vec_k_doc": 1, "vec_k_hype": 1, "vec_k_chunk": 1}
    differ = 0
    for query in QUERIES:
        exact = _hits(kb, query, vec_plan="exact", **shallow)
        bits = _hits(kb, query, vec_plan="bits", **shallow)
        differ += exact != bits
        assert _hits(kb, query, exact_ratio=1000, **shallow) == exact
        assert _hits(kb, query, exact_ratio=0, **shallow) == bits
    assert differ  # else this test could not tell the plans apart


def test_the_exact_plan_finds_the_nearest_document_vector(kb: KnowledgeStore) -> None:
    embedder = FakeEmbedder(64)
    docs = kb.documents()
    matrix = embedder.embed_documents([embedding_text(d.title, d.tags, d.body) for d in docs])
    vector_only = {"w_fm": 0.0, "w_fts": 0.0, "w_hype": 0.0, "w_hype_fts": 0.0, "w_date": 0.0,
                   "boost_skill": 1.0, "boost_journal": 1.0, "half_life_days": None,
                   "vec_k_doc": 1, "vec_k_hype": 0, "vec_k_chunk": 0}
    for query in QUERIES:
        q = embedder.embed_queries([query])[0]
        sims = matrix @ q / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(q))
        hits = kb.search(query, limit=1, vec_plan="exact", explain=True, **vector_only)
        assert hits and hits[0].explain is not None, query
        assert hits[0].explain["raw"]["cosine"] == pytest.approx(float(sims.max()), abs=1e-5)
        assert hits[0].path in {docs[i].path for i in np.flatnonzero(sims >= sims.max() - 1e-6)}


def test_vec_plan_is_validated(kb: KnowledgeStore) -> None:
    with pytest.raises(InvalidQueryError, match="vec_plan"):
        kb.search("picobot", vec_plan="fast")
    with pytest.raises(InvalidQueryError, match="exact_ratio"):
        kb.search("picobot", exact_ratio=-1)


def test_the_bit_plan_filters_long_topic_names_like_the_exact_plan(tmp_path: Path) -> None:
    # vec0 compares TEXT metadata of 12+ bytes through its shadow table; two
    # long topics share their first 12 bytes and length, one topic is short.
    store = KnowledgeStore.open(tmp_path / "kb.sqlite", FakeEmbedder(64), hype=False)
    topics = ("infrastructure-east", "infrastructure-west", "self")
    words = ("deploy", "server", "backup", "python", "notes", "review", "sqlite", "search")
    for i in range(24):
        topic = topics[i % 3]
        store.upsert(f"{topic}/note-{i}.md", title=f"note {i} {words[i % 8]}",
                     body=f"{words[i % 8]} {words[(i * 3) % 8]} {words[(i * 5) % 8]} {i}",
                     topic=topic)
    try:
        for query in ("deploy server", "python search notes", "backup review"):
            for topic in (None, *topics):
                exact = _hits(store, query, topic=topic, vec_plan="exact", **DEEP)
                bits = _hits(store, query, topic=topic, vec_plan="bits", **DEEP)
                assert [p for p, _ in bits] == [p for p, _ in exact], (query, topic)
                assert [s for _, s in bits] == pytest.approx([s for _, s in exact], abs=1e-9)
                assert bits, (query, topic)
                if topic is not None:
                    assert {path.split("/")[0] for path, _ in bits} == {topic}
    finally:
        store.close()


def test_a_store_past_the_bound_takes_more_question_candidates_on_sign_bits(
        kb: KnowledgeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # One question kept (vec_k_hype 1): on sign bits it is the best by exact
    # cosine among the KNN's candidates, so with every question a candidate
    # it is the exact plan's; with one candidate it is the sign bits' first.
    from kbstore.backends.sqlite import search as sqlite_search

    def top_question(plan: str) -> dict[str, list[str]]:
        out = {}
        for query in QUERIES:
            hits = kb.search(query, limit=40, now="2026-01-01", explain=True,
                             vec_plan=plan, vec_k_hype=1)
            out[query] = [h.path for h in hits if h.explain["ranks"]["hype"] == 1]
        return out

    exact = top_question("exact")
    monkeypatch.setattr(sqlite_search, "HYPE_OVERSAMPLE_ROWS", 10**6)  # below: 1.5 x 1 -> 1
    below = top_question("bits")
    monkeypatch.setattr(sqlite_search, "HYPE_OVERSAMPLE_ROWS", 0)      # past: every question
    monkeypatch.setattr(sqlite_search, "HYPE_OVERSAMPLE_LARGE", 4096.0)
    past = top_question("bits")
    assert all(len(v) == 1 for v in exact.values())
    assert past == exact
    assert below != exact

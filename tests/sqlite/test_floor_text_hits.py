"""search.sql's confidence floor computes the similarity of a hit found by
words only where it can change the result: for every hit when no vector
list reaches the floor (the query may be out of the knowledge base), else
only for the rows returned and the "latest" candidates. The oracle is the
same statement computing every hit's similarity (the shortcut removed):
hits, scores, order and each hit's reported similarity must be identical
for every floor, limit, topic and "latest" setting."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.speed_ab import use
from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite.search import search_sql

SHORTCUT = re.compile(
    r"\n\s*AND \(\(doc_id NOT IN \(SELECT doc_id FROM fts_ranked\)\n"
    r"\s*AND doc_id NOT IN \(SELECT doc_id FROM hype_fts_ranked\)\)\n"
    r"\s*OR \(SELECT best FROM list_best\) < :min_similarity\)")

WORDS = ("deploy server backup disk garden tomato recipe oven flight hotel budget invoice "
         "python sqlite index vector train marathon knee doctor meeting schedule call "
         "laptop battery router printer piano lesson school exam").split()
QUERIES = ("deploy server", "tomato garden recipe", "last time the router failed",
           "latest marathon training", "python sqlite index vector", "piano",
           "budget invoice hotel flight", "zzzz qqqq", "doctor knee", "when was the exam")
FLOORS = (None, -1.0, 0.0, 0.1, 0.2, 0.3, 0.45, 0.6, 0.95)


def oracle_sql() -> str:
    sql, n = SHORTCUT.subn("", search_sql())
    assert n == 1, "the floor's shortcut clause changed: update this test's oracle"
    return sql


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeStore]:
    rng = random.Random(7)
    db = tmp_path_factory.mktemp("floor") / "kb.sqlite"
    store = KnowledgeStore.open(db, FakeEmbedder(32), hype=False)
    for i in range(240):
        kind = ("journal", "entry", "skill")[i % 3]
        words = rng.choices(WORDS, k=rng.randint(3, 40))
        path = {"journal": f"journal/2026-{1 + i % 12:02d}-{1 + i % 28:02d}-{i}.md",
                "entry": f"{('home', 'work')[i % 2]}/note-{i}.md",
                "skill": f"skills/s{i}/SKILL.md"}[kind]
        store.upsert(path, title=" ".join(rng.sample(WORDS, 2)), body=" ".join(words),
                     tags=rng.sample(WORDS, rng.randint(0, 2)),
                     updated=f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}")
    yield store
    store.close()


def _run(store: KnowledgeStore, sql: str, query: str, **settings: object) -> list[tuple]:
    use(sql)
    try:
        hits = store.search(query, explain=True, now="2026-12-31", **settings)
    finally:
        use(search_sql())
    return [(h.path, round(h.score, 12), round(h.explain["similarity"], 12)) for h in hits]


@pytest.mark.parametrize("query", QUERIES)
def test_same_hits_as_computing_every_similarity(kb: KnowledgeStore, query: str) -> None:
    oracle = oracle_sql()
    text_only = 0
    for floor in FLOORS:
        for settings in ({"limit": 10}, {"limit": 3, "latest": True}, {"limit": 25},
                         {"limit": 10, "topic": "home"},
                         # the sign-bit KNN with few candidates: the vector list
                         # may miss the most similar document, which a text
                         # list then holds (its similarity decides the floor)
                         {"limit": 10, "vec_plan": "bits", "vec_k_doc": 4}):
            # a short vector list, so most text hits are found by words only
            fast = _run(kb, search_sql(), query, min_similarity=floor, vec_limit=5, **settings)
            slow = _run(kb, oracle, query, min_similarity=floor, vec_limit=5, **settings)
            assert fast == slow, (floor, settings)
            text_only += sum(1 for _, _, sim in fast if sim > -1.0)
    if query != "zzzz qqqq":
        assert text_only > 0  # similarities were reported, so the comparison means something


def test_out_of_kb_query_still_returns_nothing(kb: KnowledgeStore) -> None:
    # every hit below the floor, vector lists included: nothing comes back
    assert _run(kb, search_sql(), "deploy server", min_similarity=0.99, vec_limit=5) == []
    assert _run(kb, oracle_sql(), "deploy server", min_similarity=0.99, vec_limit=5) == []


def test_text_hits_report_their_own_similarity(kb: KnowledgeStore) -> None:
    # with a floor that the vector list reaches, a returned text hit outside
    # the vector list still reports its own (computed) similarity
    hits = kb.search("python sqlite index vector", explain=True, limit=25,
                     min_similarity=-1.0, vec_limit=3)
    outside = [h for h in hits if h.explain["ranks"]["vector"] is None]
    assert outside, "expected text hits outside a 3-long vector list"
    assert all(-1.0 <= h.explain["similarity"] <= 1.0 for h in outside)
    assert any(h.explain["similarity"] > -1.0 for h in outside)


def test_with_questions(sample_db_with_questions: Path) -> None:
    oracle = oracle_sql()
    with KnowledgeStore.open(sample_db_with_questions, FakeEmbedder(64), hype=True) as store:
        for query in ("picobot deployment", "how do I write a skill", "user preferences"):
            for floor in FLOORS:
                for latest in (None, True):
                    fast = _run(store, search_sql(), query, min_similarity=floor,
                                vec_limit=2, latest=latest)
                    slow = _run(store, oracle, query, min_similarity=floor, vec_limit=2,
                                latest=latest)
                    assert fast == slow, (query, floor, latest)

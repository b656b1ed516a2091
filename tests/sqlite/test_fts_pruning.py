"""search.sql's max-score pruning of the FTS list (fts_split .. fts_rest):
rows holding only the query's common terms are not scored when the rows
holding a rarer term already decide the list. It must never change a
ranking: every case here compares the hits with the pruning switched off
(FTS_PRUNE = 0, the unpruned statement) and checks which path ran."""

from __future__ import annotations

import random

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite import search as sqlite_search
from kbstore.documents import make_document

NOW = "2026-06-30T12:00:00+00:00"
FTS_ONLY = {"w_fm": 0.0, "w_vec": 0.0, "w_hype": 0.0, "w_hype_fts": 0.0, "w_date": 0.0}
FILLER = ("river", "stone", "cloud", "paper", "glass", "metal", "field", "light")


@pytest.fixture(autouse=True)
def _prune_small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    # the pruning is off below FTS_PRUNE_ROWS documents; these files are small
    monkeypatch.setattr(sqlite_search, "FTS_PRUNE_ROWS", 0)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):  # type: ignore[no-untyped-def]
    """300 documents: 'common' in nearly all, 'zebra' in 40, 'quokka' in 3,
    'lonely' in one document holding no other query word; a few exact
    duplicates (equal BM25 scores: ties at the list's limit)."""
    rng = random.Random(7)
    store = KnowledgeStore.open(tmp_path_factory.mktemp("prune") / "p.sqlite",
                                FakeEmbedder(16), hype=False)
    docs = []
    for i in range(300):
        words = rng.choices(FILLER, k=rng.randint(5, 40))
        if i % 10 != 0:
            words += ["common"] * rng.randint(1, 3)
        if i % 7 == 0 and i < 280:
            words += ["zebra"] * rng.randint(1, 2)
        if i in (5, 150, 250):
            words.append("quokka")
        if i == 120:
            words = ["lonely", "stone"]
        body = " ".join(rng.sample(words, len(words)))
        topic = "projects" if i % 2 else "domains"
        docs.append(make_document(f"{topic}/d{i}.md", title=f"note {i % 13}", body=body,
                                  topic=topic))
    for i in range(8):  # identical texts: identical scores
        docs.append(make_document(f"domains/dup{i}.md", title="dup", body="zebra common river",
                                  topic="domains"))
    store.upsert_many(docs[:150])
    store.upsert_many(docs[150:])  # two FTS segments
    yield store
    store.close()


def _hits(store: KnowledgeStore, query: str, **settings: object) -> list[tuple[str, float]]:
    """The FTS list's documents in rank order, with their scores."""
    hits = store.search(query, limit=1000, now=NOW, explain=True, **FTS_ONLY, **settings)
    ranked = [(h.explain["ranks"]["fts"], h.path, h.score) for h in hits
              if h.explain and h.explain["ranks"]["fts"] is not None]
    return [(path, round(score, 12)) for _, path, score in sorted(ranked)]


def _unpruned(monkeypatch: pytest.MonkeyPatch, store: KnowledgeStore, query: str,
              **settings: object) -> list[tuple[str, float]]:  # the statement as before
    with monkeypatch.context() as m:
        m.setattr(sqlite_search, "FTS_PRUNE", 0.0)
        return _hits(store, query, **settings)


def _gate(store: KnowledgeStore, query: str, **settings: object) -> tuple[int, int]:
    """(pruned, decided) as the statement computed them for this query."""
    sql = sqlite_search.search_sql()
    head = sql.split("\nfused AS (")[0].rstrip().rstrip(",")
    request, _ = store._request(query, None, 50, False, None, NOW, {**FTS_ONLY, **settings})
    params = sqlite_search.compile_params(request, 16)
    row = store.backend.conn.execute(head + "\nSELECT pruned, decided FROM fts_gate",
                                     params).fetchone()
    return int(row[0]), int(row[1])


def test_a_decided_list_skips_the_common_rows_and_ranks_as_unpruned(corpus, monkeypatch):  # type: ignore[no-untyped-def]
    query = "common zebra"
    assert _gate(corpus, query, fts_limit=10) == (1, 1)
    got = _hits(corpus, query, fts_limit=10)
    assert got == _unpruned(monkeypatch, corpus, query, fts_limit=10)
    assert len(got) == 10
    assert all("zebra" in (corpus.get(p).body or "") for p, _ in got)


def test_an_undecided_list_still_holds_the_documents_with_only_common_terms(corpus, monkeypatch):  # type: ignore[no-untyped-def]
    # three documents hold 'quokka': the list of 20 needs rows with only 'common'
    query = "common quokka"
    assert _gate(corpus, query, fts_limit=20) == (1, 0)
    got = _hits(corpus, query, fts_limit=20)
    assert got == _unpruned(monkeypatch, corpus, query, fts_limit=20)
    bodies = [corpus.get(p).body or "" for p, _ in got]
    assert sum("quokka" in b for b in bodies) == 3
    assert any("quokka" not in b and "common" in b for b in bodies)


def test_a_document_with_only_the_rare_term_is_found(corpus, monkeypatch):  # type: ignore[no-untyped-def]
    query = "common lonely"
    got = _hits(corpus, query, fts_limit=5)
    assert got[0][0] == "domains/d120.md"
    assert got == _unpruned(monkeypatch, corpus, query, fts_limit=5)


def test_a_query_of_common_terms_only_returns_hits(corpus, monkeypatch):  # type: ignore[no-untyped-def]
    # one term: nothing to prune; 'common river': 'river' is the rarer one
    for query in ("common", "common river"):
        got = _hits(corpus, query)
        assert len(got) == 100  # the default fts_limit
        assert got == _unpruned(monkeypatch, corpus, query)


def test_ties_at_the_limit_keep_the_unpruned_choice(corpus, monkeypatch):  # type: ignore[no-untyped-def]
    # the 8 identical documents tie; a limit of 4 cuts through them
    query = "zebra common river"
    for limit in (3, 4, 6):
        assert _hits(corpus, query, fts_limit=limit) == _unpruned(
            monkeypatch, corpus, query, fts_limit=limit), limit


def test_topic_filter_and_default_fusion_rank_as_unpruned(corpus, monkeypatch):  # type: ignore[no-untyped-def]
    query = "common zebra stone"
    for topic in ("domains", "projects"):
        got = [(h.path, round(h.score, 12)) for h in corpus.search(
            query, topic=topic, limit=20, now=NOW, fts_limit=8)]
        with monkeypatch.context() as m:
            m.setattr(sqlite_search, "FTS_PRUNE", 0.0)
            want = [(h.path, round(h.score, 12)) for h in corpus.search(
                query, topic=topic, limit=20, now=NOW, fts_limit=8)]
        assert got == want
        assert got and all(p.startswith(topic + "/") for p, _ in got)


@pytest.mark.parametrize("seed", range(12))
def test_random_queries_rank_as_unpruned(corpus, monkeypatch, seed: int):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    query = " ".join(rng.sample(("common", "zebra", "quokka", *FILLER), rng.randint(2, 5))
                     + ["common"] * rng.randint(0, 2))
    limit = rng.choice((3, 10, 30, 100))
    assert _hits(corpus, query, fts_limit=limit) == _unpruned(monkeypatch, corpus, query,
                                                              fts_limit=limit), query


def test_no_pruning_below_the_size_bound(corpus, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sqlite_search, "FTS_PRUNE_ROWS", 309)  # the corpus holds 308
    assert _gate(corpus, "common zebra", fts_limit=10) == (0, 0)
    monkeypatch.setattr(sqlite_search, "FTS_PRUNE_ROWS", 308)
    assert _gate(corpus, "common zebra", fts_limit=10) == (1, 1)


def test_rows_of_a_common_term_that_outscore_the_rare_rows_are_scored(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    # 'quokka' (3 long documents, low BM25) is rarer than 'moderate' (a
    # quarter of the documents; short ones holding it 5 times score more):
    # the rows of 'moderate' alone must be scored, or the list is wrong.
    store = KnowledgeStore.open(tmp_path / "b.sqlite", FakeEmbedder(16), hype=False)
    rng = random.Random(2)
    docs = []
    for i in range(120):
        if i < 3:
            body = "quokka " + " ".join(rng.choices(FILLER, k=400))
        elif i % 4 == 0:
            body = "moderate " * 5 + "river"
        else:
            body = " ".join(rng.choices(FILLER, k=20))
        docs.append(make_document(f"domains/b{i}.md", title=f"b {i}", body=body))
    store.upsert_many(docs)
    try:
        query = "moderate quokka"
        assert _gate(store, query, fts_limit=2) == (1, 0)
        got = _hits(store, query, fts_limit=2)
        assert got == _unpruned(monkeypatch, store, query, fts_limit=2)
        assert all("moderate" in (store.get(p).body or "") for p, _ in got)
    finally:
        store.close()

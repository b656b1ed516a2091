"""The title list of search.sql (fm_title) counts the query words a title
matches with one MATCH per word and scores (m - 1) x the BM25 of the OR of
the words: exactly what FTS5 gives an OR of every word pair, the expression
it replaced (n(n-1)/2 AND pairs, far slower on long queries)."""

from __future__ import annotations

import random

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite.search import compile_params, search_sql
from kbstore.documents import make_document

NOW = "2026-06-30T12:00:00+00:00"
WORDS = ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta")


@pytest.fixture(scope="module")
def title_store(tmp_path_factory):  # type: ignore[no-untyped-def]
    store = KnowledgeStore.open(tmp_path_factory.mktemp("titles") / "t.sqlite",
                                FakeEmbedder(16), hype=False)
    rng = random.Random(3)
    docs = [make_document(f"domains/t{i}.md",
                          title=" ".join(rng.choices(WORDS, k=rng.randint(1, 6))),
                          body=f"body {i}") for i in range(60)]
    store.upsert_many(docs[:30])
    store.upsert_many(docs[30:])  # two FTS segments, as a file written in batches has
    yield store
    store.close()


def _title_list(store: KnowledgeStore, query: str) -> dict[int, float]:
    sql = search_sql()
    head = sql[:sql.index("\nfm_ranked AS (")].rstrip().rstrip(",")
    request, _ = store._request(query, None, 10, False, None, NOW, {})
    params = compile_params(request, 16)
    return dict(store.backend.conn.execute(head + "\nSELECT doc_id, title_score FROM fm_title",
                                           params).fetchall())


def _pairs_reference(store: KnowledgeStore, query: str) -> dict[int, float]:
    request, _ = store._request(query, None, 10, False, None, NOW, {})
    words = [f'"{w}"' for w in request.title_terms]
    if not words:
        return {}
    expression = words[0] if len(words) == 1 else " OR ".join(
        f"({a} AND {b})" for i, a in enumerate(words) for b in words[i + 1:])
    return dict(store.backend.conn.execute(
        "SELECT rowid, -rank FROM titles_fts WHERE titles_fts MATCH ?", (expression,)).fetchall())


@pytest.mark.parametrize("seed", range(25))
def test_title_scores_equal_fts5_on_the_or_of_word_pairs(title_store, seed: int) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    query = " ".join(rng.sample(WORDS, rng.randint(1, 5)))
    got, want = _title_list(title_store, query), _pairs_reference(title_store, query)
    assert want, f"no title holds the words of {query!r}: the case tests nothing"
    assert set(got) == set(want), query
    for doc_id, score in want.items():
        assert got[doc_id] == pytest.approx(score, rel=1e-9), (query, doc_id)


def test_one_shared_word_is_not_a_title_match(title_store) -> None:  # type: ignore[no-untyped-def]
    conn = title_store.backend.conn
    others = " OR ".join(WORDS[1:])
    only_alpha = {r[0] for r in conn.execute(
        "SELECT rowid FROM titles_fts WHERE titles_fts MATCH ?", (f"alpha NOT ({others})",))}
    assert only_alpha, "the corpus has no title with 'alpha' alone"
    got = _title_list(title_store, "alpha zzzunknown")
    assert not only_alpha & set(got)

"""Every hit's score equals a pure-Python reference recomputed from its
explained ranks (random stores, random settings), and convex fusion is
selectable. The SQL fusion itself on random rank lists is checked in
tests/sqlite/test_search_sql.py."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.documents import make_document
from kbstore.query import DEFAULTS

from .reference import (
    EXPLAIN_NAMES,
    LIST_WEIGHTS,
    RETRIEVERS,
    boost_for,
    decay_for,
    rrf_reference,
    vec_rank_weight,
    vector_gap,
)

NOW = "2026-06-30T12:00:00+00:00"


def test_rrf_reference_by_hand() -> None:
    scores = rrf_reference({"fm": {1: 1}, "fts": {1: 2, 2: 1}, "vec": {2: 3}},
                           {"fm": 1.0, "fts": 1.0, "vec": 2.0}, 60)
    assert scores[1] == pytest.approx(1 / 61 + 1 / 62)
    assert scores[2] == pytest.approx(1 / 61 + 2 / 63)


WORDS = ["apple", "river", "stone", "cloud", "garden", "engine", "violin", "copper",
         "forest", "lantern", "harbor", "pepper", "quartz", "saddle", "tundra", "walnut"]
word_lists = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
doc_strategy = st.tuples(st.sampled_from(["domains", "projects", "journal", "skills"]),
                         word_lists, word_lists,
                         st.lists(st.sampled_from(WORDS), max_size=3),
                         st.integers(0, 120))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(doc_strategy, min_size=1, max_size=15),
       query=st.lists(st.sampled_from(WORDS + ["the", "of"]), min_size=1, max_size=6)
       .map(" ".join),
       topic=st.sampled_from([None, "domains", "journal"]),
       k=st.sampled_from([1.0, 10.0, 60.0]),
       w=st.tuples(*[st.sampled_from([0.0, 0.5, 1.0, 2.0])] * 3))
def test_search_scores_equal_reference_from_explained_ranks(backend, docs, query, topic, k,
                                                            w) -> None:  # type: ignore[no-untyped-def]
    with KnowledgeStore.open(backend("prop"), FakeEmbedder(32), hype=False) as s:
        batch = []
        for i, (folder, title, body, tags, age) in enumerate(docs):
            path = f"skills/s{i}/SKILL.md" if folder == "skills" else f"{folder}/d{i}.md"
            updated = (dt.datetime.fromisoformat(NOW) - dt.timedelta(days=age)).isoformat()
            batch.append(make_document(path, title=title, body=body, tags=tags,
                                       updated=updated))
        s.upsert_many(batch)
        # latest=False: a "latest" question re-scores its best hits by date
        settings_ = {"k_rrf": k, "w_fm": w[0], "w_fts": w[1], "w_vec": w[2], "latest": False}
        hits = s.search(query, topic=topic, limit=1000, explain=True, now=NOW, **settings_)
    params = {**DEFAULTS, **settings_}
    weights = {name: params[weight] for name, weight in LIST_WEIGHTS.items()}
    for name in RETRIEVERS:  # each retriever's ranks are 1..n without gaps
        got = sorted(h.explain["ranks"][EXPLAIN_NAMES[name]] for h in hits
                     if h.explain["ranks"][EXPLAIN_NAMES[name]] is not None)
        assert got == list(range(1, len(got) + 1))
    cosines = [h.explain["raw"]["cosine"] for h in hits if h.explain["ranks"]["vector"]]
    for hit in hits:
        if topic is not None:
            assert hit.topic == topic
        ranks = hit.explain["ranks"]
        assert any(r is not None for r in ranks.values())
        # a frontmatter hit weighs w_fm x the share of the query's words its
        # tags cover, or w_fm x w_fm_title for a title match, whichever is more
        fm_factor = hit.explain["frontmatter_weight"] or 1.0
        assert 0.0 < fm_factor <= 1.0
        # the text lists' query-adaptive weight (text-vector agreement), one per query
        text = hit.explain["text_weight"]
        assert 0.0 <= text <= 1.0 and text == hits[0].explain["text_weight"]
        # the vector rank 1 weighs 1 + vec_standout x its cosine gap to rank 2
        gap = hit.explain["vector_gap"]
        assert gap == pytest.approx(vector_gap(cosines), rel=1e-6, abs=1e-12)
        hit_weights = {**weights, "fm": weights["fm"] * fm_factor * text,
                       "fts": weights["fts"] * text,
                       "vec": weights["vec"] * vec_rank_weight(ranks["vector"], gap,
                                                               params["vec_standout"])}
        base = rrf_reference({n: ({0: ranks[EXPLAIN_NAMES[n]]} if ranks[EXPLAIN_NAMES[n]]
                                  else {}) for n in LIST_WEIGHTS}, hit_weights, k).get(0, 0.0)
        boost = boost_for(hit.doc_type, params)
        decay = decay_for(hit.doc_type, hit.updated, NOW, params["half_life_days"],
                          params["recency_weight"])
        assert hit.explain["boost"] == pytest.approx(boost)
        assert hit.explain["decay"] == pytest.approx(decay, rel=1e-6)
        assert hit.score == pytest.approx(base * boost * decay, rel=1e-6, abs=1e-12)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_convex_fusion_is_selectable_and_differs(store: KnowledgeStore) -> None:
    store.upsert("domains/a.md", title="Copper kettle", body="copper kettle copper", tags=["tea"])
    store.upsert("domains/b.md", title="Tea leaves", body="green tea leaves copper")
    store.upsert("domains/c.md", title="Walnut tree", body="walnut harvest")
    rrf = {h.path: h for h in store.search("copper tea", explain=True, fusion="rrf")}
    convex = {h.path: h for h in store.search("copper tea", explain=True, fusion="convex")}
    assert set(rrf) == set(convex)
    for path, hit in convex.items():
        assert hit.score == pytest.approx(hit.explain["convex"] * hit.explain["boost"]
                                          * hit.explain["decay"])
        assert rrf[path].score == pytest.approx(sum(rrf[path].explain["rrf"].values()))
    assert [h.score for h in rrf.values()] != pytest.approx([convex[p].score for p in rrf])
    # min-max normalised: the best hit of a retriever contributes its full weight
    assert max(h.score for h in convex.values()) > 1.0 > max(h.score for h in rrf.values())


def test_recency_decay_can_be_turned_off(store: KnowledgeStore) -> None:
    old = (dt.datetime.fromisoformat(NOW) - dt.timedelta(days=60)).isoformat()
    store.upsert("journal/2026-05-01-pond.md", title="Pond", body="frogs in the pond",
                 updated=old)
    for off in (None, 0):
        hit = store.search("frogs pond", now=NOW, explain=True, half_life_days=off)[0]
        assert hit.explain["decay"] == 1.0
    # on by default, bounded: 1 - recency_weight * (1 - 2^(-60/30))
    assert store.search("frogs pond", now=NOW, explain=True)[0].explain["decay"] == \
        pytest.approx(1 - DEFAULTS["recency_weight"] * 0.75, rel=1e-6)
    assert store.search("frogs pond", now=NOW, explain=True, recency_weight=1.0)[0].explain[
        "decay"] == pytest.approx(0.25, rel=1e-6)

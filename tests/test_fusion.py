"""The SQL fusion equals a pure-Python reference.

Two angles: (1) the fusion part of kbstore/sql/search.sql run on random
rank lists, compared with ``rrf_reference``; (2) whole searches on random
stores, every hit's score recomputed from its explained ranks."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.ingest import make_document
from kbstore.search import DEFAULTS, search_sql

NOW = "2026-06-30T12:00:00+00:00"
RETRIEVERS = ("fm", "fts", "vec")
EXPLAIN_NAMES = {"fm": "frontmatter", "fts": "fts", "vec": "vector"}


def rrf_reference(rank_lists: dict[str, dict[int, int]], weights: dict[str, float],
                  k: float) -> dict[int, float]:
    """Weighted Reciprocal Rank Fusion: sum over retrievers of w / (k + rank)."""
    scores: dict[int, float] = {}
    for name, ranks in rank_lists.items():
        for doc, rank in ranks.items():
            scores[doc] = scores.get(doc, 0.0) + weights[name] / (k + rank)
    return scores


def convex_reference(score_lists: dict[str, dict[int, float]],
                     weights: dict[str, float]) -> dict[int, float]:
    """Sum of w x min-max-normalised score (a single-valued list counts as 1)."""
    out: dict[int, float] = {}
    for name, scores in score_lists.items():
        if not scores:
            continue
        lo, hi = min(scores.values()), max(scores.values())
        for doc, s in scores.items():
            norm = (s - lo) / (hi - lo) if hi > lo else 1.0
            out[doc] = out.get(doc, 0.0) + weights[name] * norm
    return out


def boost_for(doc_type: str, params: dict) -> float:
    return {"skill": params["boost_skill"], "journal": params["boost_journal"]}.get(
        doc_type, params["boost_entry"])


def decay_for(doc_type: str, updated: str | None, now: str, half_life: float) -> float:
    if doc_type != "journal" or not updated:
        return 1.0
    ref = dt.datetime.fromisoformat(now)
    when = dt.datetime.fromisoformat(updated)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    age = max((ref - when).total_seconds() / 86400, 0.0)
    return math.exp(-math.log(2) * age / half_life)


# -- (1) the fusion SQL on random rank lists ----------------------------------

FUSION_START = "\nfused AS ("


def fusion_sql() -> str:
    """search.sql's fusion, fed by rank lists from JSON instead of the retrievers."""
    sql = search_sql()
    assert FUSION_START in sql, "search.sql changed shape: update test_fusion.fusion_sql()"
    tail = sql[sql.index(FUSION_START):]

    def ranked(name: str, extra: str = "") -> str:
        return (f"{name}_ranked AS (SELECT json_extract(value, '$[0]') AS doc_id, "
                f"json_extract(value, '$[1]') AS score, json_extract(value, '$[2]') AS rank"
                f"{extra} FROM json_each(:{name}_json))")

    return ("WITH " + ranked("fm", ", 1.0 AS weight") + ",\n" + ranked("fts") + ",\n"
            + ranked("vec", ", json_extract(value, '$[0]') * 32 AS vector_id") + "," + tail)


DOC_TYPES = ("entry", "skill", "journal")


@pytest.fixture(scope="module")
def fusion_store(tmp_path_factory) -> KnowledgeStore:
    path = tmp_path_factory.mktemp("fusion") / "f.sqlite"
    store = KnowledgeStore.open(path, FakeEmbedder(16), hype=False)
    rng = random.Random(7)
    docs = []
    for i in range(40):
        doc_type = DOC_TYPES[i % 3]
        folder = {"entry": "domains", "skill": "skills", "journal": "journal"}[doc_type]
        path_i = f"skills/s{i}/SKILL.md" if doc_type == "skill" else f"{folder}/d{i}.md"
        updated = (dt.datetime(2026, 6, 30, tzinfo=dt.timezone.utc)
                   - dt.timedelta(days=rng.uniform(-5, 200))).isoformat()
        docs.append(make_document(path_i, title=f"Doc {i}", body=f"body {i}", updated=updated))
    store.upsert_many(docs)  # one transaction
    yield store
    store.close()


def _random_lists(rng: random.Random, ids: list[int]) -> dict[str, list[tuple[int, float, int]]]:
    lists = {}
    for name in RETRIEVERS:
        chosen = rng.sample(ids, rng.randint(0, len(ids)))
        scores = sorted((rng.uniform(-5, 5) for _ in chosen), reverse=True)
        lists[name] = [(doc, score, rank) for rank, (doc, score)
                       in enumerate(zip(chosen, scores, strict=True), start=1)]
    return lists


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1),
       k=st.floats(1, 200), w=st.tuples(*[st.floats(0, 3)] * 3),
       boosts=st.tuples(*[st.floats(0.1, 2)] * 3), half_life=st.floats(1, 365),
       fusion=st.sampled_from(["rrf", "convex"]))
def test_sql_fusion_equals_reference_on_random_rank_lists(
        fusion_store: KnowledgeStore, seed: int, k: float, w: tuple, boosts: tuple,
        half_life: float, fusion: str) -> None:
    conn = fusion_store.conn
    rows = conn.execute("SELECT id, doc_type, updated FROM documents").fetchall()
    meta = {r[0]: (r[1], r[2]) for r in rows}
    rng = random.Random(seed)
    lists = _random_lists(rng, sorted(meta))
    weights = dict(zip(RETRIEVERS, w, strict=True))
    params = {**DEFAULTS, "fusion": fusion, "k_rrf": k, "w_fm": w[0], "w_fts": w[1],
              "w_vec": w[2], "boost_entry": boosts[0], "boost_skill": boosts[1],
              "boost_journal": boosts[2], "half_life_days": half_life, "now": NOW,
              "min_similarity": None, "limit": 1000,
              **{f"{n}_json": json.dumps(lists[n]) for n in RETRIEVERS}}
    cursor = conn.execute(fusion_sql(), params)
    columns = [c[0] for c in cursor.description]
    got = {r["doc_id"]: r for r in (dict(zip(columns, row, strict=True)) for row in cursor)}

    if fusion == "rrf":
        base = rrf_reference({n: {d: rank for d, _, rank in lists[n]} for n in RETRIEVERS},
                             weights, k)
    else:
        base = convex_reference({n: {d: s for d, s, _ in lists[n]} for n in RETRIEVERS},
                                weights)
    expected = {doc: b * boost_for(meta[doc][0], params)
                * decay_for(meta[doc][0], meta[doc][1], NOW, half_life)
                for doc, b in base.items()}
    assert set(got) == set(expected)
    for doc, score in expected.items():
        assert got[doc]["score"] == pytest.approx(score, rel=1e-7, abs=1e-12)
    order = [r[0] for r in sorted(expected.items(), key=lambda kv: (-kv[1], kv[0]))]
    produced = list(got)  # rows arrive in the statement's ORDER BY
    # equal scores may be ordered either way by float noise; compare by score
    assert [pytest.approx(expected[d], rel=1e-7, abs=1e-12) for d in order] == [
        expected[d] for d in produced]


def test_rrf_reference_by_hand() -> None:
    scores = rrf_reference({"fm": {1: 1}, "fts": {1: 2, 2: 1}, "vec": {2: 3}},
                           {"fm": 1.0, "fts": 1.0, "vec": 2.0}, 60)
    assert scores[1] == pytest.approx(1 / 61 + 1 / 62)
    assert scores[2] == pytest.approx(1 / 61 + 2 / 63)


# -- (2) whole searches, scores recomputed from the explanation ------------------

WORDS = ["apple", "river", "stone", "cloud", "garden", "engine", "violin", "copper",
         "forest", "lantern", "harbor", "pepper", "quartz", "saddle", "tundra", "walnut"]
word_lists = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
doc_strategy = st.tuples(st.sampled_from(["domains", "projects", "journal", "skills"]),
                         word_lists, word_lists,
                         st.lists(st.sampled_from(WORDS), max_size=3),
                         st.integers(0, 120))


@settings(max_examples=40, deadline=None)
@given(docs=st.lists(doc_strategy, min_size=1, max_size=15),
       query=st.lists(st.sampled_from(WORDS + ["the", "of"]), min_size=1, max_size=6)
       .map(" ".join),
       topic=st.sampled_from([None, "domains", "journal"]),
       k=st.sampled_from([1.0, 10.0, 60.0]),
       w=st.tuples(*[st.sampled_from([0.0, 0.5, 1.0, 2.0])] * 3))
def test_search_scores_equal_reference_from_explained_ranks(docs, query, topic, k, w) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with KnowledgeStore.open(Path(tmp) / "p.sqlite", FakeEmbedder(32), hype=False) as s:
            batch = []
            for i, (folder, title, body, tags, age) in enumerate(docs):
                path = f"skills/s{i}/SKILL.md" if folder == "skills" else f"{folder}/d{i}.md"
                updated = (dt.datetime.fromisoformat(NOW) - dt.timedelta(days=age)).isoformat()
                batch.append(make_document(path, title=title, body=body, tags=tags,
                                           updated=updated))
            s.upsert_many(batch)
            settings_ = {"k_rrf": k, "w_fm": w[0], "w_fts": w[1], "w_vec": w[2]}
            hits = s.search(query, topic=topic, limit=1000, explain=True, now=NOW, **settings_)
    params = {**DEFAULTS, **settings_}
    weights = dict(zip(RETRIEVERS, w, strict=True))
    for name in RETRIEVERS:  # each retriever's ranks are 1..n without gaps
        got = sorted(h.explain["ranks"][EXPLAIN_NAMES[name]] for h in hits
                     if h.explain["ranks"][EXPLAIN_NAMES[name]] is not None)
        assert got == list(range(1, len(got) + 1))
    for hit in hits:
        if topic is not None:
            assert hit.topic == topic
        ranks = hit.explain["ranks"]
        assert any(r is not None for r in ranks.values())
        # a frontmatter hit weighs w_fm for a tag match, w_fm * w_fm_title for a title match
        fm_factor = hit.explain["frontmatter_weight"] or 1.0
        assert fm_factor in (1.0, params["w_fm_title"])
        hit_weights = {**weights, "fm": weights["fm"] * fm_factor}
        base = rrf_reference({n: ({0: ranks[EXPLAIN_NAMES[n]]} if ranks[EXPLAIN_NAMES[n]]
                                  else {}) for n in RETRIEVERS}, hit_weights, k).get(0, 0.0)
        boost = boost_for(hit.doc_type, params)
        decay = decay_for(hit.doc_type, hit.updated, NOW, params["half_life_days"])
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

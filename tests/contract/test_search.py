"""Hybrid search behaviour (issue 3): stemming, BM25, the exact-tag
retriever, the topic filter inside every retriever, boosts, journal decay,
embedder fingerprints and reembed, hostile queries, the score floor, and
search arguments that are refused with InvalidQueryError."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbstore import (
    EmbedderChangedError,
    EmbedderMismatchError,
    EmbedderUnavailableError,
    EmptyQueryError,
    FakeEmbedder,
    InvalidQueryError,
    KnowledgeStore,
)
from kbstore.doctor import diagnose
from kbstore.documents import make_document

from .public import blank_query, questions

NOW = "2026-06-30T12:00:00+00:00"


def ranks(hit) -> dict:
    return hit.explain["ranks"]


def by_path(hits) -> dict:
    return {h.path: h for h in hits}


def test_stemming_matches_word_forms(store: KnowledgeStore) -> None:
    store.upsert("domains/exercise.md", title="Morning routine",
                 body="She was running quickly through the park every morning.")
    store.upsert("domains/other.md", title="Cooking", body="Slowly simmer the onions.")
    hits = store.search("run quick", explain=True)
    assert hits[0].path == "domains/exercise.md"
    assert ranks(hits[0])["fts"] == 1  # porter: running -> run, quickly -> quick
    assert all(ranks(h)["fts"] is None for h in hits if h.path == "domains/other.md")


@pytest.mark.parametrize(("text", "query"), [
    ("ÉCOLE normale", "école"), ("ΚΌΣΜΟΣ", "κόσμος"), ("κόσμος", "ΚΌΣΜΟΣ"),
    ("Straße", "straße"), ("ΣΊΣΥΦΟΣ", "σίσυφος")])
def test_full_text_folds_unicode_case_whatever_the_database_locale(
        store: KnowledgeStore, text: str, query: str) -> None:
    """Case folds on both sides as SQLite's unicode61 folds it: non-ASCII
    capitals and the final sigma (PostgreSQL's own folding follows the
    database's locale: ASCII only under "C", no final sigma under C.UTF-8)."""
    store.upsert("domains/word.md", title=text, body=f"{text} here")
    store.upsert("domains/other.md", title="Other", body="nothing to see")
    hit = by_path(store.search(query, explain=True))["domains/word.md"]
    assert ranks(hit)["fts"] == 1
    assert ranks(hit)["frontmatter"] == 1  # the title's words
    assert all(ranks(h)["fts"] is None for h in store.search(query, explain=True)
               if h.path == "domains/other.md")


def test_bm25_prefers_more_occurrences(store: KnowledgeStore) -> None:
    filler = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do"
    store.upsert("domains/once.md", title="Notes one",
                 body=f"marmalade {filler} plain plain plain")
    store.upsert("domains/thrice.md", title="Notes two",
                 body=f"marmalade {filler} marmalade marmalade")
    hits = store.search("marmalade", explain=True)
    fts = {h.path: ranks(h)["fts"] for h in hits}
    assert fts == {"domains/thrice.md": 1, "domains/once.md": 2}
    raw = {h.path: h.explain["raw"]["bm25"] for h in hits}
    assert raw["domains/thrice.md"] > raw["domains/once.md"] > 0


def test_bm25_weights_title_above_body(store: KnowledgeStore) -> None:
    store.upsert("domains/body.md", title="Notes alpha", body="a walrus appeared today here")
    store.upsert("domains/title.md", title="Walrus", body="a creature appeared today here")
    hits = store.search("walrus", explain=True)
    assert ranks(by_path(hits)["domains/title.md"])["fts"] == 1


def test_exact_tag_retriever(store: KnowledgeStore) -> None:
    # the tag appears nowhere in title or body
    store.upsert("projects/tagged.md", title="Quarterly plan", body="Budget and hiring.",
                 tags=["xylophone"])
    store.upsert("projects/plain.md", title="Another plan", body="Budget and hiring.")
    hits = store.search("xylophone", explain=True)
    hit = by_path(hits)["projects/tagged.md"]
    assert hits[0].path == "projects/tagged.md"
    assert ranks(hit)["frontmatter"] == 1
    assert all(ranks(h)["frontmatter"] is None for h in hits if h.path == "projects/plain.md")


def test_multi_word_and_case_insensitive_tags(store: KnowledgeStore) -> None:
    store.upsert("domains/a.md", title="Alpha", body="text", tags=["Error-Handling"])
    store.upsert("domains/b.md", title="Beta", body="text", tags=["machine learning"])
    fm = {h.path: ranks(h)["frontmatter"] for h in store.search("error handling", explain=True)}
    assert fm["domains/a.md"] == 1
    fm = {h.path: ranks(h)["frontmatter"] for h in store.search("Machine Learning",
                                                                  explain=True)}
    assert fm["domains/b.md"] == 1


def test_tag_match_beats_title_overlap_in_frontmatter(store: KnowledgeStore) -> None:
    store.upsert("domains/title.md", title="Kayak rentals", body="x")
    store.upsert("domains/tag.md", title="Boats", body="x", tags=["kayak"])
    fm = {h.path: ranks(h)["frontmatter"] for h in store.search("kayak", explain=True)}
    assert fm == {"domains/tag.md": 1, "domains/title.md": 2}


@pytest.fixture
def topic_store(store: KnowledgeStore) -> KnowledgeStore:
    """20 close matches in 'projects', 3 weaker ones in 'domains'."""
    for i in range(20):
        store.upsert(f"projects/p{i}.md", title="Compost heap", body="compost heap",
                     tags=["compost"])
    for i in range(3):
        store.upsert(f"domains/d{i}.md", title="Soil science", tags=["compost"],
                     body="compost microbes thermophilic decomposition nitrogen carbon ratio")
    return store


def test_topic_filter_inside_every_retriever(topic_store: KnowledgeStore) -> None:
    # vec_k_doc=5: a KNN filtered *after* the fact would find only projects/
    hits = topic_store.search("compost heap", topic="domains", limit=50, explain=True,
                              vec_k_doc=5)
    assert sorted(h.path for h in hits) == ["domains/d0.md", "domains/d1.md", "domains/d2.md"]
    for hit in hits:
        assert hit.topic == "domains"
        r = ranks(hit)
        # each retriever ran and ranked inside the topic only
        assert r["frontmatter"] in (1, 2, 3)
        assert r["fts"] in (1, 2, 3)
        assert r["vector"] in (1, 2, 3)
    # Unfiltered, the 5 nearest vectors are all in projects/: a topic filter
    # applied after the KNN would have left domains/ without vector ranks.
    unfiltered = topic_store.search("compost heap", limit=50, explain=True, vec_k_doc=5)
    assert {h.topic for h in unfiltered if ranks(h)["vector"] is not None} == {"projects"}
    assert all(ranks(h)["fts"] > 3 for h in unfiltered if h.topic == "domains")


def test_topic_filter_with_no_documents_in_topic(topic_store: KnowledgeStore) -> None:
    assert topic_store.search("compost heap", topic="journal") == []


def test_skill_boost(store: KnowledgeStore) -> None:
    body = "Steps to brew pour-over coffee with a gooseneck kettle."
    store.upsert("projects/coffee.md", title="Brew coffee", body=body, tags=["coffee"])
    store.upsert("skills/coffee/SKILL.md", title="Brew coffee", body=body, tags=["coffee"])
    # The type factors are off by default (they used to beat clear evidence).
    unboosted = store.search("brew coffee", explain=True, now=NOW)
    assert unboosted[0].path == "projects/coffee.md"
    assert all(h.explain["boost"] == 1.0 for h in unboosted)
    hits = store.search("brew coffee", explain=True, now=NOW, boost_skill=1.2)
    assert [h.path for h in hits] == ["skills/coffee/SKILL.md", "projects/coffee.md"]
    skill, entry = hits
    assert skill.explain["boost"] == pytest.approx(1.2)
    assert entry.explain["boost"] == pytest.approx(1.0)
    # identical content: the skill loses every tie-break on doc id, yet wins on the boost
    for h in hits:
        assert h.score == pytest.approx(sum(h.explain["rrf"].values()) * h.explain["boost"])
    assert skill.score > entry.score


def _days_before(now: str, days: float) -> str:
    return (dt.datetime.fromisoformat(now) - dt.timedelta(days=days)).isoformat()


def test_journal_decay_and_none_for_other_types(store: KnowledgeStore) -> None:
    old = _days_before(NOW, 30)
    store.upsert("journal/2026-05-31-pond.md", title="Pond", body="frogs in the pond",
                 updated=old)
    store.upsert("domains/pond.md", title="Pond", body="frogs in the pond", updated=old)
    store.upsert("skills/pond/SKILL.md", title="Pond", body="frogs in the pond", updated=old)
    store.upsert("journal/2026-06-30-today.md", title="Pond today", body="frogs in the pond",
                 updated=NOW)
    store.upsert("journal/2026-08-01-future.md", title="Pond later", body="frogs in the pond",
                 updated=_days_before(NOW, -30))
    store.upsert("journal/undated.md", title="Pond undated", body="frogs in the pond")
    # By default the factor is bounded: 1 - recency_weight * (1 - 2^(-age/half_life)).
    bounded = by_path(store.search("frogs pond", explain=True, now=NOW, limit=20))
    assert bounded["journal/2026-05-31-pond.md"].explain["decay"] == pytest.approx(
        1 - 0.05 * 0.5, abs=1e-6)
    # recency_weight=1: the full exponential decay
    hits = by_path(store.search("frogs pond", explain=True, now=NOW, limit=20,
                                recency_weight=1.0))
    assert hits["journal/2026-05-31-pond.md"].explain["decay"] == pytest.approx(0.5, abs=1e-6)
    assert hits["journal/2026-05-31-pond.md"].explain["boost"] == pytest.approx(1.0)
    assert hits["domains/pond.md"].explain["decay"] == 1.0
    assert hits["skills/pond/SKILL.md"].explain["decay"] == 1.0
    assert hits["journal/2026-06-30-today.md"].explain["decay"] == pytest.approx(1.0)
    assert hits["journal/2026-08-01-future.md"].explain["decay"] == pytest.approx(1.0)
    assert hits["journal/undated.md"].explain["decay"] == 1.0
    # the half-life is a parameter
    slow = by_path(store.search("frogs pond", explain=True, now=NOW, limit=20,
                                half_life_days=60, recency_weight=1.0))
    assert slow["journal/2026-05-31-pond.md"].explain["decay"] == pytest.approx(
        math.exp(-math.log(2) * 0.5), abs=1e-6)


def test_fingerprint_mismatch_is_refused(location, embedder: FakeEmbedder) -> None:
    with KnowledgeStore.open(location, embedder, hype=False) as s:
        s.upsert("domains/a.md", title="A", body="apples")
    with pytest.raises(EmbedderMismatchError, match="kbstore reembed"):
        KnowledgeStore.open(location, FakeEmbedder(dim=32), hype=False)

    class Renamed(FakeEmbedder):
        name = "other"

    with pytest.raises(EmbedderMismatchError, match="kbstore reembed"):
        KnowledgeStore.open(location, Renamed(dim=64), hype=False)
    with pytest.raises(EmbedderMismatchError, match="kbstore reembed"):
        KnowledgeStore.open(location, FakeEmbedder(dim=32), read_only=True)
    with KnowledgeStore.open(location, FakeEmbedder(dim=64), hype=False) as s:
        assert s.search("apples")[0].path == "domains/a.md"


def test_a_store_without_documents_takes_another_embedder(location) -> None:
    """An empty store is not trapped by the first embedder it was opened with
    (formerly: a failed nomic download left a file only nomic could open)."""
    with KnowledgeStore.open(location, FakeEmbedder(dim=32), hype=False) as s:
        assert s.status()["embedder"]["dim"] == 32
    with KnowledgeStore.open(location, FakeEmbedder(dim=64), hype=False) as s:
        assert s.status()["embedder"]["dim"] == 64  # re-stamped
        s.upsert("domains/a.md", title="Apples", body="apple orchard")
        assert s.search("apple orchard", explain=True)[0].explain["ranks"]["vector"] == 1
    with pytest.raises(EmbedderMismatchError):
        KnowledgeStore.open(location, FakeEmbedder(dim=32), hype=False)
    with KnowledgeStore.open(location, hype=False) as s:  # deleting every document frees it
        s.delete("domains/a.md")
    with KnowledgeStore.open(location, FakeEmbedder(dim=32), hype=False) as s:
        assert s.status()["embedder"]["dim"] == 32


def test_reembed_to_another_dimension(location, embedder: FakeEmbedder) -> None:
    with KnowledgeStore.open(location, embedder, hype=False) as s:
        s.upsert("domains/a.md", title="Apples", body="apple orchard harvest")
        s.upsert("domains/b.md", title="Boats", body="sailing boat harbour")
        bigger = FakeEmbedder(dim=128)
        assert s.reembed(bigger) == 2
        assert bigger.calls == 1 + 2  # one probe text, then the two documents
        status = s.status()
        assert status["embedder"] == bigger.fingerprint()
        assert status["vectors"] == status["doc_vectors"] == 2
        assert status["rebuild_in_progress"] is False
        hit = s.search("sailing boat", explain=True)[0]
        assert hit.path == "domains/b.md" and ranks(hit)["vector"] == 1
        assert diagnose(s).ok
    with pytest.raises(EmbedderMismatchError):
        KnowledgeStore.open(location, FakeEmbedder(dim=64), hype=False)
    with KnowledgeStore.open(location, hype=False) as s:  # the stored fingerprint
        assert s.embedder.dim == 128
        assert s.status()["vectors"] == 2


def test_reembed_by_name_and_back(location, embedder: FakeEmbedder) -> None:
    with KnowledgeStore.open(location, embedder, hype=False) as s:
        s.upsert("domains/a.md", title="Apples", body="apple orchard harvest")
        assert s.reembed("fake", dim=16) == 1
        assert s.status()["embedder"]["dim"] == 16
        assert s.reembed(FakeEmbedder(64)) == 1
        assert s.status()["embedder"] == embedder.fingerprint()
        assert s.search("apple", explain=True)[0].explain["ranks"]["vector"] == 1


def test_reembed_keeps_questions_and_re_embeds_them(location, fake_llm) -> None:
    fake_llm.answer = lambda prompt: ("How do I keep the bread culture alive?"
                                      if "Starter" in prompt else "Where do boats go?")
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=True) as s:
        s.upsert("domains/starter.md", title="Starter", body="Refresh with flour and water.")
        s.upsert("domains/boats.md", title="Boats", body="sailing boat harbour")
        before = questions(s)
        bigger = FakeEmbedder(128)
        assert s.reembed(bigger) == 2
        assert bigger.calls == 1 + 2 + 2  # probe, two documents, their two questions
        assert questions(s) == before
        assert s.status()["vectors"] == 4
        hit = s.search("keep the bread culture alive", explain=True)[0]
        assert hit.explain["matched_question"] == "How do I keep the bread culture alive?"
    assert len(fake_llm.calls) == 2  # the LLM is never asked again


class _BreaksAfter(FakeEmbedder):
    """Works for ``good`` calls (the probe among them), then raises."""

    def __init__(self, dim: int, good: int) -> None:
        super().__init__(dim)
        self.good = good

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        if self.good <= 0:
            raise RuntimeError("the model crashed half way")
        self.good -= 1
        return super().embed_documents(texts)


class _Useless(FakeEmbedder):
    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        return super().embed_documents(texts) * float("nan")


def _fifty(s: KnowledgeStore) -> None:
    s.upsert_many([make_document(f"domains/d{i}.md", title=f"Note {i}",
                                 body=f"apple orchard note {i} harvest") for i in range(50)])


def test_a_failing_reembed_changes_nothing_and_can_be_run_again(location,
                                                               embedder: FakeEmbedder) -> None:
    with KnowledgeStore.open(location, embedder, hype=False) as s:
        _fifty(s)
        before = s.status()
        hits = [(h.path, h.score) for h in s.search("apple harvest note 7", limit=5)]
        with pytest.raises(RuntimeError, match="crashed"):
            s.reembed(_BreaksAfter(128, good=2), batch_size=10)  # probe + one batch staged
        after = s.status()
        assert after["embedder"] == before["embedder"] == embedder.fingerprint()
        assert (after["documents"], after["vectors"]) == (before["documents"], before["vectors"])
        # the old vectors serve meanwhile, unchanged
        assert [(h.path, h.score) for h in s.search("apple harvest note 7", limit=5)] == hits
        assert diagnose(s).ok  # an interrupted rebuild is a note, not a problem
        s.upsert("domains/later.md", title="Later", body="written after the failure")
    with KnowledgeStore.open(location, hype=False) as s:
        assert s.embedder.dim == 64  # the file was never switched
        assert s.reembed(FakeEmbedder(128), batch_size=10) >= 41
        status = s.status()
        assert status["embedder"]["dim"] == 128 and status["doc_vectors"] == 51
        assert status["rebuild_in_progress"] is False
        assert s.search("written after the failure", limit=1)[0].path == "domains/later.md"


def test_an_embedder_that_makes_no_usable_vector_is_refused_before_anything(
        location, embedder: FakeEmbedder) -> None:
    with KnowledgeStore.open(location, embedder, hype=False) as s:
        s.upsert("domains/a.md", title="Apples", body="apple orchard harvest")
        useless = _Useless(128)
        with pytest.raises(EmbedderUnavailableError, match="nothing was changed"):
            s.reembed(useless)
        assert useless.calls == 1  # only the probe
        status = s.status()
        assert status["embedder"] == embedder.fingerprint()
        assert status["rebuild_in_progress"] is False
        assert s.search("apple", explain=True)[0].explain["ranks"]["vector"] == 1


def test_a_long_lived_store_follows_or_refuses_another_process_reembed(
        location, embedder: FakeEmbedder) -> None:
    with KnowledgeStore.open(location, embedder, hype=False) as first:
        first.upsert("domains/a.md", title="Apples", body="apple orchard harvest")
    with KnowledgeStore.open(location, hype=False) as following, \
            KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as pinned:
        with KnowledgeStore.open(location, hype=False) as other:
            other.reembed(FakeEmbedder(128))
        # opened from the stored fingerprint: it follows the new embedder
        assert following.search("apple", explain=True)[0].explain["ranks"]["vector"] == 1
        assert following.embedder.dim == 128
        assert following.upsert("domains/b.md", title="Boats", body="sailing") == "added"
        # opened with its own embedder: it refuses rather than mixing models
        with pytest.raises(EmbedderChangedError, match="re-embedded"):
            pinned.upsert("domains/c.md", title="C", body="c")
        with pytest.raises(EmbedderChangedError):
            pinned.search("apple")
    with KnowledgeStore.open(location, hype=False) as s:
        assert s.paths() == ["domains/a.md", "domains/b.md"]
        assert diagnose(s).ok


HOSTILE_BITS = ['"', "*", ":", "-", "^", "(", ")", "AND", "OR", "NOT", "NEAR", "NEAR/2",
                "\x00", "🙂", "title:", "{", "}", "'", ";", "--", "\\", "+", "''"]
hostile_text = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(HOSTILE_BITS), st.text(max_size=8)),
             max_size=30).map(" ".join),
    st.lists(st.sampled_from(HOSTILE_BITS + ["x", "compost"]), max_size=30).map("".join),
    st.text(min_size=2000, max_size=5000),
)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(query=hostile_text)
def test_hostile_queries_never_raise(topic_store: KnowledgeStore, query: str) -> None:
    if blank_query(query):
        with pytest.raises(EmptyQueryError):
            topic_store.search(query)
        return
    hits = topic_store.search(query, limit=5, explain=True)
    assert len(hits) <= 5
    assert all(isinstance(h.score, float) and h.score >= 0 for h in hits)


@pytest.mark.parametrize("query", ['"compost', "compost AND", "NOT compost", "(compost",
                                   "compost*", "title:compost", "NEAR(compost heap)",
                                   "-compost", "^compost", "compost:heap"])
def test_fts_syntax_is_just_words(topic_store: KnowledgeStore, query: str) -> None:
    hits = topic_store.search(query, limit=3, explain=True)
    assert hits and ranks(hits[0])["fts"] is not None


@pytest.mark.parametrize("query", ["", "   ", "\t\n", "\x00"])
def test_blank_query_is_a_clear_error(store: KnowledgeStore, query: str) -> None:
    with pytest.raises(EmptyQueryError, match="empty"):
        store.search(query)


def test_bad_parameters_are_rejected(store: KnowledgeStore) -> None:
    with pytest.raises(ValueError, match="limit"):
        store.search("x", limit=0)
    with pytest.raises(ValueError, match="fusion"):
        store.search("x", fusion="borda")
    with pytest.raises(TypeError, match="unknown search parameter"):
        store.search("x", k_rff=10)


@pytest.mark.parametrize("kwargs, needle", [
    ({"limit": 2**63}, "limit"), ({"limit": True}, "limit"), ({"limit": "5"}, "limit"),
    ({"topic": ["projects"]}, "topic"), ({"topic": "  "}, "topic"),
    ({"query_vector": [0.1] * 8}, "dimensions"), ({"query_vector": [float("nan")] * 64}, "NaN"),
    ({"query_vector": [0.1] * 63 + [float("inf")]}, "infinity"),
    ({"query_vector": [float("inf"), float("-inf")] + [0.1] * 62}, "infinity"),
    ({"query_vector": (b"\x00\x00\xc0\x7f" + bytes(4 * 63))}, "NaN"),
    ({"query_vector": "not numbers"}, "query_vector"),
    ({"boost_skill": float("inf")}, "finite"), ({"boost_skill": 0}, "boost_skill"),
    ({"k_rrf": -1}, "k_rrf"), ({"w_fts": -0.5}, "w_fts"), ({"min_similarity": 2.0}, "cosine"),
    ({"vec_k_doc": 10_000}, "vec_k_doc"), ({"half_life_days": -3}, "half_life_days"),
    ({"now": "yesterday"}, "ISO 8601"), ({"fts_limit": 0}, "fts_limit"),
], ids=lambda v: str(v)[:40])
def test_out_of_range_arguments_are_invalid_query_errors(store: KnowledgeStore, kwargs,
                                                         needle: str) -> None:  # type: ignore[no-untyped-def]
    store.upsert("domains/a.md", title="A", body="apples")
    with pytest.raises(InvalidQueryError, match=needle):
        store.search("apples", **kwargs)


def test_a_query_vector_replaces_the_embedded_query(store: KnowledgeStore,
                                                    embedder: FakeEmbedder) -> None:
    store.upsert("domains/a.md", title="Apples", body="apple orchard harvest")
    store.upsert("domains/b.md", title="Boats", body="sailing boat harbour")
    vector = embedder.embed_queries(["sailing boat harbour"])[0]
    calls = embedder.calls
    for as_given in (vector, vector.tolist(), vector.astype("float32").tobytes()):
        hits = store.search("words that match nothing", query_vector=as_given, explain=True)
        assert hits[0].path == "domains/b.md" and ranks(hits[0])["vector"] == 1
    assert embedder.calls == calls  # the query text was not embedded


def test_min_similarity_floor(store: KnowledgeStore) -> None:
    store.upsert("domains/bees.md", title="Beekeeping", body="hive honey bees queen swarm")
    store.upsert("domains/tea.md", title="Green tea", body="steep green tea leaves briefly")
    assert store.search("quantum chromodynamics lattice gluon", min_similarity=0.3) == []
    # without the floor the vector side always returns its nearest neighbours
    assert store.search("quantum chromodynamics lattice gluon") != []
    related = store.search("honey bees hive", min_similarity=0.3, explain=True)
    assert [h.path for h in related] == ["domains/bees.md"]
    assert related[0].explain["raw"]["cosine"] >= 0.3


def test_explain_fields(store: KnowledgeStore) -> None:
    store.upsert("domains/bees.md", title="Beekeeping", body="hive honey bees", tags=["bees"])
    hit = store.search("bees hive", explain=True)[0]
    assert set(hit.explain) >= {"ranks", "raw", "rrf", "convex", "boost", "decay",
                                "matched_vector", "matched_question"}
    lists = {"frontmatter", "fts", "vector", "hype", "hype_fts", "date"}
    assert set(hit.explain["ranks"]) == set(hit.explain["rrf"]) == lists
    assert set(hit.explain["raw"]) == {"bm25", "cosine", "question_cosine"}
    assert hit.explain["matched_vector"] == "doc"
    assert hit.snippet.startswith("hive honey bees")
    assert (hit.tags, hit.doc_type, hit.topic, hit.title) == (["bees"], "entry", "domains",
                                                              "Beekeeping")
    plain = store.search("bees hive")[0]
    assert plain.explain is None and "explain" not in plain.to_dict()


def test_hype_question_match_is_explained(location, fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.answer = lambda prompt: "How do I keep the bread culture alive?"
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=True) as s:
        s.upsert("domains/starter.md", title="Starter", body="Refresh with flour and water.")
        hit = s.search("keep the bread culture alive", explain=True)[0]
        assert hit.path == "domains/starter.md"
        # the question vectors are their own list; matched_vector names the
        # document-side vector (document or chunk)
        assert hit.explain["ranks"]["hype"] == 1
        assert hit.explain["matched_vector"] in ("doc", "chunk")
        assert hit.explain["matched_question"] == "How do I keep the bread culture alive?"

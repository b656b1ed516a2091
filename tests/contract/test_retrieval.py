"""Retrieval behaviours through the public API (FakeEmbedder, fake LLM):
chunk vectors for long documents, HyPE as its own list, dates, "latest"
questions, bounded recency and type boosts, tag weights, the confidence
floor."""

from __future__ import annotations

import datetime as dt

import pytest

from kbstore import FakeEmbedder, InvalidQueryError, KnowledgeStore

NOW = "2024-06-19T12:00:00+00:00"  # a Wednesday
FILLER = ("the harbour office keeps ledgers of cargo ships tides weather and crew rosters "
          "for every season").split()


def filler(n: int, salt: str = "") -> str:
    """n distinct words that share nothing with the queries below."""
    return " ".join(f"{FILLER[i % len(FILLER)]}{salt}x{i // len(FILLER)}" for i in range(n))


def _ago(days: int) -> str:
    return (dt.datetime.fromisoformat(NOW) - dt.timedelta(days=days)).date().isoformat()


@pytest.fixture
def kb(location: str):
    with KnowledgeStore.open(location, FakeEmbedder(256), hype=False) as store:
        yield store


VEC = {"w_fm": 0, "w_fts": 0, "w_hype": 0, "w_date": 0}  # the vector list alone


# -- long documents: chunk vectors -------------------------------------------------------


def _long_doc(kb: KnowledgeStore) -> str:
    fact = "the wifi password of the lighthouse cabin is zebra crossing"
    body = f"{filler(300)} {fact} {filler(60)}"
    kb.upsert("domains/harbour.md", title="Harbour office", body=body)
    for i in range(5):
        kb.upsert(f"domains/other-{i}.md", title=f"Other {i}", body=filler(40, salt=str(i)))
    return fact


def test_fact_past_the_window_is_found_by_a_chunk_vector(kb: KnowledgeStore) -> None:
    fact = _long_doc(kb)
    assert kb.embedder.max_tokens == 128  # the fact sits at word ~300
    assert kb.status()["chunk_vectors"] >= 3
    hits = kb.search("lighthouse cabin wifi password", explain=True, **VEC)
    top = hits[0]
    assert top.path == "domains/harbour.md"
    assert top.explain["matched_vector"] == "chunk"
    assert "lighthouse cabin" in top.snippet  # the snippet comes from the best chunk
    start, end = top.explain["matched_chunk"]
    assert fact in kb.get("domains/harbour.md").body[start:end]
    # Without chunk vectors the document vector never saw the fact.
    without = kb.search("lighthouse cabin wifi password", explain=True, vec_k_chunk=0, **VEC)
    assert all(h.explain["matched_vector"] != "chunk" for h in without)
    doc_only = {h.path: h.explain["raw"]["cosine"] for h in without}
    assert doc_only.get("domains/harbour.md", -1.0) < top.explain["raw"]["cosine"]


def test_chunks_follow_the_content(kb: KnowledgeStore) -> None:
    _long_doc(kb)
    before = kb.status()["chunk_vectors"]
    kb.upsert("domains/harbour.md", title="Harbour office", body=filler(500))
    assert kb.status()["chunk_vectors"] > before       # longer body: more chunks
    kb.upsert("domains/harbour.md", title="Harbour office", body="short now")
    assert kb.status()["chunk_vectors"] == 0            # fits one window: none
    kb.upsert("domains/harbour.md", title="Harbour office", body=filler(400))
    assert kb.status()["chunk_vectors"] > 0
    kb.delete("domains/harbour.md")
    status = kb.status()
    assert status["chunk_vectors"] == 0 and status["vectors"] == status["documents"]


def test_unchanged_long_document_is_not_re_embedded(kb: KnowledgeStore) -> None:
    _long_doc(kb)
    calls = kb.embedder.calls
    assert kb.upsert("domains/harbour.md", title="Harbour office",
                     body=kb.get("domains/harbour.md").body) == "unchanged"
    assert kb.embedder.calls == calls


def test_reembed_rechunks_for_the_new_window(location: str) -> None:
    with KnowledgeStore.open(location, FakeEmbedder(256), hype=False) as kb:
        _long_doc(kb)
        before = kb.status()["chunk_vectors"]
        kb.reembed(FakeEmbedder(128, max_tokens=1024))  # a long-window model: no chunks
        assert kb.status()["chunk_vectors"] == 0
        kb.reembed(FakeEmbedder(128, max_tokens=64))
        assert kb.status()["chunk_vectors"] > before
        hits = kb.search("lighthouse cabin wifi password", explain=True, **VEC)
        assert hits[0].path == "domains/harbour.md"
        assert hits[0].explain["matched_vector"] == "chunk"
        from kbstore.doctor import diagnose

        assert diagnose(kb).ok, [c.to_dict() for c in diagnose(kb).problems]


# -- HyPE as its own list -----------------------------------------------------------------


def test_hype_list_ranks_a_question_match(location: str, fake_llm) -> None:
    fake_llm.answer = lambda prompt: (
        "How do I revive a sluggish sourdough starter?\nWhat flour feeds a starter?"
        if "Levain" in prompt else "What is this about?")
    with KnowledgeStore.open(location, FakeEmbedder(256), hype=True) as kb:
        kb.upsert("domains/levain.md", title="Levain", body="feed twice daily with rye")
        for i in range(4):
            kb.upsert(f"domains/n{i}.md", title=f"Note {i}", body=filler(20, str(i)))
        query = "how do I revive a sluggish sourdough starter"
        hits = kb.search(query, explain=True)
        top = hits[0]
        assert top.path == "domains/levain.md"
        assert top.explain["ranks"]["hype"] == 1
        assert top.explain["matched_question"] == "How do I revive a sluggish sourdough starter?"
        assert top.explain["rrf"]["hype"] == pytest.approx(1.0 / (20.0 + 1))
        off = {h.path: h for h in kb.search(query, explain=True, w_hype=0)}
        assert off["domains/levain.md"].explain["rrf"]["hype"] == 0.0
        assert off["domains/levain.md"].score < top.score


# -- dates ----------------------------------------------------------------------------------


@pytest.fixture
def journal(kb: KnowledgeStore) -> KnowledgeStore:
    days = {"2023-06-16": "kiln firing with Maya", "2024-03-12": "kiln glaze test",
            _ago(1): "kiln cleanup", _ago(9): "kiln shelf order", _ago(40): "kiln repair",
            _ago(60): "kiln shelf repair"}
    for day, text in days.items():
        kb.upsert(f"journal/{day}-kiln.md", title=f"Session {day}", body=f"{text}. {filler(12)}",
                  created=day, updated=day)
    return kb


@pytest.mark.parametrize("query,day", [
    ("what did I do on 16 June 2023", "2023-06-16"),
    ("what happened with the kiln in March", "2024-03-12"),
    ("what did I do yesterday", _ago(1)),
    ("the kiln shelf notes from last week", _ago(9)),
    ("the kiln shelf from two months ago", _ago(60)),
    ("kiln session 2023-06-16", "2023-06-16"),
])
def test_date_queries_match_created_and_updated(journal: KnowledgeStore, query: str,
                                                day: str) -> None:
    hits = journal.search(query, explain=True, now=NOW)
    assert hits[0].path == f"journal/{day}-kiln.md"
    assert hits[0].explain["ranks"]["date"] == 1
    undated = journal.search("kiln", explain=True, now=NOW)
    assert all(h.explain["ranks"]["date"] is None for h in undated)


def test_dates_match_journal_entries_not_the_edit_dates_of_reference_entries(
        journal: KnowledgeStore) -> None:
    # An entry last edited in March says nothing about what happened in March;
    # the date list is for journal entries, whose date is that of the event.
    journal.upsert("projects/rent.md", title="Flat and rent", created="2024-03-02",
                   updated="2024-03-20", body=f"the rent goes up from january {filler(9, 'r')}")
    hits = {h.path: h for h in journal.search("what happened with the kiln in March",
                                              explain=True, now=NOW)}
    assert hits["journal/2024-03-12-kiln.md"].explain["ranks"]["date"] == 1
    assert "projects/rent.md" not in hits or hits["projects/rent.md"].explain["ranks"][
        "date"] is None
    rent = {h.path: h for h in journal.search("what will the rent be from March",
                                              explain=True, now=NOW)}
    assert rent["projects/rent.md"].explain["ranks"]["date"] is None
    assert rent["projects/rent.md"].explain["ranks"]["fts"] == 1


def test_relative_dates_follow_now(journal: KnowledgeStore) -> None:
    later = (dt.datetime.fromisoformat(NOW) + dt.timedelta(days=40)).isoformat()
    hits = journal.search("what did I do yesterday", explain=True, now=later)
    assert all(h.explain["ranks"]["date"] is None for h in hits)  # nothing dated then


# -- recency and "latest" questions -------------------------------------------------------


def _dentist(kb: KnowledgeStore) -> None:
    # the oldest visit matches the words best; the newest is the last visit
    kb.upsert(f"journal/{_ago(300)}-dentist.md", title="Dentist visit",
              body="dentist visit dentist filling dentist appointment", updated=_ago(300))
    kb.upsert(f"journal/{_ago(120)}-dentist.md", title="Errands",
              body=f"dentist checkup then errands {filler(10)}", updated=_ago(120))
    kb.upsert(f"journal/{_ago(20)}-dentist.md", title="Busy day",
              body=f"saw the dentist briefly {filler(14)}", updated=_ago(20))
    for i in range(4):
        kb.upsert(f"journal/{_ago(2 + i)}-other.md", title=f"Day {i}",
                  body=filler(15, str(i)), updated=_ago(2 + i))


def test_latest_question_gets_the_newest_relevant_entry(kb: KnowledgeStore) -> None:
    _dentist(kb)
    hits = kb.search("when did I last see the dentist", explain=True, now=NOW)
    assert hits[0].path == f"journal/{_ago(20)}-dentist.md"
    assert hits[0].explain["latest_rank"] == 1
    forced_off = kb.search("when did I last see the dentist", latest=False, now=NOW)
    assert forced_off[0].path == f"journal/{_ago(300)}-dentist.md"


@pytest.mark.parametrize("question", ["any news about the dentist",
                                      "which dentist did I see in the end"])
def test_news_and_in_the_end_are_latest_questions(kb: KnowledgeStore, question: str) -> None:
    _dentist(kb)
    hits = kb.search(question, explain=True, now=NOW)
    assert hits[0].path == f"journal/{_ago(20)}-dentist.md"
    assert hits[0].explain["latest_rank"] == 1
    assert kb.search(question, latest=False, now=NOW)[0].path == f"journal/{_ago(300)}-dentist.md"


def test_latest_orders_journal_entries_not_recently_edited_reference_entries(
        kb: KnowledgeStore) -> None:
    # A reference entry edited yesterday is not the latest event: the newest
    # journal entry on the topic answers "when was the last restore test".
    kb.upsert(f"journal/{_ago(200)}-restore.md", title="Restore test", updated=_ago(200),
              body=f"restore test of the backup went fine {filler(10)}")
    kb.upsert(f"journal/{_ago(30)}-restore.md", title="Restore test again", updated=_ago(30),
              body=f"restore test of the backup found missing files {filler(12, 'b')}")
    kb.upsert("domains/backup.md", title="Backup and restore test procedure", updated=_ago(1),
              body=f"how to run a restore test of the backup {filler(8, 'c')}")
    question = "when was the last restore test of the backup"
    hits = kb.search(question, now=NOW, explain=True)
    assert hits[0].path == f"journal/{_ago(30)}-restore.md"
    entry = next(h for h in hits if h.path == "domains/backup.md")
    assert entry.explain["latest_rank"] is None
    # without the journal-only rule the edited entry (newest `updated`) would lead
    off = kb.search(question, now=NOW, latest=False, explain=True)
    assert [h.path for h in off].index("domains/backup.md") < [h.path for h in off].index(
        f"journal/{_ago(30)}-restore.md")


def test_latest_question_reorders_only_the_best_few(kb: KnowledgeStore) -> None:
    # Seven newer entries that each share a word or two with the question,
    # one older entry that is the answer: a "latest" question must not let
    # the newest partial matches push the answer out of the first results.
    answer = f"journal/{_ago(90)}-boiler.md"
    kb.upsert(answer, title="Boiler repair", updated=_ago(90),
              body=f"the plumber repaired the boiler pressure valve {filler(20)}")
    for i in range(7):
        word = ("plumber", "boiler", "pressure", "valve", "repaired", "plumber", "boiler")[i]
        kb.upsert(f"journal/{_ago(1 + i)}-day.md", title=f"Day {i}", updated=_ago(1 + i),
                  body=f"{word} {filler(25, salt=str(i))}")
    question = "when was the boiler pressure valve last repaired by the plumber"
    hits = kb.search(question, now=NOW, explain=True, limit=10)
    assert [h.path for h in hits[:5]].count(answer) == 1
    reordered = [h for h in hits if h.explain["latest_rank"] is not None]
    assert 1 <= len(reordered) <= 5 and answer in {h.path for h in reordered}
    # the reordered few come newest first
    assert [h.updated for h in reordered] == sorted((h.updated for h in reordered), reverse=True)
    # latest_top=1: only the best match is eligible, so it comes first
    assert kb.search(question, now=NOW, latest_top=1)[0].path == answer


def test_latest_question_skips_newer_entries_off_its_topic(kb: KnowledgeStore) -> None:
    # Every entry names the person; the newest shares the name and the cue
    # word "latest" with the question but says nothing about the boiler: it is
    # not on the question's topic, so the older boiler entry answers.
    answer = f"journal/{_ago(90)}-boiler.md"
    kb.upsert(answer, title="Maya boiler", updated=_ago(90),
              body=f"Maya: the plumber repaired the boiler pressure valve {filler(12)}")
    chatty = f"journal/{_ago(5)}-catch-up.md"
    kb.upsert(chatty, title="Maya catch up", updated=_ago(5),
              body=f"Maya: the latest news from Maya, Maya is fine {filler(12, 'b')}")
    for i, days in enumerate((20, 40, 60)):
        kb.upsert(f"journal/{_ago(days)}-day.md", title=f"Maya day {i}", updated=_ago(days),
                  body=f"Maya {filler(14, salt=str(i))}")
    question = "What's the latest on Maya's boiler?"
    hits = kb.search(question, now=NOW, explain=True)
    assert hits[0].path == answer and hits[0].explain["latest_rank"] == 1
    assert chatty not in {h.path for h in hits if h.explain["latest_rank"] is not None}
    # off switch: without the topical test the newer chatty entry is eligible and leads
    off = kb.search(question, now=NOW, explain=True, latest_topical=0)
    assert off[0].path == chatty and off[0].explain["latest_rank"] == 1
    assert answer in {h.path for h in off if h.explain["latest_rank"] is not None}


def test_latest_question_does_not_promote_a_hit_below_the_confidence_floor(
        kb: KnowledgeStore) -> None:
    # The newer entry shares one word with the question and little else: its
    # vector is far from the question's, below the floor, and it is kept only
    # for that word. Its date must not put it above the answer.
    answer = f"journal/{_ago(90)}-boiler.md"
    kb.upsert(answer, title="Boiler repair", updated=_ago(90),
              body=f"the plumber repaired the boiler pressure valve {filler(6)}")
    stray = f"journal/{_ago(5)}-stray.md"
    kb.upsert(stray, title="Errands", updated=_ago(5), body=f"boiler {filler(40, 'b')}")
    question = "when was the boiler pressure valve last repaired by the plumber"
    similarity = {h.path: h.explain["similarity"]
                  for h in kb.search(question, now=NOW, explain=True, latest=False)}
    assert similarity[stray] < similarity[answer]
    floor = (similarity[stray] + similarity[answer]) / 2
    # without a floor (and without the topical test) the newer entry is eligible and leads
    off = kb.search(question, now=NOW, explain=True, latest_topical=0, min_similarity=None)
    assert off[0].path == stray and off[0].explain["latest_rank"] == 1
    hits = kb.search(question, now=NOW, explain=True, latest_topical=0, min_similarity=floor)
    assert hits[0].path == answer and hits[0].explain["latest_rank"] == 1
    kept = next(h for h in hits if h.path == stray)  # still returned, for its word
    assert kept.explain["latest_rank"] is None


def test_latest_question_promotes_a_hit_below_the_floor_when_its_words_are_the_best(
        kb: KnowledgeStore) -> None:
    # The one entry holding the question's topical words has a far vector
    # (one topical word among filler); the entry nearest by vector shares only
    # the question's small words. Below the floor, the topical entry is kept
    # for its words, and they are the best on the topic: it stays eligible.
    topical = f"journal/{_ago(5)}-boiler.md"
    kb.upsert(topical, title="Errands", updated=_ago(5), body=f"boiler {filler(40)}")
    near = f"journal/{_ago(30)}-chat.md"
    kb.upsert(near, title="Chat", updated=_ago(30), body="when was it last done by the one")
    question = "when was the boiler pressure valve last repaired by the plumber"
    similarity = {h.path: h.explain["similarity"]
                  for h in kb.search(question, now=NOW, explain=True, latest=False)}
    assert similarity[topical] < similarity[near]
    floor = (similarity[topical] + similarity[near]) / 2
    hits = kb.search(question, now=NOW, explain=True, min_similarity=floor)
    assert hits[0].path == topical and hits[0].explain["latest_rank"] == 1
    assert next(h for h in hits if h.path == near).explain["latest_rank"] is None


def test_recency_does_not_bury_a_strong_old_match(kb: KnowledgeStore) -> None:
    _dentist(kb)
    hits = kb.search("dentist filling appointment", explain=True, now=NOW)
    old = hits[0]
    assert old.path == f"journal/{_ago(300)}-dentist.md"
    # bounded: never below 1 - recency_weight, however old
    assert 1.0 - kb.search_defaults.get("recency_weight", 0.2) - 1e-9 <= old.explain[
        "recency"] < 1.0
    for off in (None, 0):
        flat = kb.search("dentist filling appointment", explain=True, now=NOW,
                         half_life_days=off)
        assert all(h.explain["recency"] == 1.0 for h in flat)


def test_recency_breaks_a_near_tie_towards_the_newer_entry(kb: KnowledgeStore) -> None:
    body = "garden plan tomatoes basil"
    kb.upsert(f"journal/{_ago(200)}-a.md", title="Garden", body=body, updated=_ago(200))
    kb.upsert(f"journal/{_ago(3)}-b.md", title="Garden", body=body, updated=_ago(3))
    hits = kb.search("garden plan tomatoes", now=NOW)
    assert hits[0].path == f"journal/{_ago(3)}-b.md"


def test_invalid_recency_settings_are_refused(kb: KnowledgeStore) -> None:
    kb.upsert("domains/a.md", title="A", body="alpha")
    for bad in ({"half_life_days": -1}, {"recency_weight": 1.5}, {"latest": "yes"},
                {"latest_ratio": -0.1}, {"latest_topical": 1.5}, {"latest_topical": "x"},
                {"now": "not a date"}):
        with pytest.raises(InvalidQueryError):
            kb.search("alpha", **bad)


# -- type boosts and tags cannot beat clear evidence -------------------------------------


def test_type_boost_cannot_beat_rank_one_in_both_lists(kb: KnowledgeStore) -> None:
    kb.upsert("user/schedule.md", title="Schedule", body="good time to schedule a call with "
              "the user: mornings before ten, never fridays")
    kb.upsert("skills/weather/SKILL.md", title="Weather", body=f"weather forecast for a "
              f"time and place {filler(20)}")
    for i in range(6):
        kb.upsert(f"domains/n{i}.md", title=f"Note {i}", body=filler(20, str(i)))
    hits = kb.search("when is a good time to schedule a call with the user?", explain=True)
    assert hits[0].path == "user/schedule.md"


def test_a_tag_that_is_a_common_query_word_does_not_dominate(kb: KnowledgeStore) -> None:
    kb.upsert("user/half-marathon.md", title="Half marathon plan",
              body="long run on sundays, intervals on tuesdays", tags=["running"])
    kb.upsert("projects/ups-monitor.md", title="UPS battery monitor",
              body="the ups battery monitor script keeps running on the nas and alerts "
                   "when the battery is low")
    hits = kb.search("is the ups battery monitor script still running on the nas", explain=True)
    assert hits[0].path == "projects/ups-monitor.md"
    tagged = next(h for h in hits if h.path == "user/half-marathon.md")
    assert tagged.explain["frontmatter_weight"] < 0.2  # one word of the query's seven
    exact = kb.search("running", explain=True)
    assert exact[0].path == "user/half-marathon.md"
    assert exact[0].explain["frontmatter_weight"] == 1.0


# -- the confidence floor ------------------------------------------------------------------


def test_default_floor_is_stored_per_database_and_drops_nonsense(location: str) -> None:
    path = location
    # 256 dimensions: in 64, the hashed nonsense words happen to collide with
    # "kiln" (cosine 0.47)
    with KnowledgeStore.open(path, FakeEmbedder(256, min_similarity=0.3), hype=False) as kb:
        kb.upsert("domains/bread.md", title="Sourdough starter",
                  body="feed the sourdough starter with rye flour twice a day")
        kb.upsert("domains/kiln.md", title="Kiln", body="kiln firing schedule for stoneware")
    with KnowledgeStore.open(path) as kb:  # the floor comes from the file
        assert kb.search_defaults["min_similarity"] == 0.3
        assert kb.search("zzzz qqqq") == []
        assert kb.search("sourdough starter rye flour")[0].path == "domains/bread.md"
        assert len(kb.search("zzzz qqqq", min_similarity=None)) == 2  # overridable per call
        for hit in kb.search("kiln firing stoneware", explain=True):
            assert hit.explain["similarity"] >= 0.3


def test_shipped_embedders_declare_a_window_and_a_floor() -> None:
    from kbstore.embed_minilm import MiniLMEmbedder
    from kbstore.embed_nomic import NomicEmbedder

    assert MiniLMEmbedder.max_tokens == 256 and NomicEmbedder.max_tokens == 8192
    for cls in (MiniLMEmbedder, NomicEmbedder):
        assert 0.0 < cls.min_similarity < 1.0


def test_a_file_from_before_the_floor_gets_the_embedders_floor(location: str) -> None:
    path = location
    with KnowledgeStore.open(path, FakeEmbedder(64, min_similarity=0.3), hype=False) as kb:
        kb.upsert("domains/a.md", title="A", body="alpha beta")
        # what the first release stored: every default, the floor off
        kb.backend.set_meta("fusion", {**kb.backend.get_meta("fusion"),
                                       "min_similarity": None, "boost_skill": 1.2})
    with KnowledgeStore.open(path, FakeEmbedder(64, min_similarity=0.3)) as kb:
        assert kb.search_defaults["min_similarity"] == 0.3
        assert "boost_skill" not in kb.search_defaults

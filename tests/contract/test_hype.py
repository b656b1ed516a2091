"""HyPE: parsing, generation at store time, persistence, failures, the job and CLI.

The LLM is the ``fake_llm`` fixture (a monkeypatched litellm.completion that
counts calls); vectors come from FakeEmbedder (bag of words: texts sharing
words are close, texts sharing none are near-orthogonal).
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore import hype as hype_mod
from kbstore.doctor import diagnose
from kbstore.hype import DEFAULT_MODEL, MAX_QUESTION_CHARS, HypeError, parse_questions
from kbstore.hype_jobs import run_hype, select_targets

from .public import question_model, questions, questions_of


def _open(location: str, **kwargs) -> KnowledgeStore:  # type: ignore[no-untyped-def]
    return KnowledgeStore.open(location, FakeEmbedder(dim=64), **kwargs)


def _hype_counts(store: KnowledgeStore) -> tuple[int, int, int]:
    """(stored questions, documents without current questions, failed calls)."""
    status = store.status()
    return status["hype_questions"], status["hype_pending"], status["hype_failed"]


def _prompt_title(prompt: str) -> str:
    return re.search(r"^Title: (.*)$", prompt, re.MULTILINE).group(1)


def _five(store: KnowledgeStore) -> None:
    for n in range(5):
        store.upsert(f"knowledge/domains/note-{n}.md", title=f"Note {n}",
                     body=f"Body of note number {n} about topic {n}.")


# -- parsing ----------------------------------------------------------------


@pytest.mark.parametrize("answer, expected", [
    ("1. How do I deploy?\n2) What is a pod?\n3: When should I scale?",
     ["How do I deploy?", "What is a pod?", "When should I scale?"]),
    ("- How do I deploy?\n* What is a pod?\n• Should I scale?",
     ["How do I deploy?", "What is a pod?", "Should I scale?"]),
    ('"How do I deploy?"\n\u201cWhat is a pod?\u201d\n\'Should I scale?\'',
     ["How do I deploy?", "What is a pod?", "Should I scale?"]),
    ("\n\nHow do I deploy?\n   \n\nWhat is a pod?\n\n",
     ["How do I deploy?", "What is a pod?"]),
    ("Here are some questions:\nHow do I deploy?\nSure! Here are 5 questions an agent might "
     "ask\nWhat is a pod?", ["How do I deploy?", "What is a pod?"]),
    ("How do I deploy?\n2. how do  I deploy?\nHow do I deploy?\nWhat is a pod?",
     ["How do I deploy?", "What is a pod?"]),
    ("1. - **\"How do I deploy?\"**", ["How do I deploy?"]),
])
def test_parse_cleans_llm_answers(answer: str, expected: list[str]) -> None:
    assert parse_questions(answer) == expected


def test_parse_drops_over_long_lines() -> None:
    long_line = "How " + "very " * (MAX_QUESTION_CHARS // 5) + "long?"
    assert len(long_line) > MAX_QUESTION_CHARS
    assert parse_questions(f"{long_line}\nWhat is short?") == ["What is short?"]


def test_parse_keeps_at_most_ten() -> None:
    answer = "\n".join(f"{n}. What is item number {n}?" for n in range(1, 16))
    questions = parse_questions(answer)
    assert questions == [f"What is item number {n}?" for n in range(1, 11)]


@pytest.mark.parametrize("answer", ["", None, "\n\n  \n", "Here are some questions:\n\n- \n",
                                    "Sure!\n1.\n2.", "x" * (MAX_QUESTION_CHARS + 1)])
def test_parse_without_usable_question_raises(answer: str | None) -> None:
    with pytest.raises(HypeError):
        parse_questions(answer)


def test_unusable_answer_leaves_document_pending_not_empty(location: str, fake_llm) -> None:
    fake_llm.answer = lambda prompt: "Here are some questions:\n\n"
    with _open(location, hype=True) as store:
        store.upsert("knowledge/domains/a.md", title="Alpha", body="Alpha body text.")
        assert len(fake_llm.calls) == 1
        assert _hype_counts(store) == (0, 1, 1)  # pending, as a failed call
        assert questions_of(store, "knowledge/domains/a.md") == []
        assert [h.path for h in store.search("alpha")] == ["knowledge/domains/a.md"]
        assert diagnose(store).get("pending_hype").count == 1


# -- the prompt and the model -------------------------------------------------


def test_prompt_parameters_and_model_precedence(location: str, fake_llm,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with _open(location, hype=True) as store:
        store.upsert("knowledge/domains/a.md", title="Alpha", body="Alpha body text.")
    call = fake_llm.calls[-1]
    assert call["model"] == DEFAULT_MODEL
    assert call["temperature"] == 0.3 and call["max_tokens"] == 500
    assert call["timeout"] and call["timeout"] > 0
    prompt = call["messages"][0]["content"]
    assert "Title: Alpha" in prompt and "Alpha body text." in prompt
    assert "one per line" in prompt

    monkeypatch.setenv("KBSTORE_HYPE_MODEL", "ollama/llama3.2")
    with _open(location, hype=True) as store:
        store.upsert("knowledge/domains/b.md", title="Beta", body="Beta body.")
        assert question_model(store, "knowledge/domains/b.md") == "ollama/llama3.2"
    assert fake_llm.calls[-1]["model"] == "ollama/llama3.2"

    with _open(location, hype=True, hype_model="anthropic/claude-haiku-4-5") as store:
        store.upsert("knowledge/domains/c.md", title="Gamma", body="Gamma body.")
    assert fake_llm.calls[-1]["model"] == "anthropic/claude-haiku-4-5"
    assert len(fake_llm.calls) == 3


class RateLimitError(Exception):
    """Named like litellm's: retried with backoff."""


def test_rate_limit_is_retried_then_succeeds(location: str, fake_llm,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(hype_mod.time, "sleep", sleeps.append)
    answers = iter([RateLimitError("429"), RateLimitError("429"), "How do I retry?"])

    def answer(prompt: str) -> str:
        item = next(answers)
        if isinstance(item, Exception):
            raise item
        return item

    fake_llm.answer = answer
    with _open(location, hype=True) as store:
        store.upsert("knowledge/domains/a.md", title="Alpha", body="Alpha body.")
        assert questions_of(store, "knowledge/domains/a.md") == ["How do I retry?"]
        assert _hype_counts(store) == (1, 0, 0)
    assert len(fake_llm.calls) == 3
    assert sleeps == [1.0, 2.0]  # exponential backoff


def test_auth_error_is_not_retried(location: str, fake_llm,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hype_mod.time, "sleep", lambda s: pytest.fail("must not wait"))
    # A realistic key: a 14-character "sk-secret12345" is too short to look
    # random and is only redacted when it is in the environment (test_secrets).
    fake_llm.fail_with = RuntimeError(
        "missing api_key sk-proj-Zq3xT9vLm2NcR7bW4yHs8KdF1jPa6GtE0uQo5Vi")
    with _open(location, hype=True) as store:
        store.upsert("knowledge/domains/a.md", title="Alpha", body="Alpha body.")
        assert _hype_counts(store) == (0, 1, 1)
    assert len(fake_llm.calls) == 1  # the error text stored: tests/sqlite/test_derived_rows.py


# -- search through a question vector ----------------------------------------

QUERY = "how do I recover from a failed deploy"
TARGET = "knowledge/projects/incident-notes.md"


def _intent_corpus(store: KnowledgeStore) -> None:
    # The target shares no word with the query (no FTS, no frontmatter, an
    # unrelated document vector); the distractors share "deploy".
    store.upsert(TARGET, title="Zebra marmalade ledger",
                 body="Quartz violin pebbles orbit lantern meadow.")
    store.upsert("knowledge/domains/deploy-checklist.md", title="Deploy checklist",
                 body="Deploy steps: build, deploy, verify the deploy.")
    store.upsert("knowledge/domains/cooking.md", title="Soup", body="Carrots onions simmer.")


def _intent_answer(prompt: str) -> str:
    if _prompt_title(prompt) == "Zebra marmalade ledger":
        return "1. How do I recover from a failed deploy?\n2. Where is the ledger?"
    return "What is this note?"


def test_intent_query_finds_document_only_through_hype(location: str, backend,
                                                       fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.answer = _intent_answer
    with _open(backend("plain"), hype=False) as plain:
        _intent_corpus(plain)
        hits = plain.search(QUERY, explain=True)
        first_by_vector = min((h for h in hits if h.explain["ranks"]["vector"] is not None),
                              key=lambda h: h.explain["ranks"]["vector"])
        assert first_by_vector.path != TARGET
        assert hits[0].path != TARGET
    assert fake_llm.calls == []

    with _open(location, hype=True) as store:
        _intent_corpus(store)
        hits = store.search(QUERY, explain=True)
    target = next(h for h in hits if h.path == TARGET)
    e = target.explain
    # the question vectors are their own ranked list
    assert e["ranks"]["hype"] == 1
    assert e["ranks"]["fts"] is None and e["ranks"]["frontmatter"] is None
    assert e["matched_question"] == "How do I recover from a failed deploy?"
    # the vector rank 1 (another document) does not stand out: this
    # document's question is closer to the query (search.sql vec_gap)
    assert e["ranks"]["vector"] != 1 and e["vector_gap"] == 0.0
    assert hits[0].path == TARGET


# -- caching by content hash ----------------------------------------------------


def test_reimport_after_reopen_makes_no_llm_call(location: str, sample_workspace: Path,
                                                 fake_llm) -> None:
    with _open(location, hype=True) as store:
        first = store.import_directory(sample_workspace)
        stored = store.status()["hype_questions"]
    n_docs = first.added
    assert n_docs > 5 and len(fake_llm.calls) == n_docs and first.hype_generated == n_docs
    assert stored == 3 * n_docs

    with _open(location, hype=True) as store:
        again = store.import_directory(sample_workspace)
        assert store.status()["hype_questions"] == stored
        # document + 3 questions each, and the chunks of documents past the
        # fake's window
        assert store.status()["vectors"] == n_docs * 4 + store.status()["chunk_vectors"]
    assert len(fake_llm.calls) == n_docs  # zero new calls
    assert again.unchanged == n_docs and again.hype_generated == 0


def test_editing_one_of_five_makes_exactly_one_call(location: str, fake_llm) -> None:
    with _open(location, hype=True) as store:
        _five(store)
        assert len(fake_llm.calls) == 5
        assert store.upsert("knowledge/domains/note-2.md", title="Note 2",
                            body="Rewritten body.") == "updated"
        _five_again = [store.upsert(f"knowledge/domains/note-{n}.md", title=f"Note {n}",
                                    body=f"Body of note number {n} about topic {n}.")
                       for n in (0, 1, 3, 4)]
        assert _five_again == ["unchanged"] * 4
    assert len(fake_llm.calls) == 6
    assert "Rewritten body." in fake_llm.calls[-1]["messages"][0]["content"]


def test_changed_document_replaces_old_questions_and_vectors(location: str, fake_llm) -> None:
    path = "knowledge/domains/a.md"
    fake_llm.answer = lambda prompt: (
        "How do I bake bread?\nWhat flour is best?\nWhen should I proof?"
        if "bread" in prompt else "How do I brew tea?")
    with _open(location, hype=True) as store:
        store.upsert(path, title="Kitchen", body="All about bread.")
        assert len(questions_of(store, path)) == 3
        assert store.status()["vectors"] == 4  # the document's and three questions'
        store.upsert(path, title="Kitchen", body="All about tea.")
        assert questions_of(store, path) == ["How do I brew tea?"]
        # No trace of the old questions or their vectors anywhere.
        assert _hype_counts(store) == (1, 0, 0)
        assert store.status()["vectors"] == 2  # the document's and one question's
        for hit in store.search("what flour is best to bake bread", explain=True):
            assert hit.explain["matched_question"] in (None, "How do I brew tea?")
        assert diagnose(store).ok


# -- turning HyPE off -------------------------------------------------------------


def test_hype_false_makes_no_call(location: str, fake_llm) -> None:
    with _open(location, hype=False) as store:
        _five(store)
        # no questions: all five documents wait for `kbstore hype`, none failed
        assert _hype_counts(store) == (0, 5, 0)
        assert store.status()["vectors"] == 5
        assert run_hype(store, "pending", dry_run=True)["documents"] == 5
    assert fake_llm.calls == []


@pytest.mark.parametrize("value", ["0", "false", "off"])
def test_env_kbstore_hype_0_makes_no_call(location: str, fake_llm, value: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBSTORE_HYPE", value)
    with _open(location) as store:
        assert store.hype.enabled is False
        _five(store)
        assert store.status()["hype_questions"] == 0
    assert fake_llm.calls == []


# -- failure keeps the document; the job completes it --------------------------------


def test_llm_failure_keeps_document_searchable_then_cli_completes_it(location: str, run_cli,
                                                                     fake_llm) -> None:  # type: ignore[no-untyped-def]
    path = "knowledge/domains/sourdough.md"
    fake_llm.fail_with = ConnectionError("LLM unreachable")
    with _open(location, hype=True) as store:
        assert store.upsert(path, title="Sourdough starter",
                            body="Feed the starter daily with flour.") == "added"
        assert [h.path for h in store.search("starter flour")] == [path]
        assert _hype_counts(store) == (0, 1, 1)
        assert store.status()["doc_vectors"] == 1
    assert len(fake_llm.calls) == 1

    fake_llm.fail_with = None
    dry = run_cli("hype", "--db", location, "--pending", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "1 LLM call(s) would be made" in dry.output
    assert len(fake_llm.calls) == 1

    result = run_cli("hype", "--db", location, "--pending", "--concurrency", "2")
    assert result.exit_code == 0, result.output
    assert "1 generated (3 questions)" in result.output and "0 pending" in result.output
    assert len(fake_llm.calls) == 2
    with _open(location, hype=False) as store:
        assert _hype_counts(store) == (3, 0, 0)
        assert questions_of(store, path) == ["How do I use this?", "What is this about?",
                                             "When should I read this?"]
        assert store.status()["vectors"] == 4
        hit = store.search("when should I read this", explain=True)[0]
        assert hit.path == path and hit.explain["ranks"]["hype"] == 1
        assert hit.explain["matched_question"] == "When should I read this?"

    status = run_cli("status", "--db", location)
    assert "HyPE questions  3 (0 documents without current questions, 0 failed)" in status.output


# -- the job ---------------------------------------------------------------------------


def test_pending_covers_failed_and_never_generated(location: str, fake_llm) -> None:
    with _open(location, hype=False) as store:
        _five(store)  # no HyPE row at all
    fake_llm.fail_with = RuntimeError("boom")
    with _open(location, hype=True) as store:
        store.upsert("knowledge/domains/failed.md", title="Failed", body="It failed.")
        targets = select_targets(store, "pending")
        assert len(targets) == 6
        assert run_hype(store, "pending", dry_run=True)["llm_calls"] == 6
        assert _hype_counts(store) == (0, 6, 1)  # one definition: status agrees
        assert len(fake_llm.calls) == 1  # the dry run called nothing
        fake_llm.fail_with = None
        counts = run_hype(store, "pending", concurrency=3)
        assert counts["generated"] == 6 and counts["failed"] == 0 and counts["llm_calls"] == 6
        assert select_targets(store, "pending") == []
        assert _hype_counts(store) == (18, 0, 0)
        assert run_hype(store, "pending")["llm_calls"] == 0
        assert run_hype(store, "all", dry_run=True)["llm_calls"] == 6
    assert len(fake_llm.calls) == 7


def test_all_regenerates_and_keeps_good_questions_on_failure(location: str, fake_llm) -> None:
    with _open(location, hype=True) as store:
        _five(store)
        fake_llm.answer = lambda prompt: f"What is new about {_prompt_title(prompt)}?"
        counts = run_hype(store, "all", model="ollama/llama3.2")
        assert counts["generated"] == 5 and counts["model"] == "ollama/llama3.2"
        assert questions_of(store, "knowledge/domains/note-1.md") == ["What is new about Note 1?"]
        assert question_model(store, "knowledge/domains/note-1.md") == "ollama/llama3.2"

        fake_llm.fail_with = RuntimeError("boom")
        counts = run_hype(store, "all")
        assert counts["generated"] == 0 and counts["failed"] == 5
        # Good questions for the current content are not thrown away.
        assert questions_of(store, "knowledge/domains/note-1.md") == ["What is new about Note 1?"]
        assert question_model(store, "knowledge/domains/note-1.md") == "ollama/llama3.2"
        assert _hype_counts(store) == (5, 0, 0)


def test_breaker_stops_run_when_llm_is_down(location: str, fake_llm) -> None:
    with _open(location, hype=False) as store:
        for n in range(20):
            store.upsert(f"knowledge/domains/n{n}.md", title=f"N{n}", body=f"Body {n}.")
    fake_llm.fail_with = RuntimeError("no route to host")
    with _open(location, hype=True) as store:
        counts = run_hype(store, "pending", concurrency=1, batch_size=5)
        assert counts["aborted"] is True
        assert counts["failed"] == 20 and counts["generated"] == 0
        assert counts["llm_calls"] == len(fake_llm.calls) == store.hype.breaker
        # Every document is still pending: the ones the run touched as failed calls.
        assert len(select_targets(store, "pending")) == 20
        questions_, pending, failed = _hype_counts(store)
        assert (questions_, pending) == (0, 20) and 1 <= failed <= 20


def test_job_bounds_concurrency_and_batches_embeddings(location: str, fake_llm) -> None:
    in_flight, peak, lock = 0, 0, threading.Lock()

    def slow_answer(prompt: str) -> str:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.005)
        with lock:
            in_flight -= 1
        return f"What is {_prompt_title(prompt)}?"

    with _open(location, hype=False) as store:
        for n in range(12):
            store.upsert(f"knowledge/domains/n{n}.md", title=f"N{n}", body=f"Body {n}.")
    fake_llm.answer = slow_answer
    with _open(location, hype=True) as store:
        embed_calls: list[int] = []
        real = store.embedder.embed_queries

        def counting(texts):  # type: ignore[no-untyped-def]
            embed_calls.append(len(texts))
            return real(texts)

        store.embedder.embed_queries = counting  # type: ignore[method-assign]
        done: list[int] = []
        counts = run_hype(store, "pending", concurrency=3, batch_size=5, progress=done.append)
    assert counts["generated"] == 12 and len(fake_llm.calls) == 12
    assert peak <= 3
    assert embed_calls == [5, 5, 2]  # one embedding call per batch
    assert sum(done) == 12


def test_job_skips_document_edited_while_llm_was_busy(location: str, fake_llm) -> None:
    with _open(location, hype=False) as store:
        store.upsert("knowledge/domains/a.md", title="Alpha", body="Old body.")
    with _open(location, hype=True) as store:
        def answer_and_edit(prompt: str) -> str:
            # Another process changes the document while the LLM answers.
            with _open(location, hype=False) as other:
                other.upsert("knowledge/domains/a.md", title="Alpha", body="New body.")
            return "What was the old body?"

        fake_llm.answer = answer_and_edit
        counts = run_hype(store, "pending")
        assert counts["changed"] == 1 and counts["generated"] == 0
        assert questions_of(store, "knowledge/domains/a.md") == []
        assert store.get("knowledge/domains/a.md").body == "New body."  # type: ignore[union-attr]
        assert len(select_targets(store, "pending")) == 1  # the new content still waits


def test_unknown_mode_is_refused(store: KnowledgeStore) -> None:
    with pytest.raises(ValueError):
        run_hype(store, "some")


def test_cli_hype_is_explicit_so_env_off_does_not_veto_it(location: str, fake_llm, run_cli,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KBSTORE_HYPE", "0")
    with _open(location) as store:
        _five(store)
    assert fake_llm.calls == []
    result = run_cli("hype", "--db", location, "--all", "--json", "--model", "ollama/llama3.2")
    assert result.exit_code == 0, result.output
    assert '"generated": 5' in result.output and '"pending_after": 0' in result.output
    assert {c["model"] for c in fake_llm.calls} == {"ollama/llama3.2"}
    assert len(fake_llm.calls) == 5


def test_cli_hype_exits_1_while_documents_are_left_pending(location: str, fake_llm,
                                                           run_cli) -> None:  # type: ignore[no-untyped-def]
    with _open(location, hype=False) as store:
        _five(store)
    fake_llm.answer = lambda prompt: ("What is note 3?" if "Note 3" in prompt
                                      else "Sure! Here are some questions:")
    text = run_cli("hype", "--db", location)
    assert text.exit_code == 1
    assert "1 generated" in text.output and "4 failed" in text.output
    assert "4 pending" in text.output
    as_json = run_cli("hype", "--db", location, "--json")
    assert as_json.exit_code == 1
    counts = json.loads(as_json.output)
    assert (counts["failed"], counts["pending_after"]) == (4, 4)
    fake_llm.answer = lambda prompt: "What is this note?"
    done = run_cli("hype", "--db", location, "--json")
    assert done.exit_code == 0 and json.loads(done.output)["pending_after"] == 0
    with _open(location, hype=False) as store:
        assert _hype_counts(store) == (5, 0, 0)
        assert questions(store)["knowledge/domains/note-3.md"] == ["What is note 3?"]


def test_status_and_the_dry_run_agree_on_what_is_pending(location: str, fake_llm,
                                                         run_cli) -> None:  # type: ignore[no-untyped-def]
    """Formerly `status` said 0 pending on a --no-hype store, `hype --dry-run` 21."""
    with _open(location, hype=False) as store:
        _five(store)
    fake_llm.fail_with = RuntimeError("down")
    with _open(location, hype=True) as store:
        store.hype.backoff = 0
        store.upsert("knowledge/domains/failed.md", title="Failed", body="It failed.")
    fake_llm.fail_with = None
    with _open(location, hype=True) as store:
        store.upsert("knowledge/domains/done.md", title="Done", body="It worked.")
    status = json.loads(run_cli("status", "--db", location, "--json").output)
    dry = json.loads(run_cli("hype", "--db", location, "--dry-run", "--json").output)
    assert status["hype_pending"] == dry["documents"] == dry["llm_calls"] == 6
    assert status["hype_failed"] == 1 and status["documents"] == 7

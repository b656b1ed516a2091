"""kbstore doctor through the public API and the CLI: a healthy store has no
problems, pending HyPE is a note, and doctor never creates a store. Damage
made on purpose with raw SQL is tested per backend (tests/sqlite/)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.doctor import diagnose, fix

QUESTIONS = "How do I deploy?\nWhat breaks a release?\nWhen should I roll back?"


@pytest.fixture
def kb(location: str, fake_llm) -> Iterator[KnowledgeStore]:  # type: ignore[no-untyped-def]
    """Three documents, each with a vector and three HyPE questions."""
    fake_llm.answer = lambda prompt: QUESTIONS
    store = KnowledgeStore.open(location, FakeEmbedder(64), hype=True)
    store.upsert("projects/deploy.md", title="Deploy", body="ship it with a canary")
    store.upsert("domains/sqlite.md", title="SQLite", body="full text search ranking")
    store.upsert("journal/2026-01-02.md", title="Day", body="baked sourdough bread")
    yield store
    store.close()


def test_a_healthy_store_has_no_problems(kb: KnowledgeStore) -> None:
    report = diagnose(kb)
    assert report.ok, [c.to_dict() for c in report.problems]
    names = {c.name for c in report.checks}
    assert {"integrity", "vector_table", "orphan_vectors", "orphan_questions",
            "orphan_derived", "documents_missing_vectors", "stale_vectors",
            "fingerprint_mismatch", "pending_hype"} <= names
    assert all(c.count == 0 for c in report.checks)
    assert report.to_dict()["ok"] is True and report.path == kb.location


def test_fix_on_a_healthy_store_changes_nothing(kb: KnowledgeStore) -> None:
    before = (kb.status(), [(h.path, h.score) for h in kb.search("deploy canary")])
    report = fix(kb)
    assert report.ok and report.fixed == []
    after = (kb.status(), [(h.path, h.score) for h in kb.search("deploy canary")])
    assert {k: v for k, v in after[0].items() if k != "file_bytes"} == \
        {k: v for k, v in before[0].items() if k != "file_bytes"}
    assert after[1] == before[1]


def test_pending_hype_is_a_note_not_a_problem(location: str, fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.fail_with = RuntimeError("LLM down")
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=True) as store:
        store.hype.backoff = 0
        store.upsert("projects/a.md", title="A", body="alpha")
        report = diagnose(store)
    assert report.ok
    assert report.get("pending_hype").count == 1
    assert not report.get("pending_hype").problem


def test_cli_doctor_on_a_healthy_store(kb: KnowledgeStore, location: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    healthy = run_cli("doctor", "--db", location)
    assert healthy.exit_code == 0, healthy.output
    assert "no problems found" in healthy.output and "ok     integrity" in healthy.output
    data = json.loads(run_cli("doctor", "--db", location, "--json").output)
    assert data["ok"] is True and data["fixed"] == []
    assert all(c["ok"] for c in data["checks"])
    fixed = run_cli("doctor", "--db", location, "--fix")
    assert fixed.exit_code == 0 and "no problems found" in fixed.output
    usage = run_cli("doctor", "--db", location, "--embedder", "fake")
    assert usage.exit_code == 2 and "--embedder only applies with --fix" in usage.output


@pytest.mark.parametrize("fix_flag", [(), ("--fix",)], ids=["check", "fix"])
def test_cli_doctor_does_not_create_a_missing_database(backend, run_cli, fix_flag) -> None:  # type: ignore[no-untyped-def]
    missing = backend.missing()
    result = run_cli("doctor", "--db", missing, *fix_flag)
    assert result.exit_code == 1
    assert "no database" in result.output
    assert not backend.exists(missing)


def test_non_ascii_tags_are_healthy_and_match_a_query(location: str) -> None:
    """Tags with capital non-ASCII letters ("Ärger", "ÉCOLE"): the exact-tag
    rows, doctor's expectation and the query's words use one rule, so a
    fresh store is healthy (doctor used to fail it for ever) and the query
    "ärger" finds the document through its tag."""
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        store.upsert("user/mood.md", title="Mood", body="notes", tags=["Ärger", " ÉCOLE "])
        store.upsert("user/other.md", title="Other", body="notes about ärger", tags=["misc"])
        report = diagnose(store)
        assert report.ok, [c.to_dict() for c in report.problems]
        hits = store.search("ärger", explain=True)
        tagged = next(h for h in hits if h.path == "user/mood.md")
        assert tagged.explain["ranks"]["frontmatter"] == 1, tagged.explain
        assert hits[0].path == "user/mood.md"
        assert [h.path for h in store.search("école")][0] == "user/mood.md"
        store.upsert("user/mood.md", title="Mood", body="notes", tags=["ÜBEL"])
        assert diagnose(store).ok
        assert store.search("übel", explain=True)[0].explain["ranks"]["frontmatter"] == 1


@pytest.mark.parametrize("tag, query", [("ΚΟΣΜΟΣ", "κοσμος"), ("ΟΔΟΣ ΣΑΣ", "οδος σας"),
                                        ("İZMİR", "i̇zmi̇r")])
def test_tags_fold_as_python_lowers_them_on_every_backend(location: str, tag: str,
                                                          query: str) -> None:
    """The exact-tag key is Python's lower() (kbstore.model.tag_key) on every
    backend, whatever the server's own lower() makes of a tag: PostgreSQL's
    follows the database's locale (no final sigma "ς", "İ" to a bare "i";
    ASCII only under LC_CTYPE "C"), and its doctor then failed such a store
    for ever (--fix rebuilt the rows with the same lower())."""
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        store.upsert("domains/place.md", title="Place", body="notes", tags=[tag])
        store.upsert("domains/other.md", title="Other", body=f"notes on {query}", tags=["x"])
        report = diagnose(store)
        assert report.ok, [c.to_dict() for c in report.problems]
        hits = store.search(query, explain=True)
        assert hits[0].path == "domains/place.md", [(h.path, h.explain) for h in hits]
        assert hits[0].explain["ranks"]["frontmatter"] == 1
        store.upsert("domains/place.md", title="Place", body="notes", tags=[tag, "ΝΈΟ"])
        assert diagnose(store).ok
        assert store.search("νέο", explain=True)[0].explain["ranks"]["frontmatter"] == 1

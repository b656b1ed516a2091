"""kbstore doctor: each kind of damage is made on purpose, found, and
(where it is derived data) repaired by --fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kbstore import FakeEmbedder, KnowledgeStore, schema
from kbstore.cli import _register, cli
from kbstore.doctor import diagnose, fix
from kbstore.store import doc_vector_hash

QUESTIONS = "How do I deploy?\nWhat breaks a release?\nWhen should I roll back?"


@pytest.fixture
def kb(db_path: Path, fake_llm) -> KnowledgeStore:  # type: ignore[no-untyped-def]
    """Three documents, each with a vector and three HyPE questions."""
    fake_llm.answer = lambda prompt: QUESTIONS
    store = KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True)
    store.upsert("projects/deploy.md", title="Deploy", body="ship it with a canary")
    store.upsert("domains/sqlite.md", title="SQLite", body="full text search ranking")
    store.upsert("journal/2026-01-02.md", title="Day", body="baked sourdough bread")
    yield store
    store.close()


def _id(store: KnowledgeStore, path: str) -> int:
    return int(store.conn.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()[0])


def _without_fk(store: KnowledgeStore, *sql: str) -> None:
    store.conn.execute("PRAGMA foreign_keys = OFF")
    try:
        for statement in sql:
            store.conn.execute(statement)
    finally:
        store.conn.execute("PRAGMA foreign_keys = ON")


def test_a_healthy_store_has_no_problems(kb: KnowledgeStore) -> None:
    report = diagnose(kb)
    assert report.ok, [c.to_dict() for c in report.problems]
    names = {c.name for c in report.checks}
    assert {"integrity", "fts_integrity", "vector_table", "orphan_vectors", "orphan_questions",
            "orphan_derived", "documents_missing_vectors", "stale_vectors",
            "fingerprint_mismatch", "pending_hype"} <= names
    assert all(c.count == 0 for c in report.checks)


def _delete_doc_vector(store: KnowledgeStore) -> None:
    store.conn.execute("DELETE FROM vectors WHERE vector_id = ?",
                       (_id(store, "projects/deploy.md") * 32,))


def _delete_float_copy(store: KnowledgeStore) -> None:
    store.conn.execute("DELETE FROM vector_data WHERE vector_id = ?",
                       (_id(store, "domains/sqlite.md") * 32,))


def _delete_question_vector(store: KnowledgeStore) -> None:
    store.conn.execute("DELETE FROM vectors WHERE vector_id = ?",
                       (_id(store, "domains/sqlite.md") * 32 + 2,))


def _orphan_question(store: KnowledgeStore) -> None:
    _without_fk(store, "INSERT INTO hype_questions VALUES (999, 1, 'whose question?')")


def _orphan_derived(store: KnowledgeStore) -> None:
    _without_fk(store, "INSERT INTO derived (doc_id, kind, content_hash, model) "
                       "VALUES (999, 'doc_vector', 'x', 'y')")


def _orphan_vector(store: KnowledgeStore) -> None:
    blob = bytes(64 * 4)
    store.conn.execute("INSERT INTO vectors (vector_id, kind, embedding_bits, doc_id, topic, "
                       "doc_type) VALUES (?, 'doc', vec_quantize_binary(?), 999, 'x', 'entry')",
                       (999 * 32, blob))


def _vector_without_question(store: KnowledgeStore) -> None:
    doc_id = _id(store, "projects/deploy.md")
    blob = bytes(64 * 4)
    _without_fk(store)
    store.conn.execute("INSERT INTO vector_data (vector_id, doc_id, embedding) VALUES (?, ?, ?)",
                       (doc_id * 32 + 9, doc_id, blob))


def _change_body(store: KnowledgeStore) -> None:
    store.conn.execute("UPDATE documents SET body = 'rewritten by hand: kubernetes' "
                       "WHERE path = 'projects/deploy.md'")


def _missing_hash_row(store: KnowledgeStore) -> None:
    store.conn.execute("DELETE FROM derived WHERE kind = 'doc_vector' AND doc_id = ?",
                       (_id(store, "domains/sqlite.md"),))


def _other_model(store: KnowledgeStore) -> None:
    store.conn.execute("UPDATE derived SET model = 'nomic:nomic-embed-text-v1.5:64::' "
                       "WHERE kind = 'doc_vector' AND doc_id = ?",
                       (_id(store, "domains/sqlite.md"),))


def _fts_row_lost(store: KnowledgeStore) -> None:
    # What a crash between the document and its index would leave (it cannot:
    # both are one transaction; this is done by hand).
    row = store.conn.execute("SELECT id, title, tags, body FROM documents "
                             "WHERE path = 'domains/sqlite.md'").fetchone()
    store.conn.execute("INSERT INTO documents_fts (documents_fts, rowid, title, tags, body) "
                       "VALUES ('delete', ?, ?, ?, ?)", tuple(row))


def _fts_index_wrong(store: KnowledgeStore) -> None:
    # Index tokens the stored document does not have.
    store.conn.execute("INSERT INTO documents_fts (rowid, title, tags, body) "
                       "VALUES (?, 'phantom', '[]', 'words never stored')",
                       (_id(store, "domains/sqlite.md"),))


def _fts_orphan(store: KnowledgeStore) -> None:
    store.conn.execute("INSERT INTO documents_fts (rowid, title, tags, body) "
                       "VALUES (999, 'ghost', '[]', 'of a deleted document')")


def _wrong_dimension(store: KnowledgeStore) -> None:
    schema.create_vector_table(store.conn, 32)


DAMAGE: dict[str, tuple[Callable[[KnowledgeStore], None], str]] = {
    "vec0 row deleted": (_delete_doc_vector, "documents_missing_vectors"),
    "float copy deleted": (_delete_float_copy, "documents_missing_vectors"),
    "question vector deleted": (_delete_question_vector, "questions_missing_vectors"),
    "orphan question": (_orphan_question, "orphan_questions"),
    "orphan hash row": (_orphan_derived, "orphan_derived"),
    "orphan vector": (_orphan_vector, "orphan_vectors"),
    "vector without a question": (_vector_without_question, "orphan_vectors"),
    "body changed by raw SQL": (_change_body, "stale_vectors"),
    "hash row deleted": (_missing_hash_row, "documents_missing_hash_row"),
    "vector from another model": (_other_model, "fingerprint_mismatch"),
    "FTS row lost": (_fts_row_lost, "documents_missing_fts"),
    "FTS row of a deleted document": (_fts_orphan, "orphan_fts_rows"),
    "FTS index disagrees with content": (_fts_index_wrong, "fts_integrity"),
    "vector table of another dimension": (_wrong_dimension, "vector_table"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_doctor_finds_the_damage_and_fix_repairs_it(kb: KnowledgeStore, damage: str) -> None:
    make, expected = DAMAGE[damage]
    make(kb)
    report = diagnose(kb)
    assert not report.ok
    assert expected in {c.name for c in report.problems}, report.to_dict()
    assert report.get(expected).count >= 1

    repaired = fix(kb)
    assert repaired.ok, repaired.to_dict()
    assert repaired.fixed  # it says what it did
    assert diagnose(kb).ok
    # Search works on the repaired store and finds every document.
    assert kb.search("deploy canary", limit=3)[0].path in ("projects/deploy.md",)
    assert len(kb) == 3


def test_fix_reembeds_a_body_changed_behind_the_stores_back(kb: KnowledgeStore) -> None:
    _change_body(kb)
    fix(kb)
    doc = kb.get("projects/deploy.md")
    assert doc is not None and doc.body.startswith("rewritten")
    stored = kb.conn.execute("SELECT content_hash FROM derived WHERE kind = 'doc_vector' AND "
                             "doc_id = ?", (_id(kb, doc.path),)).fetchone()[0]
    assert stored == doc_vector_hash(doc)
    assert kb.search("kubernetes", limit=1)[0].path == "projects/deploy.md"
    # The questions were about the old text: dropped, not kept stale.
    assert kb.conn.execute("SELECT count(*) FROM hype_questions WHERE doc_id = ?",
                           (_id(kb, doc.path),)).fetchone()[0] == 0


def test_pending_hype_is_a_note_not_a_problem(db_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.fail_with = RuntimeError("LLM down")
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True) as store:
        store.hype.backoff = 0
        store.upsert("projects/a.md", title="A", body="alpha")
        report = diagnose(store)
    assert report.ok
    assert report.get("pending_hype").count == 1
    assert not report.get("pending_hype").problem


def test_a_corrupt_page_is_reported_not_fixable(db_path: Path, kb: KnowledgeStore) -> None:
    kb.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = kb.conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'documents_topic'"
                           ).fetchone()[0]
    size = kb.conn.execute("PRAGMA page_size").fetchone()[0]
    kb.close()
    with open(db_path, "r+b") as f:  # scribble over the topic index's root page
        f.seek((page - 1) * size)
        f.write(b"\xde\xad\xbe\xef" * (size // 4))
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=False) as store:
        report = fix(store)
    assert not report.ok
    assert not report.get("integrity").ok and not report.get("integrity").fixable


# -- the command -----------------------------------------------------------------


def _run(*args: str) -> Any:
    _register()
    return CliRunner().invoke(cli, ["doctor", *args])


def test_cli_doctor_exit_codes_and_json(kb: KnowledgeStore, db_path: Path) -> None:
    healthy = _run("--db", str(db_path))
    assert healthy.exit_code == 0, healthy.output
    assert "no problems found" in healthy.output

    _delete_doc_vector(kb)
    _orphan_question(kb)
    found = _run("--db", str(db_path), "--json")
    assert found.exit_code == 1
    data = json.loads(found.stdout)
    assert data["ok"] is False
    problems = {c["name"]: c["count"] for c in data["checks"] if not c["ok"]}
    assert problems == {"documents_missing_vectors": 1, "orphan_questions": 1}

    text = _run("--db", str(db_path))
    assert text.exit_code == 1
    assert "FAIL   documents_missing_vectors: 1" in text.stdout
    assert "run with --fix" in text.stderr

    fixed = _run("--db", str(db_path), "--fix")
    assert fixed.exit_code == 0, fixed.output
    assert "fixed  deleted 1 orphan HyPE question(s)" in fixed.stdout
    assert _run("--db", str(db_path), "--json").exit_code == 0


def test_cli_doctor_does_not_create_a_missing_database(tmp_path: Path) -> None:
    result = _run("--db", str(tmp_path / "nope.sqlite"))
    assert result.exit_code == 1
    assert "no database" in result.output
    assert not (tmp_path / "nope.sqlite").exists()

"""kbstore doctor on a SQLite file: each kind of damage is made on purpose
with raw SQL, found, and (where it is derived data) repaired by --fix."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite import vectors as sqlite_vectors
from kbstore.doctor import diagnose, fix

from .util import SLOTS, connect_file, doc_id, file_state, raw

QUESTIONS = "How do I deploy?\nWhat breaks a release?\nWhen should I roll back?"


@pytest.fixture
def kb(db_path: Path, fake_llm) -> Iterator[KnowledgeStore]:  # type: ignore[no-untyped-def]
    """Three documents, each with a vector and three HyPE questions."""
    fake_llm.answer = lambda prompt: QUESTIONS
    store = KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True)
    store.upsert("projects/deploy.md", title="Deploy", body="ship it with a canary")
    store.upsert("domains/sqlite.md", title="SQLite", body="full text search ranking")
    store.upsert("journal/2026-01-02.md", title="Day", body="baked sourdough bread")
    yield store
    # Some tests close it themselves (closing twice is tested in contract/test_store.py).
    with contextlib.suppress(Exception):
        store.close()


def _sql(store: KnowledgeStore, *statements: str, foreign_keys: bool = True) -> None:
    conn = raw(store)
    if not foreign_keys:
        conn.execute("PRAGMA foreign_keys = OFF")
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.execute("PRAGMA foreign_keys = ON")


def _delete_doc_vector(store: KnowledgeStore) -> None:
    raw(store).execute("DELETE FROM vectors WHERE vector_id = ?",
                       (doc_id(store, "projects/deploy.md") * SLOTS,))


def _delete_float_copy(store: KnowledgeStore) -> None:
    raw(store).execute("DELETE FROM vector_data WHERE vector_id = ?",
                       (doc_id(store, "domains/sqlite.md") * SLOTS,))


def _delete_question_vector(store: KnowledgeStore) -> None:
    raw(store).execute("DELETE FROM vectors WHERE vector_id = ?",
                       (doc_id(store, "domains/sqlite.md") * SLOTS + 2,))


def _delete_question_floats(store: KnowledgeStore) -> None:
    doc = doc_id(store, "domains/sqlite.md")
    raw(store).execute("DELETE FROM vector_data WHERE vector_id IN (?, ?)",
                       (doc * SLOTS + 1, doc * SLOTS + 3))


def _orphan_question(store: KnowledgeStore) -> None:
    _sql(store, "INSERT INTO hype_questions VALUES (999, 1, 'whose question?')",
         foreign_keys=False)


def _orphan_derived(store: KnowledgeStore) -> None:
    _sql(store, "INSERT INTO derived (doc_id, kind, content_hash, model) "
                "VALUES (999, 'doc_vector', 'x', 'y')", foreign_keys=False)


def _orphan_vector(store: KnowledgeStore) -> None:
    raw(store).execute("INSERT INTO vectors (vector_id, kind, embedding_bits, doc_id, topic, "
                       "doc_type) VALUES (?, 'doc', vec_quantize_binary(?), 999, 'x', 'entry')",
                       (999 * SLOTS, bytes(64 * 4)))


def _vector_without_question(store: KnowledgeStore) -> None:
    doc = doc_id(store, "projects/deploy.md")
    raw(store).execute("INSERT INTO vector_data (vector_id, doc_id, embedding) VALUES (?, ?, ?)",
                       (doc * SLOTS + 9, doc, bytes(64 * 4)))


def _nan_vector(store: KnowledgeStore) -> None:
    raw(store).execute("UPDATE vector_data SET embedding = ? WHERE vector_id = ?",
                       (b"\x00\x00\xc0\x7f" * 64, doc_id(store, "domains/sqlite.md") * SLOTS))


def _change_body(store: KnowledgeStore) -> None:
    raw(store).execute("UPDATE documents SET body = 'rewritten by hand: kubernetes' "
                       "WHERE path = 'projects/deploy.md'")


def _missing_hash_row(store: KnowledgeStore) -> None:
    raw(store).execute("DELETE FROM derived WHERE kind = 'doc_vector' AND doc_id = ?",
                       (doc_id(store, "domains/sqlite.md"),))


def _other_model(store: KnowledgeStore) -> None:
    raw(store).execute("UPDATE derived SET model = 'nomic:nomic-embed-text-v1.5:64::' "
                       "WHERE kind = 'doc_vector' AND doc_id = ?",
                       (doc_id(store, "domains/sqlite.md"),))


def _fts_row_lost(store: KnowledgeStore) -> None:
    # What a crash between the document and its index would leave (it cannot:
    # both are one transaction; this is done by hand).
    row = raw(store).execute("SELECT id, title, tags, body FROM documents "
                             "WHERE path = 'domains/sqlite.md'").fetchone()
    raw(store).execute("INSERT INTO documents_fts (documents_fts, rowid, title, tags, body) "
                       "VALUES ('delete', ?, ?, ?, ?)", tuple(row))


def _fts_index_wrong(store: KnowledgeStore) -> None:
    # Index tokens the stored document does not have.
    raw(store).execute("INSERT INTO documents_fts (rowid, title, tags, body) "
                       "VALUES (?, 'phantom', '[]', 'words never stored')",
                       (doc_id(store, "domains/sqlite.md"),))


def _fts_orphan(store: KnowledgeStore) -> None:
    raw(store).execute("INSERT INTO documents_fts (rowid, title, tags, body) "
                       "VALUES (999, 'ghost', '[]', 'of a deleted document')")


def _question_edited(store: KnowledgeStore) -> None:
    # Since schema v4 no trigger follows hype_questions: questions_fts keeps
    # the old text until doctor rewrites it.
    raw(store).execute("UPDATE hype_questions SET question = 'Which zeppelin?' "
                       "WHERE doc_id = ? AND position = 2", (doc_id(store, "domains/sqlite.md"),))


def _question_text_stale(store: KnowledgeStore) -> None:
    raw(store).execute("UPDATE questions_fts SET questions = 'stale words' WHERE rowid = ?",
                       (doc_id(store, "domains/sqlite.md"),))


def _document_inserted_by_hand(store: KnowledgeStore) -> None:
    # No AFTER INSERT triggers since v4: neither FTS nor tag rows follow.
    raw(store).execute("INSERT INTO documents (path, topic, doc_type, title, tags, body, "
                       "content_hash) VALUES ('domains/hand.md', 'domains', 'entry', "
                       "'Hand made', '[\"Quill\"]', 'written in the shell', 'x')")


def _wrong_dimension(store: KnowledgeStore) -> None:
    sqlite_vectors.create_table(raw(store), 32)


def _vector_table_dropped(store: KnowledgeStore) -> None:
    raw(store).execute("DROP TABLE vectors")


DAMAGE: dict[str, tuple[Callable[[KnowledgeStore], None], str]] = {
    "vec0 row deleted": (_delete_doc_vector, "documents_missing_vectors"),
    "float copy deleted": (_delete_float_copy, "documents_missing_vectors"),
    "question vector deleted": (_delete_question_vector, "questions_missing_vectors"),
    "question float copies deleted": (_delete_question_floats, "questions_missing_vectors"),
    "orphan question": (_orphan_question, "orphan_questions"),
    "orphan hash row": (_orphan_derived, "orphan_derived"),
    "orphan vector": (_orphan_vector, "orphan_vectors"),
    "vector without a question": (_vector_without_question, "orphan_vectors"),
    "NaN vector": (_nan_vector, "invalid_vectors"),
    "body changed by raw SQL": (_change_body, "stale_vectors"),
    "hash row deleted": (_missing_hash_row, "documents_missing_hash_row"),
    "vector from another model": (_other_model, "fingerprint_mismatch"),
    "FTS row lost": (_fts_row_lost, "documents_missing_fts"),
    "FTS row of a deleted document": (_fts_orphan, "orphan_fts_rows"),
    "FTS index disagrees with content": (_fts_index_wrong, "fts_integrity"),
    "vector table of another dimension": (_wrong_dimension, "vector_table"),
    "vector table dropped": (_vector_table_dropped, "vector_table"),
    "documents_fts dropped": (lambda s: _sql(s, "DROP TABLE documents_fts"), "schema"),
    "titles_fts dropped": (lambda s: _sql(s, "DROP TABLE titles_fts"), "schema"),
    "question edited by hand": (_question_edited, "questions_fts_text"),
    "question text index stale": (_question_text_stale, "questions_fts_text"),
    "question text rows emptied": (lambda s: _sql(s, "DELETE FROM questions_fts"),
                                   "documents_missing_fts"),
    "document inserted by hand (FTS)": (_document_inserted_by_hand, "documents_missing_fts"),
    "document inserted by hand (tags)": (_document_inserted_by_hand, "tag_rows"),
    "FTS trigger dropped": (lambda s: _sql(s, "DROP TRIGGER documents_fts_au"), "schema"),
    "tag trigger dropped": (lambda s: _sql(s, "DROP TRIGGER documents_tags_au"), "schema"),
    "index dropped": (lambda s: _sql(s, "DROP INDEX documents_topic"), "schema"),
    "tag rows emptied": (lambda s: _sql(s, "DELETE FROM document_tags"), "tag_rows"),
    "fusion defaults malformed": (
        lambda s: _sql(s, "UPDATE meta SET value = '\"[1, 2\"' WHERE key = 'fusion'"),
        "meta_fusion"),
}


def _tagged(store: KnowledgeStore) -> None:
    store.upsert("domains/tagged.md", title="Tagged", body="nothing else", tags=["xylophone"])


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_doctor_finds_the_damage_and_fix_repairs_it(kb: KnowledgeStore, damage: str) -> None:
    _tagged(kb)
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
    # Search works on the repaired store and every retriever finds its documents.
    # (every document has the same three HyPE questions, "How do I deploy?"
    # among them, so the HyPE lists rank all of them -- the repaired document
    # waits for its questions: its own text and vector are what must work)
    hit = next(h for h in kb.search("deploy canary", limit=10, explain=True)
               if h.path == "projects/deploy.md")
    assert hit.explain["ranks"]["fts"] == 1 and hit.explain["ranks"]["vector"] is not None
    assert kb.search("xylophone", explain=True)[0].explain["ranks"]["frontmatter"] == 1
    assert len(kb) == (5 if damage.startswith("document inserted by hand") else 4)
    reopened = KnowledgeStore.open(kb.location, read_only=True)
    try:  # a fresh open reads the repaired fusion defaults and schema
        assert "projects/deploy.md" in [h.path for h in reopened.search("deploy canary")]
        assert reopened.search_defaults == kb.search_defaults
    finally:
        reopened.close()


def test_fix_reembeds_a_body_changed_behind_the_stores_back(kb: KnowledgeStore) -> None:
    _change_body(kb)
    fix(kb)
    doc = kb.get("projects/deploy.md")
    assert doc is not None and doc.body.startswith("rewritten")
    stored = raw(kb).execute("SELECT content_hash FROM derived WHERE kind = 'doc_vector' AND "
                             "doc_id = ?", (doc_id(kb, doc.path),)).fetchone()[0]
    assert stored == doc.vector_hash()
    assert kb.search("kubernetes", limit=1)[0].path == "projects/deploy.md"
    # The questions were about the old text: dropped, not kept stale.
    assert raw(kb).execute("SELECT count(*) FROM hype_questions WHERE doc_id = ?",
                           (doc_id(kb, doc.path),)).fetchone()[0] == 0


def test_malformed_fusion_defaults_do_not_break_other_commands(kb: KnowledgeStore,
                                                               run_cli) -> None:  # type: ignore[no-untyped-def]
    DAMAGE["fusion defaults malformed"][0](kb)
    location = kb.location
    kb.close()
    assert run_cli("status", "--db", location).exit_code == 0
    hits = run_cli("search", "--db", location, "deploy canary", "--json")
    assert hits.exit_code == 0 and "projects/deploy.md" in hits.output.splitlines()[0]
    assert run_cli("doctor", "--db", location).exit_code == 1
    assert run_cli("doctor", "--db", location, "--fix").exit_code == 0


def test_an_interrupted_reembed_is_a_note_and_fix_discards_it(kb: KnowledgeStore) -> None:
    kb.backend.rebuild_begin("fake:hashing-bow:128::")  # what a killed reembed leaves
    report = diagnose(kb)
    assert report.ok and report.get("rebuild_in_progress").count == 1
    assert kb.status()["rebuild_in_progress"] is True
    assert "discarded the vectors staged by an interrupted reembed" in fix(kb).fixed
    assert kb.status()["rebuild_in_progress"] is False


def test_a_lost_fingerprint_is_recorded_again_by_fix_with_an_embedder(kb: KnowledgeStore,
                                                                      run_cli) -> None:  # type: ignore[no-untyped-def]
    _sql(kb, "DELETE FROM meta WHERE key = 'embedder'")
    location = kb.location
    questions = raw(kb).execute("SELECT doc_id, position, question FROM hype_questions "
                                "ORDER BY 1, 2").fetchall()
    kb.close()
    before = file_state(location)
    found = run_cli("doctor", "--db", location, "--json")
    assert found.exit_code == 1
    assert {c["name"] for c in json.loads(found.output)["checks"] if not c["ok"]} == {
        "fingerprint"}
    refused = run_cli("doctor", "--db", location, "--fix")
    assert refused.exit_code == 1 and "--embedder" in refused.output
    assert run_cli("status", "--db", location).exit_code == 0
    assert file_state(location) == before  # nothing was guessed, nothing deleted
    fixed = run_cli("doctor", "--db", location, "--fix", "--embedder", "fake")
    assert fixed.exit_code == 0, fixed.output
    assert "recorded the fake fingerprint and embedded 3 document(s)" in fixed.output
    with KnowledgeStore.open(location, hype=False) as store:
        assert store.status()["embedder"] == FakeEmbedder(64).fingerprint()
        assert store.status()["vectors"] == 12  # 3 documents + 9 questions
        conn = raw(store)
        assert conn.execute("SELECT doc_id, position, question FROM hype_questions "
                            "ORDER BY 1, 2").fetchall() == questions
        assert store.search("deploy canary", explain=True)[0].explain["ranks"]["vector"] == 1


def test_a_corrupt_page_is_reported_not_fixable(db_path: Path, kb: KnowledgeStore) -> None:
    conn = raw(kb)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'documents_topic'"
                        ).fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    kb.close()
    with open(db_path, "r+b") as f:  # scribble over the topic index's root page
        f.seek((page - 1) * size)
        f.write(b"\xde\xad\xbe\xef" * (size // 4))
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=False) as store:
        report = fix(store)
    assert not report.ok
    assert not report.get("integrity").ok and not report.get("integrity").fixable


# -- the command -----------------------------------------------------------------


def test_cli_doctor_exit_codes_and_json(kb: KnowledgeStore, db_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    _delete_doc_vector(kb)
    _orphan_question(kb)
    found = run_cli("doctor", "--db", db_path, "--json")
    assert found.exit_code == 1
    data = json.loads(found.stdout)
    assert data["ok"] is False
    problems = {c["name"]: c["count"] for c in data["checks"] if not c["ok"]}
    # (since schema v4 no trigger copies a question inserted by hand into
    # questions_fts, so it leaves no orphan FTS row there)
    assert problems == {"documents_missing_vectors": 1, "orphan_questions": 1}

    text = run_cli("doctor", "--db", db_path)
    assert text.exit_code == 1
    assert "FAIL   documents_missing_vectors: 1" in text.stdout
    assert "run with --fix" in text.stderr

    fixed = run_cli("doctor", "--db", db_path, "--fix")
    assert fixed.exit_code == 0, fixed.output
    assert "fixed  deleted 1 orphan row(s) from hype_questions" in fixed.stdout
    assert "fixed  re-embedded 1 document(s)" in fixed.stdout
    assert run_cli("doctor", "--db", db_path, "--json").exit_code == 0


def test_doctor_without_fix_leaves_a_damaged_file_byte_identical(kb: KnowledgeStore,
                                                                 db_path: Path,
                                                                 run_cli) -> None:  # type: ignore[no-untyped-def]
    _delete_doc_vector(kb)
    kb.close()
    conn = connect_file(db_path)
    conn.close()
    before = file_state(db_path)
    assert run_cli("doctor", "--db", db_path).exit_code == 1
    assert file_state(db_path) == before


class _FailsAfter(FakeEmbedder):
    """A fake embedder whose document embedding fails after ``calls`` calls."""

    def __init__(self, calls: int) -> None:
        super().__init__(64)
        self.left = calls

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        if self.left == 0:
            raise RuntimeError("embedder went away")
        self.left -= 1
        return super().embed_documents(texts)


def test_a_restamp_that_fails_midway_leaves_the_file_as_it_was(kb: KnowledgeStore) -> None:
    """Recording a fingerprint again switches every vector in one go: an
    embedder failing (or a kill) after the first batch leaves the store
    without a fingerprint and with its vectors, not with every vector gone."""
    _sql(kb, "DELETE FROM meta WHERE key = 'embedder'")
    location = kb.location
    kb.close()
    with KnowledgeStore.open(location, hype=False) as store:
        with pytest.raises(RuntimeError, match="embedder went away"):
            store.restamp(_FailsAfter(1))  # the first call is the embedder's check
    with KnowledgeStore.open(location, hype=False) as store:
        conn = raw(store)
        assert conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone() is None
        assert conn.execute("SELECT count(*) FROM vector_data").fetchone()[0] == 12
        assert conn.execute("SELECT count(*) FROM derived WHERE kind IN "
                            "('doc_vector', 'hype_vectors')").fetchone()[0] == 6
    with KnowledgeStore.open(location, hype=False) as store:
        assert store.restamp(FakeEmbedder(64)) == 3
        assert diagnose(store).ok
        assert store.status()["vectors"] == 12

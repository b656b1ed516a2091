"""Schema v4: a file written by schema v3 (its questions_fts, FTS and tag
rows made by triggers) is upgraded with its rows intact, and from then on
the backend writes those rows itself, once per document, with the same
values the triggers wrote."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore import migrations as migration_files
from kbstore.backends.sqlite import migrations as sqlite_migrations
from kbstore.doctor import diagnose
from kbstore.hype_jobs import run_hype
from kbstore.ingest import make_document
from kbstore.model import embedding_text, fingerprint_id

from .util import SLOTS, connect_file, doc_id, raw

V3_TRIGGERS = {"hype_questions_fts_ai", "hype_questions_fts_ad", "hype_questions_fts_au",
               "documents_fts_ai", "titles_fts_ai", "documents_tags_ai"}
# path, title, tags, body, HyPE questions
V3_DOCUMENTS = [
    ("domains/kiln.md", "Firing a kiln", ["Ceramics", " glaze "],
     "Stoneware is fired to cone six; bisque first, then the glaze firing.",
     ["Which cone is stoneware fired to?", "Why bisque before glazing?"]),
    ("projects/loom.md", "Warping a loom", ["weaving"],
     "Wind the warp on the back beam under even tension before threading heddles.",
     ["How do I keep warp tension even?", "What comes before threading heddles?",
      "Where does the warp get wound?"]),
]
LLM_MODEL = "fake/llm"
NEW_QUESTIONS = "Which heddle hook fits?\nHow long is the warp?"


def _make_v3_file(path: Path) -> None:
    """A schema-v3 file as kbstore's v3 code left it: the v3 steps applied by
    the runner, then each document, question and vector written with the
    statements v3 used, so its triggers made the index rows."""
    real_steps = migration_files.steps
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sqlite_migrations, "steps", lambda backend: real_steps(backend)[:3])
        mp.setattr(sqlite_migrations, "SCHEMA_VERSION", 3)
        with KnowledgeStore.open(path, FakeEmbedder(64), hype=False) as store:
            assert store.status()["schema_version"] == 3  # schema, meta, empty vec0 table
    embedder = FakeEmbedder(64)
    fp = fingerprint_id(embedder.fingerprint())
    conn = connect_file(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for path_, title, tags, body, questions in V3_DOCUMENTS:
            doc = make_document(path_, title=title, body=body, tags=tags)
            did = conn.execute(
                "INSERT INTO documents (title, tags, body, topic, doc_type, created, updated, "
                "content_hash, extra, path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '{}', ?)",
                (doc.title, json.dumps(doc.tags), doc.body, doc.topic, doc.doc_type,
                 doc.created, doc.updated, doc.content_hash(), doc.path)).lastrowid
            vectors = [embedder.embed_documents([embedding_text(title, doc.tags, body)])[0],
                       *embedder.embed_queries(questions)]
            for slot, vector in enumerate(vectors):
                blob = np.asarray(vector, np.float32).tobytes()
                conn.execute("INSERT INTO vectors (vector_id, kind, embedding_bits, doc_id, "
                             "topic, doc_type) VALUES (?, ?, vec_quantize_binary(?), ?, ?, ?)",
                             (did * SLOTS + slot, "doc" if slot == 0 else "hype", blob, did,
                              doc.topic, doc.doc_type))
                conn.execute("INSERT INTO vector_data (vector_id, doc_id, embedding) "
                             "VALUES (?, ?, ?)", (did * SLOTS + slot, did, blob))
            for position, question in enumerate(questions, start=1):
                conn.execute("INSERT INTO hype_questions (doc_id, position, question) "
                             "VALUES (?, ?, ?)", (did, position, question))
            for kind, chash, model in (("doc_vector", doc.vector_hash(), fp),
                                       ("hype_questions", doc.hype_hash(), LLM_MODEL),
                                       ("hype_vectors", doc.hype_hash(), fp)):
                conn.execute("INSERT INTO derived (doc_id, kind, content_hash, model) "
                             "VALUES (?, ?, ?, ?)", (did, kind, chash, model))
        conn.execute("COMMIT")
    finally:
        conn.close()


def _index_rows(conn) -> dict[str, list]:  # type: ignore[no-untyped-def]
    return {
        "questions_fts": conn.execute("SELECT rowid, questions FROM questions_fts "
                                      "ORDER BY rowid").fetchall(),
        "documents_fts": conn.execute("SELECT rowid FROM documents_fts_docsize "
                                      "ORDER BY 1").fetchall(),
        "document_tags": conn.execute("SELECT tag, doc_id FROM document_tags "
                                      "ORDER BY 1, 2").fetchall(),
    }


def test_a_v3_file_is_upgraded_with_its_index_rows_intact(db_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    _make_v3_file(db_path)
    conn = connect_file(db_path)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master "
                                            "WHERE type = 'trigger'")}
        assert V3_TRIGGERS <= names  # the triggers really made the v3 rows
        before = _index_rows(conn)
    finally:
        conn.close()
    assert [r[1] for r in before["questions_fts"]] == [
        "\n".join(d[4]) for d in V3_DOCUMENTS]
    assert ("ceramics", 1) in before["document_tags"] and ("glaze", 1) in before["document_tags"]

    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True,
                             hype_model=LLM_MODEL) as store:
        conn = raw(store)
        assert store.status()["schema_version"] == 5
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master "
                                               "WHERE type = 'trigger'")}
        assert not triggers & V3_TRIGGERS
        assert _index_rows(conn) == before
        assert diagnose(store).ok
        hit = store.search("warp tension even", limit=1, explain=True)[0]
        assert hit.path == "projects/loom.md" and hit.explain["ranks"]["hype_fts"] == 1

        # New questions replace the old text in questions_fts (no trigger now).
        fake_llm.answer = lambda prompt: NEW_QUESTIONS
        run_hype(store, "all")
        loom = doc_id(store, "projects/loom.md")
        assert conn.execute("SELECT questions FROM questions_fts WHERE rowid = ?",
                            (loom,)).fetchone()[0] == NEW_QUESTIONS
        assert conn.execute("SELECT count(*) FROM questions_fts WHERE questions_fts MATCH "
                            "'tension'").fetchone()[0] == 0

        # A new document gets the FTS and tag rows the v3 triggers made.
        store.upsert("domains/dye.md", title="Indigo dye vat", body="Keep the vat reduced.",
                     tags=["Dyeing", "  "])
        dye = doc_id(store, "domains/dye.md")
        assert conn.execute("SELECT tag FROM document_tags WHERE doc_id = ?",
                            (dye,)).fetchall() == [("dyeing",)]
        assert conn.execute("SELECT rowid FROM titles_fts WHERE titles_fts MATCH 'indigo'"
                            ).fetchall() == [(dye,)]
        assert store.search("reduced vat", limit=1)[0].path == "domains/dye.md"
        assert conn.execute("SELECT questions FROM questions_fts WHERE rowid = ?",
                            (dye,)).fetchone()[0] == NEW_QUESTIONS

        # Deleting a document still removes its question text.
        assert store.delete("projects/loom.md")
        assert conn.execute("SELECT count(*) FROM questions_fts WHERE rowid = ?",
                            (loom,)).fetchone()[0] == 0
        assert diagnose(store).ok
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("tags", [["Ceramics", " glaze ", "  ", "GLAZE"], ["Ärger", "ÄRGER"],
                                  ["\tTab", "Straße", "ÉCOLE", ""], []])
def test_tag_rows_use_the_query_words_rule(tags: list[str]) -> None:
    """One row per distinct non-blank tag, trimmed and lower-cased with the
    rule the query's words get (full Unicode: SQLite's lower() would leave
    "Ä" and never meet the query word "ärger")."""
    from kbstore.backends.sqlite.pending import tag_rows
    from kbstore.model import tag_key
    from kbstore.query import query_terms

    rows = tag_rows(7, tags)
    assert len(rows) == len({r[0] for r in rows}) and all(r[1] == 7 for r in rows)
    assert {r[0] for r in rows} == {t.strip().lower() for t in tags if t.strip()}
    for tag in tags:  # a one-word tag's key is the word the query analysis makes of it
        if tag.strip().isalpha():
            assert query_terms(tag) == [tag_key(tag)]


def test_read_commands_work_on_a_v3_file_and_leave_it_as_it_is(db_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    """After an upgrade of kbstore, search/status/doctor/export still work on a
    v3 file (v4 changed only how writes make the index rows), say that a
    migration is pending, and do not migrate or modify it; a write migrates."""
    from .util import file_state

    _make_v3_file(db_path)
    before = file_state(db_path)
    with KnowledgeStore.open(db_path, read_only=True) as store:
        assert store.status()["schema_version"] == 3
        assert store.status()["pending_migrations"] == ["0004_index_rows_written_per_batch",
                                                        "0005_sign_bits_index"]
        assert store.search("stoneware cone", limit=1)[0].path == "domains/kiln.md"
        assert store.search("ceramics", limit=1)[0].path == "domains/kiln.md"  # a tag
        report = diagnose(store)
        assert report.ok, [c.to_dict() for c in report.problems]
    text = run_cli("status", "--db", db_path).output
    assert "schema version  3 (2 migration(s) pending: `kbstore migrate`" in text, text
    hits = run_cli("search", "--db", db_path, "warp tension", "--json")
    assert hits.exit_code == 0 and json.loads(hits.output.splitlines()[0])["path"] == \
        "projects/loom.md"
    assert run_cli("doctor", "--db", db_path).exit_code == 0
    assert file_state(db_path) == before
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=False) as store:
        assert store.status()["schema_version"] == 5 and not store.status()["pending_migrations"]

"""Schema v4 of the SQLite file: the exact fresh schema, migrations, refusal
of a newer schema, integrity, ids that are never reused, the sqlite3 shell
without/with the extension, sqlite-utils' view of the FTS tables, and the
committed v1 file upgraded to v4 with its ids and vectors intact (a v3 file
with HyPE questions: tests/sqlite/test_schema_v4.py)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kbstore import FakeEmbedder, KnowledgeStore, SchemaTooNewError
from kbstore import migrations as migration_files
from kbstore.backends.sqlite import migrations as sqlite_migrations
from kbstore.backends.sqlite.connection import vec_path
from kbstore.doctor import diagnose, fix
from kbstore.query import DEFAULTS

from .util import SLOTS, connect_file, doc_id, file_state, raw

SQLITE3 = shutil.which("sqlite3") or ("/usr/bin/sqlite3" if Path("/usr/bin/sqlite3").exists()
                                      else None)
STEPS = ["0001_initial", "0002_stable_ids_and_viewers", "0003_chunk_vectors",
         "0004_index_rows_written_per_batch", "0005_sign_bits_index"]
USER_TABLES = {"_sqlite_migrations", "meta", "documents", "document_tags", "documents_fts",
               "titles_fts", "hype_questions", "derived", "vector_data", "vectors",
               "document_chunks", "questions_fts"}
COLUMNS = {
    "documents": ["id", "path", "topic", "doc_type", "title", "tags", "body", "created",
                  "updated", "content_hash", "extra"],
    "document_tags": ["tag", "doc_id"],
    "hype_questions": ["doc_id", "position", "question"],
    "derived": ["doc_id", "kind", "content_hash", "model", "status", "error", "made_at"],
    "meta": ["key", "value"],
    "vector_data": ["vector_id", "doc_id", "embedding", "bits"],
    "document_chunks": ["doc_id", "position", "vector_id", "start_char", "end_char"],
}
# Since v4 a new document's index rows and the question text are written by
# the backend; only updates and deletes keep triggers.
TRIGGERS = {"documents_tags_au", "documents_rows_ad", "documents_fts_ad", "documents_fts_au",
            "titles_fts_ad", "titles_fts_au"}
INDEXES = {"derived_pending", "document_tags_doc", "documents_topic", "documents_updated",
           "documents_created",
           "vector_data_doc", "vector_bits_doc", "vector_bits_hype", "vector_bits_chunk",
           "idx__sqlite_migrations_migration_set_name"}
# vec0 holds sign bits for the KNN prefilter, kind as partition key, topic and
# doc_type as metadata columns; float32 copies live in the plain vector_data.
VECTOR_COLUMNS = ["vector_id", "kind", "embedding_bits", "doc_id", "topic", "doc_type"]


def _columns(conn, table: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [row[1] for row in conn.execute(f"PRAGMA table_xinfo({table})")]


def _user_tables(conn) -> set[str]:  # type: ignore[no-untyped-def]
    """Tables minus SQLite's and the virtual tables' own shadow tables."""
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    shadow = {n for n in names for v in ("documents_fts_", "titles_fts_", "questions_fts_",
                                         "vectors_")
              if n.startswith(v)}
    return names - shadow - {"sqlite_sequence"}


def _sql(conn, name: str) -> str:  # type: ignore[no-untyped-def]
    return conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]


def test_fresh_schema_is_exact(store: KnowledgeStore) -> None:
    conn = raw(store)
    assert _user_tables(conn) == USER_TABLES
    for table, columns in COLUMNS.items():
        assert _columns(conn, table) == columns, table
    kinds = {kind: {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = ? AND sql IS NOT NULL", (kind,))}
        for kind in ("trigger", "index")}
    assert kinds == {"trigger": TRIGGERS, "index": INDEXES}
    assert "AUTOINCREMENT" in _sql(conn, "documents")  # ids are never handed out twice
    fts_sql = _sql(conn, "documents_fts")
    assert "fts5" in fts_sql and "porter unicode61" in fts_sql
    # the form sqlite-utils and Datasette recognise (not content = 'documents')
    assert 'content="documents"' in fts_sql and 'content="documents"' in _sql(conn, "titles_fts")
    assert _columns(conn, "documents_fts")[:3] == ["title", "tags", "body"]
    assert "porter" not in _sql(conn, "titles_fts")  # exact (unstemmed) title words
    assert _columns(conn, "titles_fts")[:1] == ["title"]
    # vec0 lists its hidden 'distance' and 'k' columns after the declared ones
    assert _columns(conn, "vectors")[:len(VECTOR_COLUMNS)] == VECTOR_COLUMNS
    vec_sql = _sql(conn, "vectors")
    assert "vec0" in vec_sql and "bit[64]" in vec_sql
    assert "kind TEXT PARTITION KEY" in vec_sql
    assert conn.execute("PRAGMA user_version").fetchone()[0] == \
        sqlite_migrations.SCHEMA_VERSION == len(STEPS) == 5
    assert [name for name, _ in migration_files.steps("sqlite")] == STEPS
    assert store.backend.get_meta("embedder") == FakeEmbedder(64).fingerprint()
    assert store.backend.get_meta("fusion") == DEFAULTS


def test_cli_init_makes_the_same_schema(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "cli.sqlite"
    result = run_cli("init", "--db", path, "--embedder", "fake", "--dim", "32")
    assert result.exit_code == 0, result.output
    conn = connect_file(path, mode="read")
    try:
        assert _user_tables(conn) == USER_TABLES
        assert "bit[32]" in _sql(conn, "vectors")
    finally:
        conn.close()


def test_migrations_are_idempotent_across_reopen(db_path: Path, embedder: FakeEmbedder) -> None:
    with KnowledgeStore.open(db_path, embedder, hype=False) as s:
        first = raw(s).execute("SELECT id, name, applied_at FROM _sqlite_migrations").fetchall()
    assert [r[1] for r in first] == STEPS
    for _ in range(3):
        with KnowledgeStore.open(db_path, embedder, hype=False) as s:
            conn = raw(s)
            assert conn.execute("SELECT id, name, applied_at FROM _sqlite_migrations"
                                ).fetchall() == first
            assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
            assert sqlite_migrations.migrate(conn, str(db_path)) == []
            assert sqlite_migrations.state(conn).pending == []


def test_migration_state_of_an_empty_file(tmp_path: Path) -> None:
    conn = connect_file(tmp_path / "empty.sqlite", mode="create")
    try:
        current = sqlite_migrations.state(conn)
        assert current.applied == [] and current.pending == STEPS
        assert sqlite_migrations.migrate(conn, "empty.sqlite") == STEPS
        assert sqlite_migrations.state(conn).version == 5
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # back on afterwards
    finally:
        conn.close()


@pytest.mark.parametrize("how", ["migration_row", "user_version"])
def test_future_schema_is_refused_and_untouched(db_path: Path, embedder: FakeEmbedder,
                                                how: str) -> None:
    with KnowledgeStore.open(db_path, embedder, hype=False) as s:
        if how == "migration_row":
            raw(s).execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                           "VALUES ('kbstore', '0003_from_the_future', '2099-01-01')")
        else:
            raw(s).execute("PRAGMA user_version = 99")
    before = file_state(db_path)
    for read_only in (False, True):
        with pytest.raises(SchemaTooNewError, match="upgrade kbstore"):
            KnowledgeStore.open(db_path, embedder, hype=False, read_only=read_only)
    # The refused opens wrote nothing (no WAL frames either).
    assert file_state(db_path) == before


def test_integrity_checks_pass_after_writes(store: KnowledgeStore) -> None:
    store.upsert("projects/a.md", title="Alpha", body="first body", tags=["x", "y"])
    store.upsert("projects/b.md", title="Beta", body="second body", tags=["y"])
    store.upsert("projects/a.md", title="Alpha 2", body="changed body", tags=["z"])
    store.delete("projects/b.md")
    conn = raw(store)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    # Raises (SQLITE_CORRUPT_VTAB) if the external-content index drifted.
    conn.execute("INSERT INTO documents_fts(documents_fts) VALUES('integrity-check')")
    conn.execute("INSERT INTO titles_fts(titles_fts) VALUES('integrity-check')")
    assert conn.execute("SELECT tag FROM document_tags ORDER BY tag").fetchall() == [("z",)]


def test_document_ids_are_never_reused(store: KnowledgeStore) -> None:
    store.upsert("projects/a.md", title="A", body="a")
    store.upsert("projects/b.md", title="B", body="b")
    newest = doc_id(store, "projects/b.md")
    store.delete("projects/b.md")
    store.upsert("projects/c.md", title="C", body="c")
    assert doc_id(store, "projects/c.md") > newest
    vector_ids = [r[0] for r in raw(store).execute("SELECT vector_id FROM vector_data")]
    assert doc_id(store, "projects/c.md") * SLOTS in vector_ids
    assert newest * SLOTS not in vector_ids


def test_sqlite_utils_and_datasette_see_the_full_text_index(db_path: Path,
                                                            embedder: FakeEmbedder) -> None:
    import sqlite_utils

    with KnowledgeStore.open(db_path, embedder, hype=False) as s:
        s.upsert("domains/knots.md", title="Sailing knots", body="The bowline makes a loop.")
        s.upsert("domains/bread.md", title="Bread", body="Knead the dough for ten minutes.")
    db = sqlite_utils.Database(sqlite3.connect(db_path))  # no extension: as users open it
    try:
        assert db["documents"].detect_fts() == "documents_fts"
        found = list(db["documents"].search("bowline", columns=["path"]))
        assert found == [{"path": "domains/knots.md"}]
    finally:
        db.conn.close()


def _shell(*args: str) -> subprocess.CompletedProcess[str]:
    assert SQLITE3 is not None
    return subprocess.run([SQLITE3, *args], capture_output=True, text=True, timeout=30)


@pytest.mark.skipif(SQLITE3 is None, reason="no sqlite3 shell on this machine")
def test_sqlite3_shell_reads_without_and_queries_with_the_extension(
        db_path: Path, embedder: FakeEmbedder) -> None:
    with KnowledgeStore.open(db_path, embedder, hype=False) as s:
        s.upsert("domains/knots.md", title="Sailing knots", body="The bowline makes a loop.",
                 tags=["sailing"])
        s.upsert("domains/bread.md", title="Bread", body="Knead the dough for ten minutes.")
        knots = doc_id(s, "domains/knots.md")
    tables = _shell(str(db_path), ".tables")
    assert tables.returncode == 0, tables.stderr
    assert {"documents", "documents_fts", "hype_questions", "meta"} <= set(tables.stdout.split())
    rows = _shell(str(db_path), "SELECT path FROM documents ORDER BY path")
    assert rows.returncode == 0 and rows.stdout.split() == ["domains/bread.md",
                                                            "domains/knots.md"]
    fts = _shell(str(db_path), "SELECT rowid FROM documents_fts WHERE documents_fts MATCH "
                 "'bowline'")
    assert fts.returncode == 0 and fts.stdout.strip() == str(knots)
    # a query vector passed as a JSON array, as the README shows
    query = embedder.embed_queries(["Sailing knots. Tags: sailing. The bowline makes a loop."])[0]
    as_json = "[" + ",".join(f"{x:.6f}" for x in query) + "]"
    knn = _shell(str(db_path), f".load {vec_path()}",
                 "SELECT doc_id FROM vectors WHERE embedding_bits MATCH "
                 f"vec_quantize_binary(vec_f32('{as_json}')) AND k = 1 AND kind = 'doc'")
    assert knn.returncode == 0, knn.stderr
    assert knn.stdout.strip() == str(knots)
    exact = _shell(str(db_path), f".load {vec_path()}",
                   "SELECT doc_id FROM vector_data ORDER BY "
                   f"vec_distance_cosine(embedding, vec_f32('{as_json}')) LIMIT 1")
    assert exact.returncode == 0 and exact.stdout.strip() == str(knots), exact.stderr


@pytest.mark.skipif(SQLITE3 is None, reason="no sqlite3 shell on this machine")
def test_deleting_the_newest_document_in_the_shell_does_not_block_the_next_insert(
        db_path: Path, embedder: FakeEmbedder) -> None:
    """The shell has foreign keys off and no vec0: the document's plain rows go
    by trigger, its vec0 rows stay behind. Ids are never reused, so they no
    longer collide with the next document's (doctor --fix removes them)."""
    with KnowledgeStore.open(db_path, embedder, hype=False) as s:
        s.upsert("domains/a.md", title="A", body="first")
        s.upsert("domains/b.md", title="B", body="newest")
    gone = _shell(str(db_path), "DELETE FROM documents WHERE path = 'domains/b.md'")
    assert gone.returncode == 0, gone.stderr
    with KnowledgeStore.open(db_path, embedder, hype=False) as s:
        conn = raw(s)
        for table in ("document_tags", "hype_questions", "derived", "vector_data"):
            assert conn.execute(f"SELECT count(*) FROM {table} WHERE doc_id NOT IN "
                                "(SELECT id FROM documents)").fetchone()[0] == 0, table
        assert s.upsert("domains/c.md", title="C", body="inserted after the shell") == "added"
        report = diagnose(s)
        assert report.get("orphan_vectors").count == 1  # b's vec0 row
        assert fix(s).ok
        assert s.search("inserted after the shell", limit=1)[0].path == "domains/c.md"


def test_legacy_v1_file_is_upgraded_with_ids_and_vectors_intact(legacy_v1: Path) -> None:
    old = sqlite3.connect(legacy_v1)
    try:
        ids_before = old.execute("SELECT id, path, content_hash FROM documents ORDER BY id"
                                 ).fetchall()
        vectors_before = old.execute("SELECT vector_id, doc_id, embedding FROM vector_data "
                                     "ORDER BY vector_id").fetchall()
        assert old.execute("PRAGMA user_version").fetchone()[0] == 1
    finally:
        old.close()
    with KnowledgeStore.open(legacy_v1, hype=False) as s:  # embedder from the stored fingerprint
        assert isinstance(s.embedder, FakeEmbedder) and s.embedder.dim == 64
        assert s.status()["schema_version"] == 5
        conn = raw(s)
        assert [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations")] == STEPS
        assert conn.execute("SELECT id, path, content_hash FROM documents ORDER BY id"
                            ).fetchall() == ids_before
        assert conn.execute("SELECT vector_id, doc_id, embedding FROM vector_data "
                            "ORDER BY vector_id").fetchall() == vectors_before
        assert 'content="documents"' in _sql(conn, "documents_fts")
        assert s.paths() == ["domains/legacy-bicycle.md", "journal/2025-05-03-legacy-concert.md",
                             "projects/legacy-garden.md"]
        assert s.search("watering tomatoes", limit=1)[0].path == "projects/legacy-garden.md"
        assert s.search("bicycle chain", limit=1)[0].path == "domains/legacy-bicycle.md"
        # a journal note decays with age: search as of its date
        hit = s.search("brass quintet", limit=1, now="2025-05-03T12:00:00")[0]
        assert hit.path == "journal/2025-05-03-legacy-concert.md" and hit.doc_type == "journal"
        # its stored vectors are still usable by a KNN with the same embedder
        qvec = s.embedder.embed_queries(["bicycle chain lubricant"])[0]
        nearest = conn.execute(
            "SELECT doc_id FROM vector_data ORDER BY vec_distance_cosine(embedding, ?) LIMIT 1",
            (np.asarray(qvec, np.float32).tobytes(),)).fetchone()[0]
        assert nearest == 2
        assert s.search("bicycle chain lubricant", explain=True)[0].explain["ranks"][
            "vector"] == 1
        assert diagnose(s).ok
        # the upgraded file is writable, and the next id follows the old ones
        assert s.upsert("domains/new.md", title="New", body="added later") == "added"
        assert doc_id(s, "domains/new.md") == 4
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

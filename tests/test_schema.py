"""Schema v1: the exact fresh schema, migrations, refusal of a newer schema,
integrity, the sqlite3 shell without/with the extension, a legacy fixture."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kbstore import FakeEmbedder, KnowledgeStore, SchemaTooNewError, schema
from kbstore import db as kbdb
from kbstore import migrations as kbmigrations

FIXTURES = Path(__file__).parent / "fixtures"
SQLITE3 = shutil.which("sqlite3") or ("/usr/bin/sqlite3" if Path("/usr/bin/sqlite3").exists()
                                      else None)

USER_TABLES = {"_sqlite_migrations", "meta", "documents", "document_tags", "documents_fts",
               "titles_fts", "hype_questions", "derived", "vector_data", "vectors"}
COLUMNS = {
    "documents": ["id", "path", "topic", "doc_type", "title", "tags", "body", "created",
                  "updated", "content_hash"],
    "document_tags": ["tag", "doc_id"],
    "hype_questions": ["doc_id", "position", "question"],
    "derived": ["doc_id", "kind", "content_hash", "model", "status", "error", "made_at"],
    "meta": ["key", "value"],
    "vector_data": ["vector_id", "doc_id", "embedding"],
}
TRIGGERS = {"documents_tags_ai", "documents_tags_au", "documents_fts_ai", "documents_fts_ad",
            "documents_fts_au", "titles_fts_ai", "titles_fts_ad", "titles_fts_au"}
# vec0 holds sign bits for the KNN prefilter, kind as partition key, topic and
# doc_type as metadata columns; float32 copies live in the plain vector_data.
VECTOR_COLUMNS = ["vector_id", "kind", "embedding_bits", "doc_id", "topic", "doc_type"]


def _columns(conn, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_xinfo({table})")]


def _user_tables(conn) -> set[str]:
    """Tables minus SQLite's and the virtual tables' own shadow tables."""
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    shadow = {n for n in names for v in ("documents_fts_", "titles_fts_", "vectors_")
              if n.startswith(v)}
    return names - shadow - {"sqlite_sequence"}


def test_fresh_schema_is_exact(store: KnowledgeStore) -> None:
    conn = store.conn
    assert _user_tables(conn) == USER_TABLES
    for table, columns in COLUMNS.items():
        assert _columns(conn, table) == columns, table
    triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    assert triggers == TRIGGERS
    fts_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'documents_fts'"
                           ).fetchone()[0]
    assert "fts5" in fts_sql and "porter unicode61" in fts_sql
    assert _columns(conn, "documents_fts")[:3] == ["title", "tags", "body"]
    titles_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'titles_fts'"
                              ).fetchone()[0]
    assert "porter" not in titles_sql  # exact (unstemmed) title words
    assert _columns(conn, "titles_fts")[:1] == ["title"]
    # vec0 lists its hidden 'distance' and 'k' columns after the declared ones
    assert _columns(conn, "vectors")[:len(VECTOR_COLUMNS)] == VECTOR_COLUMNS
    vec_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()[0]
    assert "vec0" in vec_sql and "bit[64]" in vec_sql
    assert "kind TEXT PARTITION KEY" in vec_sql
    assert conn.execute("PRAGMA user_version").fetchone()[0] == kbmigrations.SCHEMA_VERSION == 1
    assert schema.get_meta(conn, "embedder") == FakeEmbedder(64).fingerprint()
    from kbstore.search import DEFAULTS

    assert schema.get_meta(conn, "fusion") == DEFAULTS


def test_cli_init_makes_the_same_schema(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kbstore.cli import _register, cli

    _register()
    path = tmp_path / "cli.sqlite"
    result = CliRunner().invoke(cli, ["init", "--db", str(path), "--embedder", "fake",
                                      "--dim", "32"])
    assert result.exit_code == 0, result.output
    conn = kbdb.connect(path)
    try:
        assert _user_tables(conn) == USER_TABLES
        assert "bit[32]" in conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()[0]
    finally:
        conn.close()


def test_migrations_are_idempotent_across_reopen(db_path: Path, embedder: FakeEmbedder) -> None:
    with KnowledgeStore.open(db_path, embedder, hype=False) as s:
        first = s.conn.execute("SELECT id, name, applied_at FROM _sqlite_migrations").fetchall()
    assert [r[1] for r in first] == ["0001_initial"]
    for _ in range(3):
        with KnowledgeStore.open(db_path, embedder, hype=False) as s:
            again = s.conn.execute("SELECT id, name, applied_at FROM _sqlite_migrations"
                                   ).fetchall()
            assert again == first
            assert s.conn.execute("PRAGMA user_version").fetchone()[0] == 1
            assert schema.ensure_schema(s.conn) == []
            assert schema.state(s.conn).pending == []


def test_migration_list_reports_pending_on_an_empty_file(tmp_path: Path) -> None:
    conn = kbdb.connect(tmp_path / "empty.sqlite", load_extension=False)
    try:
        current = schema.state(conn)
        assert current.applied == [] and current.pending == ["0001_initial"]
        assert schema.ensure_schema(conn) == ["0001_initial"]
        assert schema.state(conn).version == 1
    finally:
        conn.close()


def _file_bytes(path: Path) -> bytes:
    return path.read_bytes()


def _checkpointed_copy(store_path: Path) -> None:
    conn = kbdb.connect(store_path, load_extension=False)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


@pytest.mark.parametrize("how", ["migration_row", "user_version"])
def test_future_schema_is_refused_and_untouched(db_path: Path, embedder: FakeEmbedder,
                                                how: str) -> None:
    with KnowledgeStore.open(db_path, embedder, hype=False) as s:
        if how == "migration_row":
            s.conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                           "VALUES ('kbstore', '0002_from_the_future', '2099-01-01')")
        else:
            s.conn.execute("PRAGMA user_version = 99")
    _checkpointed_copy(db_path)
    before = _file_bytes(db_path)
    with pytest.raises(SchemaTooNewError, match="upgrade kbstore"):
        KnowledgeStore.open(db_path, embedder, hype=False)
    # The refused open must not have written anything (no WAL frames either).
    wal = Path(f"{db_path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    assert _file_bytes(db_path) == before


def test_integrity_checks_pass_after_writes(store: KnowledgeStore) -> None:
    store.upsert("projects/a.md", title="Alpha", body="first body", tags=["x", "y"])
    store.upsert("projects/b.md", title="Beta", body="second body", tags=["y"])
    store.upsert("projects/a.md", title="Alpha 2", body="changed body", tags=["z"])
    store.delete("projects/b.md")
    assert store.conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert store.conn.execute("PRAGMA foreign_key_check").fetchall() == []
    # Raises (SQLITE_CORRUPT_VTAB) if the external-content index drifted.
    store.conn.execute("INSERT INTO documents_fts(documents_fts) VALUES('integrity-check')")
    store.conn.execute("INSERT INTO titles_fts(titles_fts) VALUES('integrity-check')")
    assert store.conn.execute("SELECT tag FROM document_tags ORDER BY tag").fetchall() == [("z",)]


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
    tables = _shell(str(db_path), ".tables")
    assert tables.returncode == 0, tables.stderr
    assert {"documents", "documents_fts", "hype_questions", "meta"} <= set(tables.stdout.split())
    rows = _shell(str(db_path), "SELECT path FROM documents ORDER BY path")
    assert rows.returncode == 0 and rows.stdout.split() == ["domains/bread.md",
                                                            "domains/knots.md"]
    fts = _shell(str(db_path), "SELECT rowid FROM documents_fts WHERE documents_fts MATCH "
                 "'bowline'")
    assert fts.returncode == 0 and fts.stdout.strip() == "1"
    # a query vector passed as a JSON array, as the README shows
    query = embedder.embed_queries(["Sailing knots. Tags: sailing. The bowline makes a loop."])[0]
    as_json = "[" + ",".join(f"{x:.6f}" for x in query) + "]"
    knn = _shell(str(db_path), f".load {kbdb.vec_path()}",
                 "SELECT doc_id FROM vectors WHERE embedding_bits MATCH "
                 f"vec_quantize_binary(vec_f32('{as_json}')) AND k = 1 AND kind = 'doc'")
    assert knn.returncode == 0, knn.stderr
    assert knn.stdout.strip() == "1"
    exact = _shell(str(db_path), f".load {kbdb.vec_path()}",
                   "SELECT doc_id FROM vector_data ORDER BY "
                   f"vec_distance_cosine(embedding, vec_f32('{as_json}')) LIMIT 1")
    assert exact.returncode == 0 and exact.stdout.strip() == "1", exact.stderr


def test_legacy_v1_fixture_opens_and_searches(tmp_path: Path) -> None:
    source = FIXTURES / "kb-v1.sqlite"
    # A failure here means a schema change broke files made by released code.
    # Add a new migration step (migrations/0002_*.sql) instead of editing
    # 0001_initial.sql; only before the first release may the fixture be
    # regenerated (tests/fixtures/make_legacy_db.py).
    assert source.exists(), "regenerate with tests/fixtures/make_legacy_db.py"
    copy = tmp_path / "kb-v1.sqlite"
    shutil.copyfile(source, copy)  # never touch the committed file
    with KnowledgeStore.open(copy, hype=False) as s:  # embedder from the stored fingerprint
        assert isinstance(s.embedder, FakeEmbedder) and s.embedder.dim == 64
        assert s.status()["schema_version"] == kbmigrations.SCHEMA_VERSION
        assert s.paths() == ["domains/legacy-bicycle.md", "journal/2025-05-03-legacy-concert.md",
                             "projects/legacy-garden.md"]
        assert s.search("watering tomatoes", limit=1)[0].path == "projects/legacy-garden.md"
        assert s.search("bicycle chain", limit=1)[0].path == "domains/legacy-bicycle.md"
        # a journal note decays with age: search as of its date
        hit = s.search("brass quintet", limit=1, now="2025-05-03T12:00:00")[0]
        assert hit.path == "journal/2025-05-03-legacy-concert.md" and hit.doc_type == "journal"
        # its stored vectors are still usable by a KNN with the same embedder
        qvec = s.embedder.embed_queries(["bicycle chain lubricant"])[0]
        nearest = s.conn.execute(
            "SELECT doc_id FROM vector_data ORDER BY vec_distance_cosine(embedding, ?) LIMIT 1",
            (np.asarray(qvec, np.float32).tobytes(),)).fetchone()[0]
        assert nearest == 2
        assert s.search("bicycle chain lubricant", explain=True)[0].explain["ranks"][
            "vector"] == 1
        # and a v1 file is writable by the current code
        assert s.upsert("domains/new.md", title="New", body="added later") == "added"
        assert s.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

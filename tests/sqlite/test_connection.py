"""The one connection factory (kbstore/backends/sqlite/connection.py):
binding choice (stdlib or the sqlean fallback), the one clear error when
neither can load sqlite-vec, pragmas, file modes, the three open modes."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from kbstore import (
    DatabaseNotFoundError,
    ExtensionLoadError,
    FakeEmbedder,
    KBStoreError,
    KnowledgeStore,
    Settings,
)
from kbstore.backends.sqlite import connection as conn_mod
from kbstore.settings import BINDING_ENV, BUSY_TIMEOUT_ENV


def _vec_version(conn) -> str:  # type: ignore[no-untyped-def]
    return conn.execute("SELECT vec_version()").fetchone()[0]


def test_forced_sqlean_binding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sqlean

    # even if the stdlib could load extensions, the forced choice wins
    monkeypatch.setattr(conn_mod, "_stdlib_can_load_extensions", lambda: True)
    assert conn_mod.binding("sqlean") is sqlean
    monkeypatch.setenv(BINDING_ENV, "sqlean")  # read by Settings, once
    assert Settings.from_env().binding == "sqlean"
    conn = conn_mod.connect(tmp_path / "a.sqlite")
    try:
        assert type(conn).__module__.startswith("sqlean")
        assert _vec_version(conn).startswith("v")
    finally:
        conn.close()


def test_auto_falls_back_to_sqlean_when_stdlib_cannot_load(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlean

    monkeypatch.setattr(conn_mod, "_stdlib_can_load_extensions", lambda: False)
    assert conn_mod.binding() is sqlean
    assert conn_mod.binding("auto") is sqlean


def test_auto_prefers_stdlib_when_it_can_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conn_mod, "_stdlib_can_load_extensions", lambda: True)
    assert conn_mod.binding() is sqlite3
    assert conn_mod.binding("stdlib") is sqlite3


@pytest.mark.skipif(not hasattr(sqlite3.Connection, "enable_load_extension"),
                    reason="this Python's sqlite3 cannot load extensions")
def test_stdlib_path_loads_vec(tmp_path: Path) -> None:  # pragma: no cover - build dependent
    conn = conn_mod.connect(tmp_path / "s.sqlite", settings=Settings(binding="stdlib"))
    try:
        assert isinstance(conn, sqlite3.Connection)
        assert _vec_version(conn).startswith("v")
    finally:
        conn.close()


def test_stdlib_forced_without_load_support_is_a_clear_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(conn_mod, "_stdlib_can_load_extensions", lambda: False)
    with pytest.raises(ExtensionLoadError, match="pip install sqlean.py"):
        conn_mod.binding("stdlib")
    with pytest.raises(ExtensionLoadError, match="pip install sqlean.py"):
        conn_mod.connect(tmp_path / "s.sqlite", settings=Settings(binding="stdlib"))
    assert not (tmp_path / "s.sqlite").exists()


def test_no_binding_can_load_names_the_fix(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setattr(conn_mod, "_stdlib_can_load_extensions", lambda: False)
    monkeypatch.setattr(conn_mod, "_sqlean", lambda: None)
    with pytest.raises(ExtensionLoadError, match=r"pip install sqlean\.py"):
        conn_mod.connect(tmp_path / "x.sqlite")
    with pytest.raises(ExtensionLoadError, match=r"pip install sqlean\.py"):
        KnowledgeStore.open(tmp_path / "y.sqlite", FakeEmbedder(8), hype=False)


def test_unknown_binding_name_is_refused(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    with pytest.raises(ExtensionLoadError, match="expected 'auto', 'stdlib' or 'sqlean'"):
        conn_mod.binding("pysqlite3")
    monkeypatch.setenv(BINDING_ENV, "pysqlite3")
    with pytest.raises(ExtensionLoadError, match="expected 'auto', 'stdlib' or 'sqlean'"):
        conn_mod.connect(tmp_path / "x.sqlite")


def test_failing_extension_load_is_wrapped(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setattr(conn_mod, "vec_path", lambda: str(tmp_path / "missing" / "vec0"))
    with pytest.raises(ExtensionLoadError, match="could not load sqlite-vec"):
        conn_mod.connect(tmp_path / "z.sqlite")


def test_pragmas(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "2500")
    conn = conn_mod.connect(tmp_path / "p.sqlite")
    try:
        # A connection switches to WAL only once the file is known to be ours.
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        conn_mod.enable_writes(conn)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
        # the WAL is truncated back to this size after a checkpoint (issue 10)
        assert conn.execute("PRAGMA journal_size_limit").fetchone()[0] == \
            Settings().journal_size_limit
        # the ranking SQL needs math functions, natively or registered
        assert conn.execute("SELECT round(exp(ln(2.0)), 6)").fetchone()[0] == 2.0
        assert conn.isolation_level is None  # autocommit; writers use transaction()
    finally:
        conn.close()


def test_busy_timeout_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    conn = conn_mod.connect(tmp_path / "d.sqlite")
    try:
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == \
            Settings().busy_timeout_ms == 10_000
    finally:
        conn.close()
    for bad in ("soon", "-5"):
        monkeypatch.setenv(BUSY_TIMEOUT_ENV, bad)
        with pytest.raises(KBStoreError, match=BUSY_TIMEOUT_ENV):
            Settings.from_env()


def test_new_database_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    conn = conn_mod.connect(path)
    try:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        wal = Path(f"{path}-wal")
        if wal.exists():
            assert stat.S_IMODE(wal.stat().st_mode) & 0o077 == 0
    finally:
        conn.close()


def test_a_missing_folder_is_an_error_not_created(tmp_path: Path) -> None:
    """A mistyped --db used to create the file and its parent folders."""
    path = tmp_path / "nested" / "dir" / "kb.sqlite"
    with pytest.raises(DatabaseNotFoundError, match="does not exist"):
        conn_mod.connect(path)
    assert not (tmp_path / "nested").exists()


@pytest.mark.parametrize("mode", ["read", "write"])
def test_read_and_write_modes_never_create_a_file(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "kb.sqlite"
    with pytest.raises(DatabaseNotFoundError, match="no database at"):
        conn_mod.connect(path, mode=mode)
    assert not path.exists()
    with pytest.raises(ValueError, match="mode"):
        conn_mod.connect(path, mode="append")


def test_a_folder_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(KBStoreError, match="is a folder"):
        conn_mod.connect(tmp_path)


def test_existing_file_mode_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    path.touch(mode=0o644)
    path.chmod(0o644)
    conn_mod.connect(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_transaction_commits_and_rolls_back(tmp_path: Path) -> None:
    conn = conn_mod.connect(tmp_path / "t.sqlite", load_extension=False)
    try:
        conn.execute("CREATE TABLE t (x INTEGER)")
        with conn_mod.transaction(conn):
            conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(RuntimeError), conn_mod.transaction(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            raise RuntimeError("boom")
        assert not conn.in_transaction
        with conn_mod.transaction(conn):  # nested use joins the outer transaction
            with conn_mod.transaction(conn):
                conn.execute("INSERT INTO t VALUES (3)")
            assert conn.in_transaction
        assert conn.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (3,)]
    finally:
        conn.close()


def test_a_failing_commit_rolls_back(tmp_path: Path) -> None:
    """Deferred foreign keys fail at COMMIT: the transaction must not stay open."""
    conn = conn_mod.connect(tmp_path / "c.sqlite", load_extension=False)
    try:
        conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        conn.execute("CREATE TABLE child (pid INTEGER REFERENCES parent (id) "
                     "DEFERRABLE INITIALLY DEFERRED)")
        with pytest.raises(Exception, match="FOREIGN KEY"), conn_mod.transaction(conn):
            conn.execute("INSERT INTO child VALUES (42)")
        assert not conn.in_transaction
        assert conn.execute("SELECT count(*) FROM child").fetchone()[0] == 0
    finally:
        conn.close()


def test_vec_path_points_at_the_loadable_file() -> None:
    path = Path(conn_mod.vec_path())
    candidates = [path, *(path.with_name(path.name + ext) for ext in (".so", ".dylib", ".dll"))]
    assert any(p.is_file() for p in candidates)


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("plain text, not SQLite\n" * 100)
    for mode in ("create", "write", "read"):
        with pytest.raises(KBStoreError, match="is not a SQLite database"):
            conn_mod.connect(path, mode=mode)
    assert path.read_text().startswith("plain text")


def _prepares_on_a_repeated_search(store: KnowledgeStore) -> int:
    """SQLite calls the authorizer while it prepares a statement, never while
    it runs one: the calls during a repeated search count its re-prepares.
    Counted at the third search: the second reads the in-memory copy of the
    sign bits (its own few small statements, prepared once)."""
    calls = [0]

    def authorizer(*_: object) -> int:
        calls[0] += 1
        return 0  # SQLITE_OK

    conn = store.backend.conn  # type: ignore[attr-defined]
    conn.set_authorizer(authorizer)
    try:
        for _ in range(2):
            assert store.search("deploy notes", limit=5)
        calls[0] = 0
        assert store.search("deploy notes", limit=5)
        return calls[0]
    finally:
        conn.set_authorizer(None)


def test_a_store_that_migrated_its_file_prepares_the_search_once(tmp_path: Path) -> None:
    # The connection that applied the migrations re-prepared the ~500-line
    # search statement at every search (50-100 ms each); the store searches
    # on a new connection once the file is migrated.
    with KnowledgeStore.open(tmp_path / "new.sqlite", FakeEmbedder(16), hype=False) as store:
        store.upsert("notes/deploy.md", title="Deploy notes", body="how we deploy", tags=["ops"])
        assert _prepares_on_a_repeated_search(store) == 0



def test_the_first_search_compiles_its_statement_before_it_embeds_the_query(
        tmp_path: Path) -> None:
    # Compiling the search statement takes ~70 MB of transient planner memory;
    # compiled before the embedding model loads, the model reuses it (a first
    # `kbstore search` peaked at ~165 MB with the model loaded first).
    prepares_while_embedding: list[int] = []
    prepares = [0]

    class RecordingEmbedder(FakeEmbedder):
        def embed_queries(self, texts: list[str]) -> Any:
            prepares_while_embedding.append(prepares[0])
            return super().embed_queries(texts)

    path = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(path, FakeEmbedder(16), hype=False) as store:
        store.upsert("notes/deploy.md", title="Deploy notes", body="how we deploy", tags=["ops"])
    with KnowledgeStore.open(path, RecordingEmbedder(16), hype=False) as store:
        conn = store.backend.conn  # type: ignore[attr-defined]

        def authorizer(*_: object) -> int:
            prepares[0] += 1
            return 0  # SQLITE_OK

        conn.set_authorizer(authorizer)
        try:
            assert store.search("deploy notes", limit=5)[0].path == "notes/deploy.md"
            compiled_before_embedding = prepares_while_embedding[0]
            during = prepares[0]
        finally:
            conn.set_authorizer(None)
    # the search statement was compiled before
    # the query was embedded, and not compiled again for the real search
    # (tens of thousands of authorizer calls; a few small reads come after)
    assert compiled_before_embedding > 1000
    assert during - compiled_before_embedding < compiled_before_embedding / 10

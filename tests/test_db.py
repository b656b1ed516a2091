"""The connection factory: binding choice (stdlib or the sqlean fallback),
the one clear error when neither can load sqlite-vec, pragmas, file mode."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from kbstore import ExtensionLoadError
from kbstore import db as kbdb


def _vec_version(conn) -> str:
    return conn.execute("SELECT vec_version()").fetchone()[0]


def test_forced_sqlean_binding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sqlean

    monkeypatch.setenv(kbdb.BINDING_ENV, "sqlean")
    # even if the stdlib could load extensions, the forced choice wins
    monkeypatch.setattr(kbdb, "_stdlib_can_load_extensions", lambda: True)
    assert kbdb.binding() is sqlean
    conn = kbdb.connect(tmp_path / "a.sqlite")
    try:
        assert type(conn).__module__.startswith("sqlean")
        assert _vec_version(conn).startswith("v")
    finally:
        conn.close()


def test_auto_falls_back_to_sqlean_when_stdlib_cannot_load(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlean

    monkeypatch.setattr(kbdb, "_stdlib_can_load_extensions", lambda: False)
    assert kbdb.binding() is sqlean
    assert kbdb.binding("auto") is sqlean


def test_auto_prefers_stdlib_when_it_can_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kbdb, "_stdlib_can_load_extensions", lambda: True)
    assert kbdb.binding() is sqlite3
    assert kbdb.binding("stdlib") is sqlite3


@pytest.mark.skipif(not hasattr(sqlite3.Connection, "enable_load_extension"),
                    reason="this Python's sqlite3 cannot load extensions")
def test_stdlib_path_loads_vec(tmp_path: Path) -> None:  # pragma: no cover - build dependent
    conn = kbdb.connect(tmp_path / "s.sqlite", binding_name="stdlib")
    try:
        assert isinstance(conn, sqlite3.Connection)
        assert _vec_version(conn).startswith("v")
    finally:
        conn.close()


def test_stdlib_forced_without_load_support_is_a_clear_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kbdb, "_stdlib_can_load_extensions", lambda: False)
    with pytest.raises(ExtensionLoadError, match="pip install sqlean.py"):
        kbdb.binding("stdlib")


def test_no_binding_can_load_names_the_fix(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setattr(kbdb, "_stdlib_can_load_extensions", lambda: False)
    monkeypatch.setattr(kbdb, "_sqlean", lambda: None)
    with pytest.raises(ExtensionLoadError, match=r"pip install sqlean\.py"):
        kbdb.connect(tmp_path / "x.sqlite")
    with pytest.raises(ExtensionLoadError, match=r"pip install sqlean\.py"):
        from kbstore import FakeEmbedder, KnowledgeStore

        KnowledgeStore.open(tmp_path / "y.sqlite", FakeEmbedder(8), hype=False)


def test_unknown_binding_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kbdb.BINDING_ENV, "pysqlite3")
    with pytest.raises(ExtensionLoadError, match="expected 'auto', 'stdlib' or 'sqlean'"):
        kbdb.binding()


def test_failing_extension_load_is_wrapped(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setattr(kbdb, "vec_path", lambda: str(tmp_path / "missing" / "vec0"))
    with pytest.raises(ExtensionLoadError, match="could not load sqlite-vec"):
        kbdb.connect(tmp_path / "z.sqlite")


def test_pragmas(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(kbdb.BUSY_TIMEOUT_ENV, "2500")
    conn = kbdb.connect(tmp_path / "p.sqlite")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
        # the ranking SQL needs math functions, natively or registered
        assert conn.execute("SELECT round(exp(ln(2.0)), 6)").fetchone()[0] == 2.0
        assert conn.isolation_level is None  # autocommit; writers use transaction()
    finally:
        conn.close()


def test_default_busy_timeout(tmp_path: Path) -> None:
    conn = kbdb.connect(tmp_path / "d.sqlite")
    try:
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == kbdb.DEFAULT_BUSY_TIMEOUT_MS
    finally:
        conn.close()


def test_new_database_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "kb.sqlite"
    conn = kbdb.connect(path)
    try:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        wal = Path(f"{path}-wal")
        if wal.exists():
            assert stat.S_IMODE(wal.stat().st_mode) & 0o077 == 0
    finally:
        conn.close()


def test_existing_file_mode_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    path.touch(mode=0o644)
    path.chmod(0o644)
    kbdb.connect(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_transaction_commits_and_rolls_back(tmp_path: Path) -> None:
    conn = kbdb.connect(tmp_path / "t.sqlite", load_extension=False)
    try:
        conn.execute("CREATE TABLE t (x INTEGER)")
        with kbdb.transaction(conn):
            conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(RuntimeError), kbdb.transaction(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            raise RuntimeError("boom")
        assert not conn.in_transaction
        assert conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    finally:
        conn.close()


def test_vec_path_points_at_the_loadable_file() -> None:
    path = Path(kbdb.vec_path())
    candidates = [path, *(path.with_name(path.name + ext) for ext in (".so", ".dylib", ".dll"))]
    assert any(p.is_file() for p in candidates)


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    from kbstore import KBStoreError

    path = tmp_path / "notes.txt"
    path.write_text("plain text, not SQLite\n" * 100)
    with pytest.raises(KBStoreError, match="is not a SQLite database"):
        kbdb.connect(path)
    assert path.read_text().startswith("plain text")

"""The one place that opens a kbstore database.

Python's stdlib ``sqlite3`` is used when it can load extensions; many builds
(pyenv's default among them) cannot, so ``sqlean.py`` -- a drop-in binding
that bundles a recent SQLite -- is the fallback. Either way sqlite-vec is
loaded, and the connection is set up for a daemon and a CLI sharing one file:
WAL, a busy timeout, foreign keys, synchronous=NORMAL.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import sqlite3 as _stdlib_sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import ExtensionLoadError, KBStoreError

BINDING_ENV = "KBSTORE_SQLITE_BINDING"  # "auto" (default), "stdlib" or "sqlean"
BUSY_TIMEOUT_ENV = "KBSTORE_BUSY_TIMEOUT_MS"
DEFAULT_BUSY_TIMEOUT_MS = 10_000

Connection = Any  # sqlite3.Connection or sqlean.Connection: same API


def _stdlib_can_load_extensions() -> bool:
    return hasattr(_stdlib_sqlite3.Connection, "enable_load_extension")


def _sqlean() -> ModuleType | None:
    try:
        import sqlean  # type: ignore[import-untyped]
    except ImportError:
        return None
    return sqlean


def binding(name: str | None = None) -> ModuleType:
    """The DB-API module to use: stdlib sqlite3 when it can load extensions,
    else sqlean. ``name`` (or env KBSTORE_SQLITE_BINDING) forces one."""
    choice = (name or os.environ.get(BINDING_ENV) or "auto").lower()
    if choice not in ("auto", "stdlib", "sqlean"):
        raise ExtensionLoadError(
            f"{BINDING_ENV}={choice!r}: expected 'auto', 'stdlib' or 'sqlean'"
        )
    if choice in ("auto", "stdlib") and _stdlib_can_load_extensions():
        return _stdlib_sqlite3
    if choice in ("auto", "sqlean"):
        module = _sqlean()
        if module is not None:
            return module
    raise ExtensionLoadError(
        "this Python's sqlite3 cannot load extensions and the fallback binding is "
        "missing: run `pip install sqlean.py` (or use a Python built with "
        "--enable-loadable-sqlite-extensions)"
    )


def vec_path() -> str:
    """The sqlite-vec loadable file (without its suffix, as SQLite wants it),
    for `.load` in the sqlite3 shell.

    Found without importing ``sqlite_vec``: its module imports numpy, which
    would cost a search-only process ~0.1 s of start-up for nothing.
    """
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.origin:
        raise ExtensionLoadError("sqlite-vec is not installed: pip install sqlite-vec")
    return os.path.join(os.path.dirname(spec.origin), "vec0")


def load_vec(conn: Connection) -> None:
    """Load sqlite-vec into ``conn``, enabling extension loading only meanwhile."""
    try:
        conn.enable_load_extension(True)
        try:
            conn.load_extension(vec_path())
        finally:
            conn.enable_load_extension(False)
    except ExtensionLoadError:
        raise
    except Exception as exc:  # the binding's OperationalError or AttributeError
        raise ExtensionLoadError(
            f"could not load sqlite-vec ({exc}); reinstall it with `pip install "
            "--force-reinstall sqlite-vec` or set KBSTORE_SQLITE_BINDING=sqlean"
        ) from exc


def _ensure_private_file(path: Path) -> None:
    # A knowledge base is private memory: create the file owner-only before
    # SQLite does (it would use the umask); -wal/-shm copy these permissions.
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def _ensure_math(conn: Connection) -> None:
    # The ranking SQL uses exp()/ln(); some SQLite builds omit math functions.
    try:
        conn.execute("SELECT exp(0.0), ln(2.0)").fetchone()
    except Exception:
        conn.create_function("exp", 1, math.exp, deterministic=True)
        conn.create_function("ln", 1, math.log, deterministic=True)


def connect(
    path: str | os.PathLike[str],
    *,
    binding_name: str | None = None,
    load_extension: bool = True,
) -> Connection:
    """Open (creating if needed) a kbstore database file.

    The connection is in autocommit mode (``isolation_level=None``); writers
    use :func:`transaction` so every batch is one explicit transaction.
    """
    module = binding(binding_name)
    db_path = Path(path)
    if str(path) != ":memory:":
        _ensure_private_file(db_path)
    timeout_ms = int(os.environ.get(BUSY_TIMEOUT_ENV, DEFAULT_BUSY_TIMEOUT_MS))
    conn = module.connect(
        str(db_path), timeout=timeout_ms / 1000, isolation_level=None, check_same_thread=False
    )
    try:
        if load_extension:
            load_vec(conn)
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
        _retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = NORMAL")
        _ensure_math(conn)
    except module.DatabaseError as exc:
        conn.close()
        if "not a database" in str(exc):  # e.g. --db pointed at a text file
            raise KBStoreError(f"{path} is not a SQLite database ({exc})") from exc
        raise
    except BaseException:
        conn.close()
        raise
    return conn


def _is_busy(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _retry_busy(fn: Any, attempts: int = 50, delay: float = 0.05) -> Any:
    """Run ``fn`` again while SQLite reports busy/locked beyond busy_timeout
    (e.g. the WAL switch or a BEGIN IMMEDIATE racing a checkpoint)."""
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:
            if not _is_busy(exc) or attempt == attempts - 1:
                raise
            time.sleep(delay * (1 + attempt % 5))
    raise AssertionError("unreachable")


@contextlib.contextmanager
def transaction(conn: Connection) -> Iterator[Connection]:
    """One write transaction (BEGIN IMMEDIATE): commit on success, roll back
    on any exception. Writers serialize here instead of failing mid-way."""
    _retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
    try:
        yield conn
        _retry_busy(lambda: conn.execute("COMMIT"))
    except BaseException:
        # Also when COMMIT itself fails (disk full, I/O error): never leave
        # the connection inside a half-done transaction.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise

"""The one place that opens a SQLite knowledge-base file.

Python's stdlib ``sqlite3`` is used when it can load extensions; many builds
(pyenv's default among them) cannot, so ``sqlean.py`` -- a drop-in binding
that bundles a recent SQLite -- is the fallback. Either way sqlite-vec is
loaded and the connection is set up for several processes sharing one file:
WAL, a busy timeout, foreign keys, synchronous=NORMAL, a WAL size limit.

Three modes: ``create`` may create the file; ``write`` needs an existing
one; ``read`` never creates, converts (to WAL) or modifies the file: it is
opened without the create flag and with ``query_only``, falling back to a
read-only (then immutable) open when the file or its folder is not writable.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import sqlite3 as _stdlib_sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from ...errors import (
    DatabaseNotFoundError,
    ExtensionLoadError,
    KBStoreError,
    WriteLockTimeoutError,
)
from ...settings import BINDING_ENV, BUSY_TIMEOUT_ENV, Settings
from ...waiting import notice_if_waiting

Connection = Any  # sqlite3.Connection or sqlean.Connection: same API
MMAP_BYTES = 256 * 2**20  # address space only; pages are read as touched
MODES = ("read", "write", "create")
# A batch of at least BULK_CHANGES changes commits with the WAL allowed to
# grow to BULK_WAL_PAGES before it is checkpointed (SQLite's default, 1000
# pages, checkpointed -- copied back and fsynced -- every few batches of an
# import: 0.4 of 0.5 ms per document at commit). Durability is unchanged:
# each batch is still one committed transaction in the WAL.
BULK_CHANGES = 32
BULK_WAL_PAGES = 16384
DEFAULT_WAL_PAGES = 1000
# ... and with a page cache that holds a transaction's dirty pages: a write
# transaction of several batches (kbstore/writer.py, up to 512 documents with
# 7 vectors each: ~8 MB of new pages) outgrows SQLite's default 2 MB cache,
# which then spills pages to the WAL mid-transaction and reads them back.
# KiB, as a negative cache_size; restored after the batch, so it is held
# only while a bulk write runs.
BULK_CACHE_KIB = 32 * 1024
T = TypeVar("T")


def _stdlib_can_load_extensions() -> bool:
    return hasattr(_stdlib_sqlite3.Connection, "enable_load_extension")


def _sqlean() -> ModuleType | None:
    try:
        import sqlean  # type: ignore[import-untyped]
    except ImportError:
        return None
    return sqlean


def binding(name: str = "auto") -> ModuleType:
    """The DB-API module to use: stdlib sqlite3 when it can load extensions,
    else sqlean; ``name`` 'stdlib' or 'sqlean' forces one."""
    choice = (name or "auto").lower()
    if choice not in ("auto", "stdlib", "sqlean"):
        raise ExtensionLoadError(f"{BINDING_ENV}={choice!r}: expected 'auto', 'stdlib' or "
                                 "'sqlean'")
    if choice in ("auto", "stdlib") and _stdlib_can_load_extensions():
        return _stdlib_sqlite3
    if choice in ("auto", "sqlean"):
        module = _sqlean()
        if module is not None:
            return module
    raise ExtensionLoadError(
        "this Python's sqlite3 cannot load extensions and the fallback binding is "
        "missing: run `pip install sqlean.py` (or use a Python built with "
        "--enable-loadable-sqlite-extensions)")


def database_errors() -> tuple[type[BaseException], ...]:
    """DB-API errors of both bindings ('file is not a database', locked ...)."""
    errors: list[type[BaseException]] = [_stdlib_sqlite3.Error]
    module = _sqlean()
    if module is not None:
        errors.append(module.Error)
    return tuple(errors)


def vec_path() -> str:
    """The sqlite-vec loadable file (without its suffix, as SQLite wants it),
    for `.load` in the sqlite3 shell. Found without importing ``sqlite_vec``,
    whose module imports numpy (start-up time for nothing)."""
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
            f"--force-reinstall sqlite-vec` or set {BINDING_ENV}=sqlean") from exc


def _create_private_file(path: Path) -> None:
    # A knowledge base is private memory: create the file owner-only before
    # SQLite does (it would use the umask); -wal/-shm copy these permissions.
    if not path.parent.is_dir():
        raise DatabaseNotFoundError(f"folder {path.parent} does not exist; create it first")
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def _ensure_math(conn: Connection) -> None:
    # The ranking SQL uses exp()/ln(); some SQLite builds omit math functions.
    try:
        conn.execute("SELECT exp(0.0), ln(2.0)").fetchone()
    except Exception:
        conn.create_function("exp", 1, math.exp, deterministic=True)
        conn.create_function("ln", 1, math.log, deterministic=True)


def _uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{urllib.parse.quote(str(path.absolute()))}?{query}"


def _open_read(module: ModuleType, path: Path, timeout: float) -> tuple[Connection, bool]:
    """(connection, writable=False). Tries a normal open with query_only (no
    -wal/-shm left behind on close), then read-only, then immutable (a file
    in a folder nobody can write: SQLite cannot create its -shm there)."""
    last: Exception | None = None
    for params in ({"mode": "rw"}, {"mode": "ro"}, {"mode": "ro", "immutable": "1"}):
        try:
            conn = module.connect(_uri(path, **params), uri=True, timeout=timeout,
                                  isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA query_only = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn, False
        except module.DatabaseError as exc:
            last = exc
            if "not a database" in str(exc):
                raise
            with contextlib.suppress(Exception):
                conn.close()
    raise KBStoreError(f"cannot open {path} for reading: {last}")


def connect(path: str | os.PathLike[str], *, mode: str = "create",
            settings: Settings | None = None, load_extension: bool = True) -> Connection:
    """Open a kbstore database file in ``mode`` (see the module docstring).

    The connection is in autocommit mode (``isolation_level=None``); writers
    use :func:`transaction` so every batch is one explicit transaction.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    settings = settings or Settings.from_env()
    module = binding(settings.binding)
    db_path = Path(path).expanduser()
    if db_path.is_dir():
        raise KBStoreError(f"{db_path} is a folder, not a database file")
    if not db_path.exists():
        if mode != "create":
            raise DatabaseNotFoundError(f"no database at {db_path}; create it with "
                                        "`kbstore init` (or `kbstore import`)")
        _create_private_file(db_path)
    timeout = settings.busy_timeout_ms / 1000
    try:
        if mode == "read":
            conn, _ = _open_read(module, db_path, timeout)
        else:
            conn = module.connect(str(db_path), timeout=timeout, isolation_level=None,
                                  check_same_thread=False)
    except module.DatabaseError as exc:
        raise _friendly(exc, db_path) from exc
    try:
        if load_extension:
            load_vec(conn)
        conn.execute(f"PRAGMA busy_timeout = {int(settings.busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        # Searches read float32 vectors (exact scans, rescoring): through a
        # memory map rather than read() into the 2 MB page cache, those reads
        # measured 2.5-8x faster (benchmarks/results/speed_real.md).
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # 'not a database'?
        _ensure_math(conn)
    except module.DatabaseError as exc:
        conn.close()
        raise _friendly(exc, db_path) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def close_failed_open(conn: Connection, path: Path, made_here: bool) -> None:
    """Close the connection of an open that failed (an error, a Ctrl-C). When
    this process created the file and no schema was committed to it, the file
    and its -wal/-shm are removed too, so no schema-less file is left where a
    store was asked for. A file that was there before, or that holds anything
    (a store another process committed meanwhile), or whose state cannot be
    read, is kept."""
    empty = False
    if made_here:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            empty = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        except Exception:
            empty = False
    conn.close()
    for suffix in ("", "-wal", "-shm") if empty else ():
        with contextlib.suppress(OSError):
            os.unlink(f"{path}{suffix}")


def enable_writes(conn: Connection, settings: Settings | None = None) -> None:
    """Set a writable connection up for several processes sharing the file:
    WAL, a bounded WAL file, synchronous=NORMAL. Called only once the file is
    known to be a kbstore database (a foreign file is never converted)."""
    settings = settings or Settings.from_env()
    retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
    conn.execute(f"PRAGMA journal_size_limit = {int(settings.journal_size_limit)}")
    conn.execute("PRAGMA synchronous = NORMAL")


def _friendly(exc: Exception, path: Path) -> BaseException:
    text = str(exc)
    if "not a database" in text:  # e.g. --db pointed at a text file
        return KBStoreError(f"{path} is not a SQLite database ({text})")
    if "readonly" in text or "read-only" in text or "unable to open database file" in text:
        return write_refused(exc, path)
    return exc


def write_refused(exc: BaseException, path: Path) -> BaseException:
    """A writer that SQLite could not open or write (a read-only file, a
    folder where it cannot create -wal/-shm/-journal) as one error naming
    which, rather than SQLite's 'unable to open database file'."""
    text = str(exc)
    if not ("readonly" in text or "read-only" in text or "unable to open database file" in text):
        return exc
    if not os.access(path, os.W_OK):
        why = "the file is read-only"
    elif not os.access(path.parent, os.W_OK):
        why = (f"its folder {path.parent} is read-only (SQLite writes {path.name}-wal, "
               f"-shm or -journal beside the file)")
    else:
        why = f"SQLite could not write it or its {path.name}-wal / -shm files ({text})"
    return KBStoreError(f"{path} cannot be written here: {why}; only read commands "
                        "(search, status, doctor, export) can use it")


# A BEGIN IMMEDIATE is retried for at least this long whatever the busy timeout.
MIN_RETRY_S = 1.0


def is_busy(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def retry_busy(fn: Callable[[], T], attempts: int = 50, delay: float = 0.05,
               within: float | None = None) -> T:
    """Run ``fn`` again while SQLite reports busy/locked beyond busy_timeout
    (e.g. the WAL switch or a BEGIN IMMEDIATE racing a checkpoint), for at
    most ``within`` seconds in all when given: each attempt may itself wait
    the whole busy_timeout."""
    started = time.monotonic()
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:
            if not is_busy(exc) or attempt == attempts - 1 or (
                    within is not None and time.monotonic() - started >= within):
                raise
            time.sleep(delay * (1 + attempt % 5))
    raise AssertionError("unreachable")


def _file_of(conn: Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row and row[2] else "the database"


@contextlib.contextmanager
def transaction(conn: Connection) -> Iterator[Connection]:
    """One write transaction (BEGIN IMMEDIATE): commit on success, roll back
    on any exception. Writers serialize here instead of failing mid-way.
    Nested use joins the outer transaction."""
    if conn.in_transaction:
        yield conn
        return
    where = _file_of(conn)
    timeout_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    with notice_if_waiting(where):
        try:  # the retries catch busy answers SQLite gives without waiting
            retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"),
                       within=max(timeout_ms / 1000, MIN_RETRY_S))
        except Exception as exc:
            if not is_busy(exc):
                raise
            raise WriteLockTimeoutError(
                f"{where} stayed locked by another writer for over {timeout_ms / 1000:g} s "
                f"({BUSY_TIMEOUT_ENV}={timeout_ms}); this change was not written: run the same "
                f"command again when the other process is done, or raise {BUSY_TIMEOUT_ENV}"
            ) from exc
    try:
        yield conn
        retry_busy(lambda: conn.execute("COMMIT"))
    except BaseException:
        # Also when COMMIT itself fails (disk full, I/O error): never leave
        # the connection inside a half-done transaction.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


@contextlib.contextmanager
def bulk_writes(conn: Connection, bulk: bool) -> Iterator[None]:
    """A large batch: checkpoint the WAL less often while it commits, with a
    page cache that holds its pages."""
    if not bulk:
        yield
        return
    cache = int(conn.execute("PRAGMA cache_size").fetchone()[0])
    conn.execute(f"PRAGMA wal_autocheckpoint = {BULK_WAL_PAGES}")
    conn.execute(f"PRAGMA cache_size = {-BULK_CACHE_KIB}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA wal_autocheckpoint = {DEFAULT_WAL_PAGES}")
        conn.execute(f"PRAGMA cache_size = {cache}")


@contextlib.contextmanager
def snapshot(conn: Connection) -> Iterator[Connection]:
    """One read snapshot (a deferred transaction) for several queries."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")

"""The one place that opens a PostgreSQL knowledge base.

A location is a libpq URL; ``?kb=<name>`` selects the knowledge base (schema
``kbstore_<name>``, default ``default``) and is removed before connecting.
The location kbstore shows (messages, ``status``, logs) is the URL without
its password. Connections run in autocommit mode: every write is an explicit
transaction (:func:`write_transaction`), every read one statement (or one
repeatable-read snapshot). Read-only opens set
``default_transaction_read_only``, so the server itself refuses any write.

Locks (transaction-scoped advisory locks, released at commit or rollback):

- the knowledge base lock: ``apply`` and ``rebuild_stage`` take it SHARED,
  ``write_lock``, the start and end of a rebuild, ``initialize`` and doctor
  repairs take it EXCLUSIVE;
- one lock per document path, taken after the shared lock in key order (so
  two writers never wait for each other in a cycle), then the stored state
  is re-read: READ COMMITTED gives each statement a fresh snapshot, so the
  re-read sees whatever the previous holder committed.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ...errors import DatabaseNotFoundError, KBStoreError
from ...redact import redact
from ...settings import Settings
from ...waiting import notice_if_waiting
from . import migrate as _migrate
from .query import SESSION_SETTINGS

DEFAULT_KB = "default"
KB_PARAM = "kb"
APPLICATION_NAME = "kbstore"
# Advisory-lock key spaces: the knowledge base lock uses the two-integer form
# (class KB_LOCK_CLASS, object = a hash of the schema name), path locks the
# one-bigint form; PostgreSQL keeps the two forms apart.
KB_LOCK_CLASS = 0x6B62  # "kb"


@dataclass(frozen=True)
class Target:
    """Where a knowledge base lives."""

    conninfo: str   # what psycopg connects with (password kept, ``kb`` removed)
    location: str   # what kbstore shows: the URL without its password
    kb: str
    schema: str


def _without(query: str, names: set[str]) -> str:
    """The query string minus the ``names`` parameters, otherwise as written."""
    kept = [part for part in query.split("&") if part and part.split("=", 1)[0] not in names]
    return "&".join(kept)


def parse(url: str) -> Target:
    """Split a ``postgresql://`` location into what to connect to and which
    knowledge base; the password never reaches ``location``."""
    parts = urlsplit(url)
    names = [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k == KB_PARAM]
    if len(names) > 1:
        raise KBStoreError(f"{KB_PARAM}= appears more than once in the location")
    kb = names[0] if names else DEFAULT_KB
    try:
        schema = _migrate.schema_for(kb)
    except ValueError as exc:
        raise KBStoreError(f"knowledge base name (?{KB_PARAM}=): {exc}") from None
    conninfo = urlunsplit(parts._replace(query=_without(parts.query, {KB_PARAM})))
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = f"{userinfo.split(':', 1)[0]}@{host}"
    location = urlunsplit(parts._replace(netloc=netloc,
                                         query=_without(parts.query, {"password"})))
    return Target(conninfo=conninfo, location=location, kb=kb, schema=schema)


def _friendly(exc: Exception, target: Target) -> Exception:
    text = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    if "does not exist" in text and "database" in text:
        return DatabaseNotFoundError(f"no database at {target.location} ({text})")
    return KBStoreError(f"cannot connect to {target.location}: {text}")


def connect(target: Target, *, read_only: bool, settings: Settings | None = None) -> Any:
    """A connection with the session settings every kbstore statement
    expects; search_path is set later, once the knowledge base is known to
    exist (:func:`use_knowledge_base`)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    settings = settings or Settings.from_env()
    params: dict[str, Any] = dict(conninfo_to_dict(target.conninfo))
    options = [str(params.get("options") or "")]
    if read_only:
        options.append("-c default_transaction_read_only=on")
    params["options"] = " ".join(o for o in options if o)
    params.setdefault("application_name", APPLICATION_NAME)
    try:
        conn = psycopg.connect(autocommit=True, **params)
    except psycopg.Error as exc:
        raise _friendly(exc, target) from None
    try:
        settings_sql = dict(SESSION_SETTINGS)
        # A writer waits this long for a lock another writer holds (SQLite's
        # busy timeout), then fails instead of hanging.
        settings_sql["lock_timeout"] = f"{int(settings.busy_timeout_ms)}ms"
        for key, value in settings_sql.items():
            conn.execute("SELECT set_config(%s, %s, false)", (key, value))
    except BaseException:
        conn.close()
        raise
    return conn


def schema_exists(conn: Any, schema: str) -> bool:
    return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s)",
                             (schema,)).fetchone()[0])


def use_knowledge_base(conn: Any, schema: str) -> None:
    """search_path = the knowledge base, then pgvector's schema; vector
    values travel as numpy arrays in binary (pgvector's adapters)."""
    _migrate.use_schema(conn, schema, local=False)
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo

    register_vector_info(conn, TypeInfo.fetch(conn, "vector"))


# -- transactions and locks ---------------------------------------------------------


def _kb_key(schema: str) -> int:
    return int.from_bytes(hashlib.blake2b(schema.encode(), digest_size=4).digest(), "big",
                          signed=True)


def path_keys(schema: str, paths: Sequence[str]) -> list[int]:
    """One signed 64-bit advisory-lock key per distinct path, sorted."""
    keys = {int.from_bytes(hashlib.blake2b(f"{schema}\x00{p}".encode(), digest_size=8).digest(),
                           "big", signed=True) for p in paths}
    return sorted(keys)


def lock_kb(conn: Any, schema: str, *, exclusive: bool) -> None:
    fn = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    conn.execute(f"SELECT {fn}(%s, %s)", (KB_LOCK_CLASS, _kb_key(schema)))


def lock_paths(conn: Any, schema: str, paths: Sequence[str]) -> None:
    """Per-path locks in key order (unnest returns the array in order, and
    the locks are taken row by row as it does)."""
    keys = path_keys(schema, paths)
    if keys:
        conn.execute("SELECT count(pg_advisory_xact_lock(k)) FROM unnest(%s::bigint[]) AS k",
                     (keys,))


# A reembed holds this session-level lock (class KB_LOCK_CLASS + 1) from its
# first staging round to its swap or abort: its staged vectors belong to a
# live process, which doctor must not discard. A killed process's session
# ends, and the lock with it.
REBUILD_LOCK_CLASS = KB_LOCK_CLASS + 1
_REBUILD_HOLDERS = ("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND database = (SELECT oid FROM pg_database "
                    "WHERE datname = current_database()) "
                    "AND classid = %s::bigint::oid AND objid = (%s::bigint & 4294967295)::oid "
                    "AND objsubid = 2")


def rebuild_holders(conn: Any, schema: str) -> list[int]:
    """Backend pids of the sessions running a reembed of ``schema``."""
    return [int(r[0]) for r in conn.execute(
        _REBUILD_HOLDERS, (REBUILD_LOCK_CLASS, _kb_key(schema))).fetchall()]


def hold_rebuild_lock(conn: Any, schema: str) -> None:
    """Take the reembed lock for this session (once: session locks stack)."""
    if conn.info.backend_pid not in rebuild_holders(conn, schema):
        conn.execute("SELECT pg_try_advisory_lock(%s, %s)",
                     (REBUILD_LOCK_CLASS, _kb_key(schema)))


def release_rebuild_lock(conn: Any, schema: str) -> None:
    if conn.info.backend_pid in rebuild_holders(conn, schema):
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (REBUILD_LOCK_CLASS, _kb_key(schema)))


@contextlib.contextmanager
def write_transaction(conn: Any, schema: str, *, exclusive: bool = False,
                      paths: Sequence[str] = ()) -> Iterator[Any]:
    """One transaction holding the knowledge base lock (shared, or exclusive)
    and the locks of ``paths``. Nested use joins the outer transaction (a
    savepoint) and takes the locks again, which a holder always gets."""
    with conn.transaction():
        with notice_if_waiting(f"knowledge base {schema}"):
            lock_kb(conn, schema, exclusive=exclusive)
            if paths and not exclusive:
                lock_paths(conn, schema, paths)
        yield conn


@contextlib.contextmanager
def snapshot(conn: Any) -> Iterator[Any]:
    """Several reads from one snapshot (repeatable read, read only)."""
    if conn.info.transaction_status != 0:  # already inside a transaction
        yield conn
        return
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield conn

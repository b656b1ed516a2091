"""Applying kbstore's SQLite migrations (files in migrations/sqlite/).

They run through sqlite-utils' ``Migrations`` (bookkeeping in
``_sqlite_migrations``) inside ONE ``BEGIN IMMEDIATE`` transaction, so a
step and its bookkeeping row commit together and processes racing to create
a new file serialize. Foreign keys are off meanwhile (a step may rebuild a
table) and ``PRAGMA foreign_key_check`` must pass before the commit.
sqlite-utils is imported only when something is pending (~0.7 s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import NotAKnowledgeBaseError, SchemaTooNewError
from ...migrations import MIGRATION_SET, schema_version, steps  # package-dir mapped
from . import vectors as _vectors
from .connection import Connection, retry_busy, transaction

BACKEND = "sqlite"
TABLE = "_sqlite_migrations"
SCHEMA_VERSION = schema_version(BACKEND)
# The oldest schema the read path (search, get, status, doctor, export) works
# on unchanged: v4 changed only how a write makes the index rows (the backend
# instead of triggers), so a v3 file reads exactly as a v4 one. Read commands
# open such a file as it is (never migrating it); writes migrate it first.
READABLE_FROM = 3
# Steps with a part SQL cannot do, run right after the step's script in the
# same transaction (v5: the sign bits of the float vectors already stored).
_AFTER_STEP = {"0005_sign_bits_index": _vectors.fill_bits}


@dataclass(frozen=True)
class SchemaState:
    version: int          # number of kbstore migrations applied
    applied: list[str]
    pending: list[str]
    unknown: list[str]    # applied by a newer kbstore


def _applied(conn: Connection) -> list[str]:
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (TABLE,)).fetchone():
        return []
    return [r[0] for r in conn.execute(
        f"SELECT name FROM {TABLE} WHERE migration_set = ? ORDER BY rowid",
        (MIGRATION_SET,))]


def state(conn: Connection) -> SchemaState:
    """Read-only view of what is applied and pending."""
    applied = _applied(conn)
    known = [name for name, _ in steps(BACKEND)]
    return SchemaState(version=len([n for n in applied if n in known]), applied=applied,
                       pending=[n for n in known if n not in applied],
                       unknown=[n for n in applied if n not in known])


def check_ours(conn: Connection, location: str) -> None:
    """Refuse a SQLite file kbstore did not create (its tables are someone
    else's: kbstore adds nothing to them)."""
    if _applied(conn):
        return
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name NOT LIKE 'sqlite_%' LIMIT 5")]
    if tables:
        raise NotAKnowledgeBaseError(
            f"{location} is a SQLite database that kbstore did not create (it holds "
            f"{', '.join(tables)}); refusing to touch it. Point --db at a kbstore file or a "
            "new path.")


def refuse_if_newer(conn: Connection, current: SchemaState) -> None:
    user_version = conn.execute("PRAGMA user_version").fetchone()[0]
    if current.unknown or user_version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"this database has schema version {max(user_version, len(current.applied))} "
            f"but this kbstore knows only up to {SCHEMA_VERSION}; upgrade kbstore "
            "(pip install -U kbstore). The file was not modified.")


def _migration_set() -> Any:
    from sqlite_utils.migrations import Migrations

    migrations = Migrations(MIGRATION_SET)
    for version, (name, path) in enumerate(steps(BACKEND), start=1):

        def run(db: Any, path: Any = path, version: int = version, name: str = name) -> None:
            db.executescript(path.read_text(encoding="utf-8"))
            if name in _AFTER_STEP:
                _AFTER_STEP[name](db.conn)
            # user_version lets the sqlite3 shell (and a fast open) see the version.
            db.execute(f"PRAGMA user_version = {int(version)}")

        run.__name__ = name
        migrations(name=name)(run)
    return migrations


def migrate(conn: Connection, location: str,
            on_create: Callable[[Connection], None] | None = None) -> list[str]:
    """Apply pending migrations (one transaction) and return their names.
    Refuses, without writing, a schema newer than this code. ``on_create``
    runs in the same transaction when the file had no schema before (a new
    store's embedder stamp and vector table), so a kill leaves either
    nothing or a whole store."""
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        current = state(conn)  # fast path: nothing to import, nothing to lock
        refuse_if_newer(conn, current)
        if not current.pending:
            return []
    from sqlite_utils import Database

    conn.execute("PRAGMA foreign_keys = OFF")  # a no-op inside a transaction: set it first
    try:
        with transaction(conn):
            # Re-read under the write lock: another process may have just migrated.
            check_ours(conn, location)
            current = state(conn)
            refuse_if_newer(conn, current)
            if not current.pending:
                return []
            _migration_set().apply(Database(conn, execute_plugins=False))
            if on_create is not None and not current.applied:
                on_create(conn)
            broken = conn.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(f"migration left {len(broken)} foreign key violation(s): "
                                   f"{broken[:3]}")
    finally:
        retry_busy(lambda: conn.execute("PRAGMA foreign_keys = ON"))
    return current.pending

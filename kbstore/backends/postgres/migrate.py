"""Schema migrations for one PostgreSQL knowledge base (one schema).

Steps are the .sql files in ``migrations/postgres/`` (installed as
``kbstore.migrations/postgres``). All pending steps run in ONE transaction
with their bookkeeping rows, under a transaction-scoped advisory lock, so
processes racing to open a new knowledge base serialize: the first creates
it, the others re-read the version under the lock and find nothing to do.
A schema migrated by a newer kbstore is refused without writing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import migrations as _migrations  # type: ignore[attr-defined]  # package-dir mapped
from ...errors import KBStoreError, SchemaTooNewError

STEPS_DIR = Path(_migrations.__file__).resolve().parent / "postgres"
# (version, name, file). Append only: never edit or reorder a released step.
STEPS: list[tuple[int, str, str]] = [
    (1, "0001_initial", "0001_initial.sql"),
]
SCHEMA_VERSION = STEPS[-1][0]
SCHEMA_PREFIX = "kbstore_"
MIGRATIONS_TABLE = "schema_migrations"
# One key for every kbstore migration in a database (CREATE EXTENSION is
# database-wide, so two knowledge bases' first opens must not race either).
LOCK_KEY = 0x6B6273746F7265  # "kbstore"
_KB_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


class ExtensionMissingError(KBStoreError):
    """pgvector is not installed in the database and we may not install it."""


def schema_for(kb_name: str) -> str:
    """The schema holding knowledge base ``kb_name`` (``kbstore_<name>``)."""
    if not _KB_NAME.match(kb_name):
        raise ValueError(f"knowledge base name must match {_KB_NAME.pattern}: {kb_name!r}")
    return SCHEMA_PREFIX + kb_name


def step_sql(filename: str) -> str:
    return (STEPS_DIR / filename).read_text(encoding="utf-8")


@dataclass(frozen=True)
class SchemaState:
    version: int
    applied: list[str]
    pending: list[str]


def _ident(conn: Any, name: str) -> str:
    from psycopg import sql

    return sql.Identifier(name).as_string(conn)


def vector_schema(conn: Any) -> str | None:
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'vector'").fetchone()
    return row[0] if row else None


def use_schema(conn: Any, schema: str, *, local: bool) -> None:
    """search_path = the knowledge base's schema, then pgvector's."""
    ext = vector_schema(conn)
    path = ", ".join(_ident(conn, s) for s in dict.fromkeys([schema, ext or "public"]))
    conn.execute("SELECT set_config('search_path', %s, %s)", (path, local))


def _applied(conn: Any, schema: str) -> list[tuple[int, str]]:
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                          (f"{_ident(conn, schema)}.{MIGRATIONS_TABLE}",)).fetchone()[0]
    if not exists:
        return []
    from psycopg import sql

    rows = conn.execute(sql.SQL("SELECT version, name FROM {}.{} ORDER BY version").format(
        sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE))).fetchall()
    return [(int(v), str(n)) for v, n in rows]


def state(conn: Any, schema: str) -> SchemaState:
    applied = _applied(conn, schema)
    done = {v for v, _ in applied}
    return SchemaState(version=max(done, default=0), applied=[n for _, n in applied],
                       pending=[n for v, n, _ in STEPS if v not in done])


def _refuse_if_newer(schema: str, current: SchemaState) -> None:
    if current.version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"knowledge base schema {schema!r} has version {current.version} but this "
            f"kbstore knows only up to {SCHEMA_VERSION}; upgrade kbstore. Nothing was changed.")


def _ensure_extension(conn: Any) -> None:
    if vector_schema(conn) is not None:
        return
    import psycopg

    try:
        with conn.transaction():  # a savepoint: the error must not end our transaction
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ExtensionMissingError(
            "the pgvector extension is not installed in this database and this role may not "
            "install it: ask an administrator to run  CREATE EXTENSION vector;  once") from exc
    except psycopg.errors.FeatureNotSupported as exc:  # not on the server at all
        raise ExtensionMissingError(f"the server has no pgvector extension: {exc}") from exc


def ensure_schema(conn: Any, schema: str) -> list[str]:
    """Apply pending steps to ``schema`` and return their names.

    ``conn`` must not be inside a transaction. The fast path (up to date)
    takes no lock and writes nothing."""
    current = state(conn, schema)
    conn.commit()  # end the read's implicit transaction (non-autocommit connections)
    _refuse_if_newer(schema, current)
    if not current.pending:
        return []
    from psycopg import sql

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        _ensure_extension(conn)
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        use_schema(conn, schema, local=True)
        conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())").format(
                sql.Identifier(MIGRATIONS_TABLE)))
        current = state(conn, schema)  # re-read under the lock: someone may have won
        _refuse_if_newer(schema, current)
        applied = set(current.applied)
        done = []
        for version, name, filename in STEPS:
            if name in applied:
                continue
            conn.execute(step_sql(filename))
            conn.execute(sql.SQL("INSERT INTO {} (version, name) VALUES (%s, %s)").format(
                sql.Identifier(MIGRATIONS_TABLE)), (version, name))
            done.append(name)
    return done

"""Schema migrations for one PostgreSQL knowledge base (one schema).

Steps are the files in ``migrations/postgres/`` (``kbstore.migrations``),
applied in file-name order. All pending steps run in ONE transaction with
their bookkeeping rows, under a transaction-scoped advisory lock, so
processes racing to open a new knowledge base serialize: the first creates
it, the others re-read the state under the lock and find nothing to do. A
schema migrated by a newer kbstore is refused without writing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...errors import BackendUnavailableError, SchemaTooNewError
from ...migrations import schema_version, steps  # package-dir mapped

BACKEND = "postgres"
SCHEMA_VERSION = schema_version(BACKEND)
SCHEMA_PREFIX = "kbstore_"
MIGRATIONS_TABLE = "schema_migrations"
# One key for every kbstore migration in a database (CREATE EXTENSION is
# database-wide, so two knowledge bases' first opens must not race either).
LOCK_KEY = 0x6B6273746F7265  # "kbstore"
_KB_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


def schema_for(kb_name: str) -> str:
    """The schema holding knowledge base ``kb_name`` (``kbstore_<name>``)."""
    if not _KB_NAME.match(kb_name):
        raise ValueError(f"knowledge base name must match {_KB_NAME.pattern}: {kb_name!r}")
    return SCHEMA_PREFIX + kb_name


def step_sql(name: str) -> str:
    return dict(steps(BACKEND))[name].read_text(encoding="utf-8")


@dataclass(frozen=True)
class SchemaState:
    version: int          # number of kbstore migrations applied
    applied: list[str]
    pending: list[str]
    unknown: list[str]    # applied by a newer kbstore


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


def _applied(conn: Any, schema: str) -> list[str]:
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                          (f"{_ident(conn, schema)}.{MIGRATIONS_TABLE}",)).fetchone()[0]
    if not exists:
        return []
    from psycopg import sql

    rows = conn.execute(sql.SQL("SELECT name FROM {}.{} ORDER BY version").format(
        sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE))).fetchall()
    return [str(r[0]) for r in rows]


def state(conn: Any, schema: str) -> SchemaState:
    """Read-only view of what is applied and pending."""
    applied = _applied(conn, schema)
    known = [name for name, _ in steps(BACKEND)]
    return SchemaState(version=len([n for n in applied if n in known]), applied=applied,
                       pending=[n for n in known if n not in applied],
                       unknown=[n for n in applied if n not in known])


def refuse_if_newer(schema: str, current: SchemaState) -> None:
    if current.unknown:
        raise SchemaTooNewError(
            f"knowledge base schema {schema!r} has migrations this kbstore does not know "
            f"({', '.join(current.unknown)}); upgrade kbstore. Nothing was changed.")


def _ensure_extension(conn: Any) -> None:
    if vector_schema(conn) is not None:
        return
    import psycopg

    try:
        with conn.transaction():  # a savepoint: the error must not end our transaction
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege as exc:
        raise BackendUnavailableError(
            "the pgvector extension is not installed in this database and this role may not "
            "install it: ask an administrator to run  CREATE EXTENSION vector;  once") from exc
    except (psycopg.errors.FeatureNotSupported, psycopg.errors.UndefinedFile) as exc:
        raise BackendUnavailableError(  # not installed on the server at all
            f"the PostgreSQL server has no pgvector extension to install: {exc}") from exc


def _refold(conn: Any) -> None:
    from .fold import refold

    refold(conn)


# Steps whose rows Python rewrites in the same transaction (SQL cannot fold
# text as kbstore.model.fts_fold does).
AFTER_STEP = {"0004_python_case_fold": _refold}


def ensure_schema(conn: Any, schema: str, on_create: Any = None) -> list[str]:
    """Apply pending steps to ``schema`` and return their names.
    ``on_create(conn)`` runs in the same transaction when the schema had no
    steps before (a new knowledge base's embedder stamp and vector table).

    ``conn`` must not be inside a transaction. The fast path (up to date)
    takes no lock and writes nothing."""
    current = state(conn, schema)
    conn.commit()  # end the read's implicit transaction (non-autocommit connections)
    refuse_if_newer(schema, current)
    if not current.pending:
        return []
    from psycopg import sql

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        _ensure_extension(conn)
        # Only when missing: CREATE SCHEMA checks the CREATE privilege on the
        # database even with IF NOT EXISTS, and a role may own a schema an
        # administrator made for it without holding that privilege.
        if not conn.execute("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s)",
                            (schema,)).fetchone()[0]:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        use_schema(conn, schema, local=True)
        conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())").format(
                sql.Identifier(MIGRATIONS_TABLE)))
        current = state(conn, schema)  # re-read under the lock: someone may have won
        refuse_if_newer(schema, current)
        done = []
        for name in current.pending:
            conn.execute(step_sql(name))
            if name in AFTER_STEP:
                AFTER_STEP[name](conn)
            conn.execute(sql.SQL(
                "INSERT INTO {} (version, name) SELECT coalesce(max(version), 0) + 1, %s "
                "FROM {}").format(sql.Identifier(MIGRATIONS_TABLE),
                                 sql.Identifier(MIGRATIONS_TABLE)), (name,))
            done.append(name)
        if on_create is not None and not current.applied:
            on_create(conn)
    return done

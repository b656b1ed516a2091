"""``PostgresBackend.apply``: planned changes written in ONE transaction.

The transaction holds the knowledge base lock (shared) and the locks of the
batch's paths, re-reads what is stored for them and skips every change whose
``expected`` state is no longer what the database holds -- exactly the rule
of the SQLite backend. Documents are written with one statement per kind of
change (insert, update, delete: the BM25 statistics triggers run once per
statement, not once per row); vectors, questions and hash rows follow.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...errors import EmbedderChangedError
from ...model import (
    CHUNK_VECTORS,
    DOC_VECTOR,
    HYPE_QUESTIONS,
    HYPE_VECTORS,
    OK,
    Applied,
    Change,
    Document,
    Stored,
    fingerprint_id,
    fts_fold,
    tag_keys,
)
from ...redact import redact
from .connection import write_transaction
from .fold import FOLDED, document_parts
from .read import stored_state

ERROR_CHARS = 500
CHUNK_SLOT = 32            # vector slot of chunk 0 (slots 1..31: questions)
STAGING = "vectors_next"   # vectors staged by a reembed (see rebuild.py)

_INSERT = """
INSERT INTO documents (path, title, tags, body, topic, doc_type, created, updated,
                       content_hash, extra, fts, title_fts)
SELECT u.path, u.title, u.tags::jsonb, u.body, u.topic, u.doc_type, u.created, u.updated,
       u.content_hash, u.extra::json, document_vector(u.ftitle, u.ftags, u.fbody),
       title_vector(u.ftitle)
FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
            %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[])
     AS u(path, title, tags, body, topic, doc_type, created, updated, content_hash, extra,
          ftitle, ftags, fbody)
RETURNING id, path
"""
_UPDATE = """
UPDATE documents AS d
SET title = u.title, tags = u.tags::jsonb, body = u.body, topic = u.topic,
    doc_type = u.doc_type, created = u.created, updated = u.updated,
    content_hash = u.content_hash, extra = u.extra::json,
    fts = document_vector(u.ftitle, u.ftags, u.fbody), title_fts = title_vector(u.ftitle)
FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
            %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[])
     AS u(id, title, tags, body, topic, doc_type, created, updated, content_hash, extra,
          ftitle, ftags, fbody)
WHERE d.id = u.id
"""
_MARK = """
INSERT INTO derived (doc_id, kind, content_hash, model, status, error)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (doc_id, kind) DO UPDATE SET content_hash = excluded.content_hash,
    model = excluded.model, status = excluded.status, error = excluded.error, made_at = now()
"""


def _fields(doc: Document) -> list[Any]:
    return [doc.title, json.dumps(doc.tags, ensure_ascii=False), doc.body, doc.topic,
            doc.doc_type, doc.created, doc.updated, doc.content_hash(),
            json.dumps(doc.extra, ensure_ascii=False, default=str),  # key order kept
            *document_parts(doc.title, doc.tags, doc.body)]  # what to_tsvector reads


def _columns(rows: list[list[Any]]) -> list[list[Any]]:
    return [list(col) for col in zip(*rows, strict=True)]


def staging_exists(conn: Any, schema: str) -> bool:
    return bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                             (f'"{schema}".{STAGING}',)).fetchone()[0])


def check_fingerprint(conn: Any, writer: str | None, location: str) -> None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
    stored = row[0] if row is not None and isinstance(row[0], dict) else None
    now = fingerprint_id(stored) if stored else "no embedder"
    if now != writer:
        raise EmbedderChangedError(
            f"{location} is now embedded with {now}, not {writer} (another process "
            "re-embedded it); nothing was written. Reopen the store.")


class _Batch:
    """What one apply writes, collected per statement."""

    def __init__(self) -> None:
        self.inserts: list[Change] = []
        self.updates: list[tuple[int, Document]] = []
        self.deletes: list[int] = []
        self.targets: list[tuple[Change, Stored | None]] = []  # changes with derived data
        self.keys: dict[str, int] = {}


def apply(conn: Any, schema: str, changes: Sequence[Change], writer_fp: str | None,
          max_questions: int, location: str) -> Applied:
    out = Applied()
    paths = [c.path for c in changes]
    with write_transaction(conn, schema, paths=paths):
        if any(c.writes_vectors for c in changes):
            check_fingerprint(conn, writer_fp, location)
        current = stored_state(conn, paths)
        batch = _Batch()
        for change in changes:
            now = current.get(change.path)
            if now != change.expected:
                out.stale.append(change.path)
                continue
            _classify(change, now, batch, out)
        _write_documents(conn, batch)
        touched = _write_derived(conn, batch, max_questions)
        if touched and staging_exists(conn, schema):
            # A reembed is staging vectors: what it staged for these documents
            # no longer matches; it stages them again.
            conn.execute(f"DELETE FROM {STAGING} WHERE doc_id = ANY(%s)", (sorted(touched),))
    return out


def _classify(change: Change, now: Stored | None, batch: _Batch, out: Applied) -> None:
    if change.delete:
        if now is not None:
            batch.deletes.append(now.key)
            out.deleted.append(change.path)
        return
    doc = change.document
    if doc is not None:
        if now is None:
            batch.inserts.append(change)
            out.added.append(change.path)
        elif now.content_hash != doc.content_hash():
            batch.updates.append((now.key, doc))
            out.updated.append(change.path)
        batch.targets.append((change, now))
    elif now is not None:
        out.derived.append(change.path)
        batch.targets.append((change, now))
    # else: derived data for a document that does not exist


def _write_documents(conn: Any, batch: _Batch) -> None:
    conn.execute(FOLDED)  # the vectors below are made from folded text (fold.py)
    if batch.deletes:
        conn.execute("DELETE FROM documents WHERE id = ANY(%s)", (batch.deletes,))
    if batch.updates:
        rows = [[key, *_fields(doc)] for key, doc in batch.updates]
        conn.execute(_UPDATE, _columns(rows))
    if batch.inserts:
        rows = [[c.path, *_fields(c.document)] for c in batch.inserts]  # type: ignore[arg-type]
        for key, path in conn.execute(_INSERT, _columns(rows)).fetchall():
            batch.keys[path] = int(key)
    written = [(key, doc.tags) for key, doc in batch.updates]
    written += [(batch.keys[c.path], c.document.tags) for c in batch.inserts]  # type: ignore[union-attr]
    write_tags(conn, written)


def write_tags(conn: Any, docs: list[tuple[int, list[str]]]) -> None:
    """The exact-tag rows of these documents, by kbstore.model.tag_key (the
    query's rule). The documents trigger (kept for edits in psql) made them
    with the server's lower(), which follows the database's locale: ASCII
    only under LC_CTYPE "C", and no final sigma or "İ" -> "i̇" under libc."""
    if not docs:
        return
    conn.execute("DELETE FROM document_tags WHERE doc_id = ANY(%s)", ([d for d, _ in docs],))
    rows = [[key, doc_id] for doc_id, tags in docs for key in tag_keys(tags)]
    if rows:
        conn.execute("INSERT INTO document_tags (tag, doc_id) "
                     "SELECT * FROM unnest(%s::text[], %s::bigint[])", _columns(rows))


def _write_derived(conn: Any, batch: _Batch, max_questions: int) -> set[int]:
    """Vectors, questions and hash rows; returns the keys written."""
    new_vectors: list[tuple[int, int, str, Any]] = []
    marks: list[tuple[Any, ...]] = []
    unmark: list[tuple[int, str]] = []
    question_docs: list[int] = []
    question_rows: list[tuple[int, int, str, str]] = []
    chunk_docs: list[int] = []
    chunk_rows: list[tuple[int, int, int, int]] = []
    touched: set[int] = set()
    for change, now in batch.targets:
        key = batch.keys[change.path] if now is None else now.key
        doc = change.document
        topic = doc.topic if doc is not None else now.topic  # type: ignore[union-attr]
        touched.add(key)
        if change.doc_vector is not None:
            new_vectors.append((key, 0, topic, change.doc_vector))
            marks.append((key, DOC_VECTOR, change.vector_hash, change.vector_model, OK, None))
        if change.chunks is not None or change.drop_chunks:
            chunk_docs.append(key)
            chunks = change.chunks
            if chunks is None or not chunks.vectors:
                unmark.append((key, CHUNK_VECTORS))
            else:
                for n, (span, vector) in enumerate(zip(chunks.spans, chunks.vectors,
                                                       strict=True)):
                    chunk_rows.append((key, n, span[0], span[1]))
                    new_vectors.append((key, CHUNK_SLOT + n, topic, vector))
                marks.append((key, CHUNK_VECTORS, chunks.content_hash, change.vector_model,
                              OK, None))
        if change.questions is None and not change.drop_questions:
            continue
        question_docs.append(key)
        new = change.questions
        if new is None:  # drop stale questions
            unmark += [(key, HYPE_QUESTIONS), (key, HYPE_VECTORS)]
            continue
        texts = new.texts[:max_questions]
        for pos, (text, vector) in enumerate(zip(texts, new.vectors, strict=False), start=1):
            question_rows.append((key, pos, text, fts_fold(text)))
            new_vectors.append((key, pos, topic, vector))
        error = redact(new.error)[:ERROR_CHARS].replace("\x00", "") if new.error else None
        marks.append((key, HYPE_QUESTIONS, new.content_hash, new.llm_model, new.status, error))
        if texts:
            marks.append((key, HYPE_VECTORS, new.content_hash, change.vector_model, OK, None))
        else:
            unmark.append((key, HYPE_VECTORS))
    doc_slots = [k for k, slot, _, _ in new_vectors if slot == 0]
    with conn.cursor() as cur:
        if doc_slots:
            cur.execute("DELETE FROM vectors WHERE slot = 0 AND doc_id = ANY(%s)", (doc_slots,))
        if chunk_docs:
            cur.execute("DELETE FROM vectors WHERE slot >= %s AND doc_id = ANY(%s)",
                        (CHUNK_SLOT, chunk_docs))
            cur.execute("DELETE FROM document_chunks WHERE doc_id = ANY(%s)", (chunk_docs,))
        if chunk_rows:
            cur.executemany("INSERT INTO document_chunks (doc_id, position, start_char, "
                            "end_char) VALUES (%s, %s, %s, %s)", chunk_rows)
        if question_docs:
            cur.execute("DELETE FROM vectors WHERE slot BETWEEN 1 AND %s AND doc_id = ANY(%s)",
                        (CHUNK_SLOT - 1, question_docs))
            cur.execute("DELETE FROM hype_questions WHERE doc_id = ANY(%s)", (question_docs,))
        if question_rows:
            cur.executemany("INSERT INTO hype_questions (doc_id, position, question, folded) "
                            "VALUES (%s, %s, %s, %s)", question_rows)
        if new_vectors:
            import numpy as np

            cur.executemany(
                "INSERT INTO vectors (doc_id, slot, topic, embedding) VALUES (%s, %s, %s, %s)",
                [(k, s, t, np.asarray(v, dtype=np.float32).reshape(-1))
                 for k, s, t, v in new_vectors])
        if unmark:
            cur.execute("DELETE FROM derived AS x USING unnest(%s::bigint[], %s::text[]) "
                        "AS u(doc_id, kind) WHERE x.doc_id = u.doc_id AND x.kind = u.kind",
                        _columns([list(u) for u in unmark]))
        if marks:
            cur.executemany(_MARK, marks)
    return touched

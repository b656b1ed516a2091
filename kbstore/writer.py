"""Writing a batch of documents with their derived data.

The slow work -- embedding, asking the LLM for HyPE questions -- happens
before the write lock is taken; then documents, vectors, questions and hash
rows are written in ONE transaction. An exception before the commit leaves
the database exactly as it was before the batch.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import db as _db
from .embed import embedding_text, fingerprint_id
from .ingest import Document

if TYPE_CHECKING:
    from .store import ImportReport, KnowledgeStore, Progress

SLOTS = 32


@dataclass
class _Plan:
    doc: Document
    doc_id: int | None           # existing row, if any
    changed: bool                # stored fields differ
    need_vector: bool
    vector_hash: str
    hype_hash: str
    need_hype: bool              # ask the LLM
    old_questions: list[str]
    need_hype_vectors: bool      # questions exist but their vectors do not
    meta_changed: bool = False   # topic/doc_type changed: vec0 metadata to update
    stale_hype: bool = False     # stored questions describe older content
    hype_current: bool = False   # stored questions were made from this content


def batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _plan_batch(store: KnowledgeStore, docs: list[Document]) -> list[_Plan]:
    """Decide per document what must be (re)made, with three queries for the
    whole batch rather than several per document (re-sync of an unchanged
    workspace is all reads)."""
    from .store import doc_vector_hash, hype_hash

    conn = store.conn
    fp = fingerprint_id(store.embedder.fingerprint())
    paths = json.dumps([d.path for d in docs])
    rows = {r[1]: r for r in conn.execute(
        "SELECT id, path, content_hash, topic, doc_type FROM documents "
        "WHERE path IN (SELECT value FROM json_each(?))", (paths,))}
    ids = json.dumps([r[0] for r in rows.values()])
    derived: dict[int, dict[str, tuple[str, str, str]]] = {}
    for doc_id, kind, chash, model, status in conn.execute(
            "SELECT doc_id, kind, content_hash, model, status FROM derived "
            "WHERE doc_id IN (SELECT value FROM json_each(?))", (ids,)):
        derived.setdefault(doc_id, {})[kind] = (chash, model, status)
    plans: list[_Plan] = []
    for doc in docs:
        vhash, hhash = doc_vector_hash(doc), hype_hash(doc)
        row = rows.get(doc.path)
        if row is None:
            plans.append(_Plan(doc, None, True, True, vhash, hhash, store.hype.enabled, [], False))
            continue
        doc_id = int(row[0])
        made = derived.get(doc_id, {})
        vec = made.get("doc_vector")
        hq, hv = made.get("hype_questions"), made.get("hype_vectors")
        hype_current = hq is not None and hq[0] == hhash and hq[2] == "ok"
        need_hype_vectors = hype_current and (hv is None or hv[1] != fp or hv[0] != hhash)
        questions = [q for (q,) in conn.execute(
            "SELECT question FROM hype_questions WHERE doc_id = ? ORDER BY position",
            (doc_id,))] if need_hype_vectors else []
        plans.append(_Plan(
            doc, doc_id, row[2] != doc.content_hash(),
            need_vector=vec is None or vec[0] != vhash or vec[1] != fp,
            vector_hash=vhash, hype_hash=hhash,
            need_hype=store.hype.enabled and not hype_current,
            old_questions=questions, need_hype_vectors=need_hype_vectors and bool(questions),
            meta_changed=(row[3], row[4]) != (doc.topic, doc.doc_type),
            stale_hype=hq is not None and hq[0] != hhash, hype_current=hype_current))
    return plans


# Plans are made without the write lock, so another process (daemon + CLI)
# may commit to the same documents first: an insert would then hit the
# UNIQUE path, an update a deleted row, a kept vector newer content. The plan
# is re-made under the lock; if it changed, the batch is planned again.
REPLANS = 8


class _StalePlanError(Exception):
    """Another writer changed this batch's documents after it was planned."""


def write_batch(store: KnowledgeStore, docs: list[Document]) -> ImportReport:
    for _ in range(REPLANS):
        with contextlib.suppress(_StalePlanError):
            return _write_batch(store, docs, locked=False)
    # Still racing a busy writer: plan, embed and write under the lock.
    with _db.transaction(store.conn):
        return _write_batch(store, docs, locked=True)


def _write_batch(store: KnowledgeStore, docs: list[Document], *, locked: bool) -> ImportReport:
    from .store import ImportReport

    report = ImportReport()
    # Last one wins if a batch names the same path twice.
    unique = list({d.path: d for d in docs}.values())
    plans = _plan_batch(store, unique)
    work = [p for p in plans if p.changed or p.need_vector or p.need_hype or p.need_hype_vectors
            or p.meta_changed or p.stale_hype]
    report.unchanged = len(plans) - len(work)
    if not work:
        return report

    # 1. Slow work, no lock held.
    to_embed = [p for p in work if p.need_vector]
    doc_vectors = store.embedder.embed_documents(
        [embedding_text(p.doc.title, p.doc.tags, p.doc.body) for p in to_embed])
    questions: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    asked = [p for p in work if p.need_hype]
    if asked:
        from .hype import generate_many

        questions, errors = generate_many(store.hype, [(p.doc.path, p.doc.title, p.doc.body)
                                                       for p in asked])
    for p in work:
        if not p.need_hype and p.need_hype_vectors:
            questions[p.doc.path] = p.old_questions
    flat = [(path, i, q) for path, qs in questions.items() for i, q in enumerate(qs, start=1)]
    # Questions are queries: embed them like queries (question-to-question match).
    question_vectors = store.embedder.embed_queries([q for _, _, q in flat])

    # 2. One transaction for everything this batch writes.
    vec_by_path = {p.doc.path: v for p, v in zip(to_embed, doc_vectors, strict=True)}
    qvec_by_path: dict[str, list[tuple[int, str, np.ndarray]]] = {}
    for (path, pos, q), vec in zip(flat, question_vectors, strict=True):
        qvec_by_path.setdefault(path, []).append((pos, q, vec))
    fp = fingerprint_id(store.embedder.fingerprint())
    with contextlib.nullcontext() if locked else _db.transaction(store.conn):
        if not locked and _plan_batch(store, unique) != plans:
            raise _StalePlanError  # rolled back: nothing of this batch was written
        for p in work:
            doc_id = _write_document(store.conn, p)
            if p.doc_id is None:
                report.added += 1
            elif p.changed:
                report.updated += 1
            else:
                report.unchanged += 1
            if p.meta_changed and not p.need_vector:
                store.conn.execute(
                    "UPDATE vectors SET topic = ?, doc_type = ? WHERE vector_id = ?",
                    (p.doc.topic, p.doc.doc_type, doc_id * SLOTS))
            if p.doc.path in vec_by_path:
                _write_vector(store.conn, doc_id, 0, "doc", p.doc, vec_by_path[p.doc.path])
                _mark(store.conn, doc_id, "doc_vector", p.vector_hash, fp)
                report.embedded += 1
            if p.stale_hype and (not p.need_hype or p.doc.path in errors):
                _replace_questions(store.conn, doc_id, p.doc, [])
                store.conn.execute("DELETE FROM derived WHERE doc_id = ? AND kind IN "
                                   "('hype_questions', 'hype_vectors')", (doc_id,))
            if p.need_hype and p.doc.path in errors:
                _mark(store.conn, doc_id, "hype_questions", p.hype_hash, store.hype.model,
                      status="pending", error=errors[p.doc.path])
                report.hype_pending += 1
            if p.doc.path in qvec_by_path or (p.need_hype and p.doc.path in questions):
                _replace_questions(store.conn, doc_id, p.doc, qvec_by_path.get(p.doc.path, []))
                if p.need_hype:
                    _mark(store.conn, doc_id, "hype_questions", p.hype_hash, store.hype.model)
                    report.hype_generated += 1
                _mark(store.conn, doc_id, "hype_vectors", p.hype_hash, fp)
    return report


def _write_document(conn: Any, p: _Plan) -> int:
    d = p.doc
    values = (d.title, json.dumps(d.tags, ensure_ascii=False), d.body, d.topic, d.doc_type,
              d.created, d.updated, d.content_hash())
    if p.doc_id is None:
        cur = conn.execute(
            "INSERT INTO documents (title, tags, body, topic, doc_type, created, updated, "
            "content_hash, path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (*values, d.path))
        return int(cur.lastrowid)
    if p.changed:
        conn.execute(
            "UPDATE documents SET title = ?, tags = ?, body = ?, topic = ?, doc_type = ?, "
            "created = ?, updated = ?, content_hash = ? WHERE id = ?", (*values, p.doc_id))
    return p.doc_id


def _write_vector(conn: Any, doc_id: int, slot: int, kind: str, doc: Document,
                  vector: np.ndarray, *, replace: bool = True) -> None:
    """Write one vector (vec0 sign bits + float32 copy). ``replace=False``
    when the slot is known to be empty: the vec0 DELETE costs as much as the
    INSERT (measured: 1.3 s per 14,000 vectors)."""
    vector_id = doc_id * SLOTS + slot
    blob = np.asarray(vector, dtype=np.float32).tobytes()
    if replace:  # vec0 has no INSERT OR REPLACE (sqlite-vec #127): delete, then insert.
        conn.execute("DELETE FROM vectors WHERE vector_id = ?", (vector_id,))
    conn.execute(
        "INSERT INTO vectors (vector_id, kind, embedding_bits, doc_id, topic, doc_type)"
        " VALUES (?, ?, vec_quantize_binary(?), ?, ?, ?)",
        (vector_id, kind, blob, doc_id, doc.topic, doc.doc_type))
    conn.execute("INSERT OR REPLACE INTO vector_data (vector_id, doc_id, embedding) "
                 "VALUES (?, ?, ?)", (vector_id, doc_id, blob))


def _replace_questions(conn: Any, doc_id: int, doc: Document,
                       items: list[tuple[int, str, np.ndarray]]) -> None:
    # vector_data lists every vector the document has (written together with
    # vec0), so after these deletes the question slots are free.
    stale = conn.execute("SELECT vector_id FROM vector_data WHERE doc_id = ? AND vector_id <> ?",
                         (doc_id, doc_id * SLOTS)).fetchall()
    conn.executemany("DELETE FROM vectors WHERE vector_id = ?", stale)
    conn.executemany("DELETE FROM vector_data WHERE vector_id = ?", stale)
    conn.execute("DELETE FROM hype_questions WHERE doc_id = ?", (doc_id,))
    for pos, question, vector in items:
        conn.execute("INSERT INTO hype_questions (doc_id, position, question) VALUES (?, ?, ?)",
                     (doc_id, pos, question))
        _write_vector(conn, doc_id, pos, "hype", doc, vector, replace=False)


def _mark(conn: Any, doc_id: int, kind: str, content_hash: str, model: str,
          status: str = "ok", error: str | None = None) -> None:
    conn.execute(
        "INSERT INTO derived (doc_id, kind, content_hash, model, status, error) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (doc_id, kind) DO UPDATE SET "
        "content_hash = excluded.content_hash, model = excluded.model, status = excluded.status,"
        " error = excluded.error, made_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
        (doc_id, kind, content_hash, model, status, error))


def embed_existing(store: KnowledgeStore, *, batch_size: int,
                   progress: Progress | None = None) -> int:
    """(Re)embed documents and questions that lack current vectors, without
    calling the LLM. Used by reembed and doctor --fix."""
    hype_enabled = store.hype.enabled
    store.hype.enabled = False  # never ask the LLM here; keep existing questions
    try:
        done = 0
        paths = [r[0] for r in store.conn.execute("SELECT path FROM documents ORDER BY id")]
        for start in range(0, len(paths), batch_size):
            docs = [store.get(p) for p in paths[start:start + batch_size]]
            report = write_batch(store, [d for d in docs if d is not None])
            done += report.embedded
            if progress:
                progress(len(docs))
        return done
    finally:
        store.hype.enabled = hype_enabled

"""The SQLite backend's one write path: ``apply`` writes planned changes
in ONE transaction (documents, then vectors, questions, chunks and hash
rows through :class:`~.pending.PendingRows`), skipping every change whose
``expected`` state is no longer what the file holds. A mixin of
:class:`~.backend.SQLiteBackend`, the one class users see."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
)
from ...redact import redact
from . import vectors as _vectors
from .connection import BULK_CHANGES, Connection, bulk_writes, transaction
from .pending import PendingRows

_ERROR_CHARS = 500


class WritePath:
    """``apply`` and its helpers, on :class:`~.backend.SQLiteBackend`."""

    conn: Connection
    location: str
    max_questions: int

    if TYPE_CHECKING:  # defined by SQLiteBackend
        def _writable(self) -> None: ...
        def fingerprint(self) -> dict[str, Any] | None: ...
        def stored(self, paths: Sequence[str]) -> dict[str, Stored]: ...

    def apply(self, changes: Sequence[Change], fingerprint_id: str | None = None) -> Applied:
        """Apply planned changes in ONE transaction. A change whose
        ``expected`` state is no longer what the file holds is not applied
        and comes back in ``stale``. Vectors are refused (EmbedderChangedError,
        nothing written) when the file's embedder is no longer
        ``fingerprint_id`` (another process re-embedded it)."""
        self._writable()
        out = Applied()
        with bulk_writes(self.conn, len(changes) >= BULK_CHANGES), transaction(self.conn):
            if any(c.writes_vectors for c in changes):
                self._check_fingerprint(fingerprint_id)
            current = self.stored([c.path for c in changes])
            rebuilding = _vectors.stage_exists(self.conn)
            pending = PendingRows()
            for change in changes:
                now = current.get(change.path)
                if now != change.expected:
                    out.stale.append(change.path)
                    continue
                doc_id = self._apply_one(change, now, out, pending)
                if rebuilding and doc_id is not None:
                    # A reembed is staging vectors: what it staged for this
                    # document no longer matches; it re-stages it.
                    _vectors.stage_clear_document(self.conn, doc_id)
            pending.flush(self.conn)
        return out

    def _check_fingerprint(self, writer: str | None) -> None:
        stored = self.fingerprint()
        now = fingerprint_id(stored) if stored else "no embedder"
        if now != writer:
            raise EmbedderChangedError(
                f"{self.location} is now embedded with {now}, not {writer} (another process "
                "re-embedded it); nothing was written. Reopen the store.")

    def _apply_one(self, change: Change, now: Stored | None, out: Applied,
                   pending: PendingRows) -> int | None:
        """Returns the document key written (None when nothing was). Vectors,
        questions, chunks and hash rows go to ``pending``; slots to free are
        freed now. A new document's id was never used (AUTOINCREMENT), so it
        has nothing to free."""
        conn = self.conn
        if change.delete:
            if now is not None:
                _vectors.delete_document(conn, now.key, self.max_questions)
                conn.execute("DELETE FROM documents WHERE id = ?", (now.key,))
                out.deleted.append(change.path)
            return None
        doc = change.document
        if doc is not None:
            doc_id = self._write_document(doc, now, pending)
            if now is None:
                out.added.append(change.path)
            elif now.content_hash != doc.content_hash():
                out.updated.append(change.path)
                if (now.topic, now.doc_type) != (doc.topic, doc.doc_type):
                    _vectors.retag(conn, doc_id, doc.topic, doc.doc_type)
            topic, doc_type = doc.topic, doc.doc_type
        elif now is not None:
            doc_id, topic, doc_type = now.key, now.topic, now.doc_type
            out.derived.append(change.path)
        else:
            return None  # derived data for a document that does not exist
        fresh = now is None
        if change.doc_vector is not None:
            if not fresh:
                _vectors.delete_slots(conn, doc_id, [0])
            pending.vector(doc_id, 0, topic, doc_type, _vectors.blob(change.doc_vector))
            pending.mark(doc_id, DOC_VECTOR, change.vector_hash, change.vector_model, OK, None)
        if change.questions is not None or change.drop_questions:
            self._replace_questions(doc_id, topic, doc_type, change, pending, fresh)
        if change.chunks is not None or change.drop_chunks:
            self._replace_chunks(doc_id, topic, doc_type, change, pending, fresh)
        return doc_id

    def _replace_chunks(self, doc_id: int, topic: str, doc_type: str, change: Change,
                        pending: PendingRows, fresh: bool) -> None:
        if not fresh:
            _vectors.delete_slots(self.conn, doc_id, _vectors.chunk_slots(self.conn, doc_id))
            self.conn.execute("DELETE FROM document_chunks WHERE doc_id = ?", (doc_id,))
        new = change.chunks
        if new is None or not new.vectors:
            pending.unmark(self.conn, doc_id, (CHUNK_VECTORS,))
            return
        for n, (span, vector) in enumerate(zip(new.spans, new.vectors, strict=True)):
            pending.chunk(doc_id, n, span[0], span[1])
            pending.vector(doc_id, _vectors.CHUNK_SLOT + n, topic, doc_type,
                           _vectors.blob(vector))
        pending.mark(doc_id, CHUNK_VECTORS, new.content_hash, change.vector_model, OK, None)

    def _write_document(self, doc: Document, now: Stored | None, pending: PendingRows) -> int:
        chash = doc.content_hash()
        tags = json.dumps(doc.tags, ensure_ascii=False)
        values = (doc.title, tags, doc.body, doc.topic, doc.doc_type, doc.created, doc.updated,
                  chash, json.dumps(doc.extra, ensure_ascii=False, default=str))  # order kept
        if now is None:
            cur = self.conn.execute(
                "INSERT INTO documents (title, tags, body, topic, doc_type, created, updated, "
                "content_hash, extra, path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, doc.path))
            doc_id = int(cur.lastrowid)
            pending.document_text(doc_id, doc.title, doc.tags, tags, doc.body)  # FTS, tag rows
            return doc_id
        if now.content_hash != chash:  # the UPDATE triggers re-index it
            self.conn.execute(
                "UPDATE documents SET title = ?, tags = ?, body = ?, topic = ?, doc_type = ?, "
                "created = ?, updated = ?, content_hash = ?, extra = ? WHERE id = ?",
                (*values, now.key))
            pending.replace_tags(self.conn, now.key, doc.tags)
        return now.key

    def _replace_questions(self, doc_id: int, topic: str, doc_type: str, change: Change,
                           pending: PendingRows, fresh: bool) -> None:
        conn = self.conn
        new = change.questions
        texts = new.texts[:self.max_questions] if new is not None else []
        if not fresh:
            old = [s for s in _vectors.used_slots(conn, doc_id) if 0 < s < _vectors.CHUNK_SLOT]
            _vectors.delete_slots(conn, doc_id, sorted(set(old) | set(range(1, len(texts) + 1))))
            conn.execute("DELETE FROM hype_questions WHERE doc_id = ?", (doc_id,))
            conn.execute("DELETE FROM questions_fts WHERE rowid = ?", (doc_id,))
        if new is None:  # drop stale questions
            pending.unmark(conn, doc_id, (HYPE_QUESTIONS, HYPE_VECTORS))
            return
        for pos, (text, vector) in enumerate(zip(texts, new.vectors, strict=False), start=1):
            pending.question(doc_id, pos, text)
            pending.vector(doc_id, pos, topic, doc_type, _vectors.blob(vector))
        error = redact(new.error)[:_ERROR_CHARS] if new.error else None
        pending.mark(doc_id, HYPE_QUESTIONS, new.content_hash, new.llm_model, new.status, error)
        if texts:
            pending.mark(doc_id, HYPE_VECTORS, new.content_hash, change.vector_model, OK, None)
        else:
            pending.unmark(conn, doc_id, (HYPE_VECTORS,))

    def write_lock(self) -> Any:
        """Hold the write lock across planning and applying (the fallback for
        a batch that keeps losing races with other writers)."""
        self._writable()
        return transaction(self.conn)

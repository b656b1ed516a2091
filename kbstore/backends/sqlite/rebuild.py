"""Rebuilding every vector with another model (``kbstore reembed``) on
SQLite: new vectors are staged batch by batch while the old ones keep
serving; ONE transaction then swaps them in and re-stamps the embedder.
Every ``apply`` in between drops the staged rows of the documents it
touched (write.py). A mixin of :class:`~.backend.SQLiteBackend`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...model import CHUNK_VECTORS, DOC_VECTOR, HYPE_QUESTIONS, HYPE_VECTORS, OK, Chunks, Stored
from . import vectors as _vectors
from .connection import Connection, transaction


class RebuildStaging:
    """The ``rebuild_*`` methods of :class:`~.backend.SQLiteBackend`."""

    conn: Connection

    if TYPE_CHECKING:  # defined by SQLiteBackend
        def _writable(self) -> None: ...
        def _set_meta(self, key: str, value: Any) -> None: ...
        def stored(self, paths: Sequence[str]) -> dict[str, Stored]: ...

    def rebuild_begin(self, fingerprint_id: str) -> dict[int, dict[int, str]]:
        """Start (or resume) staging vectors for ``fingerprint_id``; returns
        what is staged already: doc key -> {slot: made-from hash}."""
        self._writable()
        with transaction(self.conn):
            _vectors.stage_create(self.conn, fingerprint_id)
            return _vectors.staged(self.conn)

    def rebuild_stage(self, items: Sequence[tuple[Stored, str, Any, list[Any], Chunks | None]],
                      fingerprint_id: str) -> int:
        """Stage (stored state, vector hash, doc vector, question vectors in
        position order, chunk vectors or None) per document, one transaction;
        a document's vectors are staged together, so a staged document
        vector means its chunks are staged too. Documents that changed since
        they were read are skipped. Returns documents staged."""
        self._writable()
        done = 0
        with transaction(self.conn):
            if not _vectors.stage_exists(self.conn):
                return 0  # another process finished (or aborted) the rebuild meanwhile
            current = {s.key: s for s in self.stored(self._paths_of([i[0].key for i in items]))
                       .values()}
            for stored, vhash, vector, qvectors, chunks in items:
                if current.get(stored.key) != stored:
                    continue
                _vectors.stage_clear_document(self.conn, stored.key)
                _vectors.stage_write(self.conn, stored.key, 0, vhash, fingerprint_id,
                                     _vectors.blob(vector))
                for pos, qvec in enumerate(qvectors, start=1):
                    _vectors.stage_write(self.conn, stored.key, pos, "", fingerprint_id,
                                         _vectors.blob(qvec))
                if chunks is not None:
                    for n, (span, cvec) in enumerate(zip(chunks.spans, chunks.vectors,
                                                         strict=True)):
                        _vectors.stage_write(self.conn, stored.key, _vectors.CHUNK_SLOT + n,
                                             chunks.content_hash, fingerprint_id,
                                             _vectors.blob(cvec), span)
                done += 1
        return done

    def _paths_of(self, keys: Sequence[int]) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT path FROM documents WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(keys)),))]

    def rebuild_finish(self, fingerprint: dict[str, Any], fingerprint_id: str) -> list[int]:
        """Swap the staged vectors in, in ONE transaction, if every document
        has staged vectors for its current content and questions (every
        ``apply`` meanwhile dropped the staged rows of what it touched).
        Otherwise nothing changes and the keys still to stage come back."""
        self._writable()
        with transaction(self.conn):
            if not _vectors.stage_exists(self.conn):
                # Another process swapped its rebuild in meanwhile: an empty
                # staging table, so every document is to stage again.
                _vectors.stage_create(self.conn, fingerprint_id)
            staged = _vectors.staged(self.conn)
            questions: dict[int, set[int]] = {}
            for doc_id, pos in self.conn.execute("SELECT doc_id, position FROM hype_questions"):
                questions.setdefault(int(doc_id), set()).add(int(pos))
            ids = [int(r[0]) for r in self.conn.execute("SELECT id FROM documents ORDER BY id")]
            missing = [k for k in ids if 0 not in staged.get(k, {})
                       or {s for s in staged[k] if 0 < s < _vectors.CHUNK_SLOT}
                       != questions.get(k, set())]
            if missing:
                return missing
            made_from = {k: staged[k][0] for k in ids}
            chunked = _vectors.stage_swap(self.conn, _vectors.check_dim(fingerprint.get("dim")))
            for key in ids:
                self._mark(key, DOC_VECTOR, made_from[key], fingerprint_id)
            self.conn.execute("DELETE FROM derived WHERE kind = ?", (CHUNK_VECTORS,))
            for key, chash in chunked.items():
                self._mark(key, CHUNK_VECTORS, chash, fingerprint_id)
            self.conn.execute("DELETE FROM derived WHERE kind = ?", (HYPE_VECTORS,))
            self.conn.execute(
                "INSERT INTO derived (doc_id, kind, content_hash, model) SELECT doc_id, ?, "
                "content_hash, ? FROM derived WHERE kind = ? AND doc_id IN "
                "(SELECT DISTINCT doc_id FROM hype_questions)",
                (HYPE_VECTORS, fingerprint_id, HYPE_QUESTIONS))
            self._set_meta("embedder", fingerprint)
        return []

    def rebuild_abort(self) -> None:
        self._writable()
        with transaction(self.conn):
            _vectors.stage_drop(self.conn)

    def _mark(self, doc_id: int, kind: str, content_hash: str, model: str,
              status: str = OK, error: str | None = None) -> None:
        self.conn.execute(
            "INSERT INTO derived (doc_id, kind, content_hash, model, status, error) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (doc_id, kind) DO UPDATE SET "
            "content_hash = excluded.content_hash, model = excluded.model, "
            "status = excluded.status, error = excluded.error, "
            "made_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            (doc_id, kind, content_hash, model, status, error))

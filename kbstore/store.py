"""KnowledgeStore: the public entry point (open, upsert, import, search)."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import db as _db
from . import schema
from .embed import (
    Embedder,
    embedder_from_fingerprint,
    embedding_text,
    fingerprint_id,
    get_embedder,
    same_model,
)
from .errors import EmbedderMismatchError, InvalidDocumentError
from .ingest import Document, Skipped, make_document, parse_file, scan_workspace
from .search import Hit, build_params, explain_row, make_snippet, query_terms, search_sql

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("kbstore")
SLOTS = schema.VECTOR_SLOTS
BATCH_SIZE = 64
Progress = Callable[[int], None]  # called with the number of documents just handled


def text_hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def doc_vector_hash(doc: Document) -> str:
    return text_hash(embedding_text(doc.title, doc.tags, doc.body))


def hype_hash(doc: Document) -> str:
    return text_hash(doc.title, doc.body)


@dataclass
class ImportReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    embedded: int = 0          # document vectors computed
    hype_generated: int = 0    # documents whose questions the LLM wrote
    hype_pending: int = 0      # documents whose HyPE failed and waits for a retry
    skipped: list[Skipped] = field(default_factory=list)

    def add(self, other: ImportReport) -> None:
        for name in ("added", "updated", "unchanged", "deleted", "embedded", "hype_generated",
                     "hype_pending"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.skipped += other.skipped

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "skipped"}
        data["skipped"] = [{"path": s.path, "reason": s.reason} for s in self.skipped]
        return data


def _resolve_embedder(embedder: Embedder | str | None, stored: dict[str, Any] | None,
                      options: dict[str, Any]) -> Embedder:
    if embedder is None:
        if stored is not None:
            return embedder_from_fingerprint(stored, **options)
        embedder = "nomic"
    if isinstance(embedder, str):
        return get_embedder(embedder, **options)
    return embedder


class KnowledgeStore:
    """An agent's knowledge base in one SQLite file.

    Use :meth:`open`; the store is a context manager. One store holds one
    connection and is meant for one thread at a time.
    """

    def __init__(self, conn: Any, path: Path, embedder: Embedder, hype: Any) -> None:
        from .search import DEFAULTS

        self.conn = conn
        self.path = path
        self.embedder = embedder
        self.hype = hype  # kbstore.hype.HypeConfig
        # This database's fusion defaults (meta 'fusion', written at init);
        # keys the code no longer knows are ignored.
        stored = schema.get_meta(conn, "fusion") or {}
        self.search_defaults = {k: v for k, v in stored.items() if k in DEFAULTS}

    # -- lifecycle ---------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], embedder: Embedder | str | None = None, *,
             hype: bool | None = None, hype_model: str | None = None,
             binding: str | None = None, **embedder_options: Any) -> KnowledgeStore:
        """Open (creating and migrating if needed) the store at ``path``.

        ``embedder`` is an Embedder or a name ('nomic', 'minilm', 'fake'); by
        default the one the database was created with, else 'nomic'. A
        different model than the stored fingerprint is refused.
        """
        from .hype import HypeConfig

        conn = _db.connect(path, binding_name=binding)
        try:
            schema.ensure_schema(conn)
            stored = schema.get_meta(conn, "embedder")
            resolved = _resolve_embedder(embedder, stored, embedder_options)
            if stored is None:
                cls._initialize(conn, resolved)
            elif not same_model(stored, resolved.fingerprint()):
                raise EmbedderMismatchError(
                    f"{path} was embedded with {fingerprint_id(stored)}, not "
                    f"{fingerprint_id(resolved.fingerprint())}; open it with its own embedder "
                    f"or rebuild every vector with `kbstore reembed --db {path} "
                    f"--embedder {resolved.name}`")
        except BaseException:
            conn.close()
            raise
        return cls(conn, Path(path), resolved, HypeConfig.resolve(hype, hype_model))

    @staticmethod
    def _initialize(conn: Any, embedder: Embedder) -> None:
        with _db.transaction(conn):
            if schema.get_meta(conn, "embedder") is not None:
                return  # another process initialised it meanwhile
            schema.set_meta(conn, "embedder", embedder.fingerprint())
            from .search import DEFAULTS

            schema.set_meta(conn, "fusion", DEFAULTS)
            schema.create_vector_table(conn, embedder.dim)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> KnowledgeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------

    _DOC_COLUMNS = "id, path, title, body, tags, topic, doc_type, created, updated, content_hash"

    def _row_to_doc(self, row: Sequence[Any]) -> Document:
        import json

        return Document(path=row[1], title=row[2], body=row[3], tags=json.loads(row[4]),
                        topic=row[5], doc_type=row[6], created=row[7], updated=row[8])

    def get(self, path: str) -> Document | None:
        row = self.conn.execute(
            f"SELECT {self._DOC_COLUMNS} FROM documents WHERE path = ?", (path,)).fetchone()
        return None if row is None else self._row_to_doc(row)

    def paths(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT path FROM documents ORDER BY path")]

    def __len__(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM documents").fetchone()[0])

    # -- writing -----------------------------------------------------------

    def upsert(self, path: str, *, title: str, body: str, tags: Sequence[str] | str = (),
               topic: str | None = None, doc_type: str | None = None, created: Any = None,
               updated: Any = None) -> str:
        """Store one document; returns 'added', 'updated' or 'unchanged'.
        topic/doc_type are derived from the path when omitted."""
        doc = make_document(path, title=title, body=body, tags=tags, topic=topic,
                            doc_type=doc_type, created=created, updated=updated)
        report = self.upsert_many([doc])
        return "added" if report.added else "updated" if report.updated else "unchanged"

    def upsert_many(self, docs: Iterable[Document], *, batch_size: int = BATCH_SIZE,
                    progress: Progress | None = None) -> ImportReport:
        """Store documents in batches; each batch (documents, vectors, HyPE,
        hashes) is one transaction, so a failure loses only that batch."""
        from .writer import batches, write_batch

        report = ImportReport()
        for batch in batches(docs, batch_size):
            report.add(write_batch(self, batch))
            if progress:
                progress(len(batch))
        return report

    def delete(self, path: str) -> bool:
        """Remove a document and everything derived from it."""
        with _db.transaction(self.conn):
            return self._delete_ids(self._ids_for([path])) > 0

    def _ids_for(self, paths: Sequence[str]) -> list[int]:
        ids: list[int] = []
        for path in paths:
            row = self.conn.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()
            if row:
                ids.append(int(row[0]))
        return ids

    def _delete_vectors(self, doc_ids: Sequence[int]) -> None:
        # vec0 rows have no foreign key: delete the ids the document owns
        # (vector_data rows go by cascade with the document).
        for doc_id in doc_ids:
            ids = [(r[0],) for r in self.conn.execute(
                "SELECT vector_id FROM vector_data WHERE doc_id = ?", (doc_id,))]
            self.conn.executemany("DELETE FROM vectors WHERE vector_id = ?", ids)

    def _delete_ids(self, doc_ids: Sequence[int]) -> int:
        """Inside a transaction: delete documents; FTS rows, tags, questions and
        hashes follow by trigger/cascade, vec0 rows explicitly."""
        self._delete_vectors(doc_ids)
        self.conn.executemany("DELETE FROM documents WHERE id = ?", [(i,) for i in doc_ids])
        return len(doc_ids)

    def import_directory(self, workspace: str | os.PathLike[str], *,
                         batch_size: int = BATCH_SIZE, progress: Progress | None = None,
                         delete_missing: bool = True) -> ImportReport:
        """Reconcile the store with a picobot workspace by content hash.

        New and changed files are (re)embedded, unchanged ones cost nothing,
        files gone from disk are deleted everywhere, unreadable files are
        skipped with a reason (and their stored copy, if any, is kept).
        """
        report = ImportReport()
        seen: set[str] = set()

        def documents() -> Iterable[Document]:
            for rel, file, reason in scan_workspace(workspace):
                seen.add(rel)
                if reason or file is None:
                    report.skipped.append(Skipped(rel, reason))
                    log.warning("skipped %s: %s", rel, reason)
                    continue
                try:
                    yield parse_file(file, rel)
                except (InvalidDocumentError, OSError) as exc:
                    report.skipped.append(Skipped(rel, str(exc)))
                    log.warning("skipped %s: %s", rel, exc)

        report.add(self.upsert_many(documents(), batch_size=batch_size, progress=progress))
        if delete_missing:
            gone = [p for p in self.paths() if p not in seen]
            for start in range(0, len(gone), batch_size):
                with _db.transaction(self.conn):  # ids resolved under the write lock
                    ids = self._ids_for(gone[start:start + batch_size])
                    report.deleted += self._delete_ids(ids)
        return report

    # -- searching ---------------------------------------------------------

    def search(self, query: str, *, topic: str | None = None, limit: int = 10,
               explain: bool = False, query_vector: np.ndarray | bytes | list[float] | None = None,
               now: str | None = None, **settings: Any) -> list[Hit]:
        """Hybrid search; see kbstore/sql/search.sql for the ranking.

        ``settings`` override fusion parameters (fusion='rrf'|'convex', k_rrf,
        w_fm/w_fts/w_vec, boosts, half_life_days, min_similarity, ...).
        """
        if query_vector is None and isinstance(query, str) and query.strip():
            query_vector = self.embedder.embed_queries([query])[0]
        params = build_params(query, query_vector, topic=topic, limit=limit, now=now,
                              **{**self.search_defaults, **settings})
        if params["qvec"] is None:  # no vector side: an empty KNN
            params["qvec"] = bytes(4 * self.embedder.dim)  # float32 zeros
            params["vec_k_doc"] = params["vec_k_hype"] = 0
        # One read snapshot for the ranking and the snippets' bodies: with a
        # writer committing in between, a hit's title and snippet could
        # otherwise come from two versions of the document.
        snapshot = not self.conn.in_transaction
        if snapshot:
            self.conn.execute("BEGIN")
        try:
            cursor = self.conn.execute(search_sql(), params)
            columns = [c[0] for c in cursor.description]
            rows = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
            return self._hits(rows, query, explain)
        finally:
            if snapshot and self.conn.in_transaction:
                self.conn.execute("COMMIT")

    def _hits(self, rows: list[dict[str, Any]], query: str, explain: bool) -> list[Hit]:
        import json

        terms = query_terms(query)
        hits = []
        for row in rows:
            body = self.conn.execute("SELECT body FROM documents WHERE id = ?",
                                     (row["doc_id"],)).fetchone()[0]
            hits.append(Hit(path=row["path"], title=row["title"], tags=json.loads(row["tags"]),
                            doc_type=row["doc_type"], topic=row["topic"],
                            updated=row["updated"], score=float(row["score"]),
                            snippet=make_snippet(body, terms),
                            explain=explain_row(row) if explain else None))
        return hits

    # -- maintenance -------------------------------------------------------

    def status(self) -> dict[str, Any]:
        conn = self.conn
        current = schema.state(conn)

        def count(sql: str, *args: Any) -> int:
            return int(conn.execute(sql, args).fetchone()[0])

        return {
            "path": str(self.path),
            "schema_version": current.version,
            "pending_migrations": current.pending,
            "documents": count("SELECT count(*) FROM documents"),
            "vectors": count("SELECT count(*) FROM vectors"),
            "doc_vectors": count("SELECT count(*) FROM derived WHERE kind = 'doc_vector'"),
            "hype_questions": count("SELECT count(*) FROM hype_questions"),
            "hype_pending": count("SELECT count(*) FROM derived WHERE kind = 'hype_questions' "
                                  "AND status = 'pending'"),
            "embedder": schema.get_meta(conn, "embedder"),
            "file_bytes": sum(os.path.getsize(p) for p in
                              (str(self.path), f"{self.path}-wal") if os.path.exists(p)),
        }

    def reembed(self, embedder: Embedder | str, *, batch_size: int = BATCH_SIZE,
                progress: Progress | None = None, **options: Any) -> int:
        """Rebuild every vector with another embedder (and the vec0 table's
        dimension). Documents and questions are kept. Returns documents done."""
        from .writer import embed_existing

        new = get_embedder(embedder, **options) if isinstance(embedder, str) else embedder
        with _db.transaction(self.conn):
            schema.create_vector_table(self.conn, new.dim)
            self.conn.execute("DELETE FROM derived WHERE kind IN ('doc_vector', 'hype_vectors')")
            schema.set_meta(self.conn, "embedder", new.fingerprint())
        self.embedder = new
        return embed_existing(self, batch_size=batch_size, progress=progress)

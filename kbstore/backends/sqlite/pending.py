"""The rows one ``apply`` writes besides the documents themselves, collected
per table and written with one ``executemany`` per table just before its
transaction commits.

Per document, an import used to make ~30 ``execute`` calls (each vector into
vec0 and vector_data, each question, each hash row, plus deletes of slots a
new document cannot have). Collected here, a batch costs a handful of calls
whatever its size; the triggers (FTS, tags) still run per row, inside SQLite.

Order within a change does not matter: the slots a change frees are deleted
at once, before any pending row is written, and no two changes of one apply
touch the same document.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import vectors as _vectors
from .connection import Connection

_UPSERT_DERIVED = (
    "INSERT INTO derived (doc_id, kind, content_hash, model, status, error) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (doc_id, kind) DO UPDATE SET "
    "content_hash = excluded.content_hash, model = excluded.model, "
    "status = excluded.status, error = excluded.error, "
    "made_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')")


@dataclass
class PendingRows:
    # (vector_id, kind, doc_id, topic, doc_type, float32 blob)
    vectors: list[tuple[int, str, int, str, str, bytes]] = field(default_factory=list)
    questions: list[tuple[int, int, str]] = field(default_factory=list)
    chunks: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    # (doc_id, kind) -> the row; the last mark of a key wins
    marks: dict[tuple[int, str], tuple[int, str, str, str, str, str | None]] = field(
        default_factory=dict)

    def vector(self, doc_id: int, slot: int, topic: str, doc_type: str,
               vector_blob: bytes) -> None:
        self.vectors.append((_vectors.vector_id(doc_id, slot), _vectors.kind_of(slot), doc_id,
                             topic, doc_type, vector_blob))

    def question(self, doc_id: int, position: int, text: str) -> None:
        self.questions.append((doc_id, position, text))

    def chunk(self, doc_id: int, position: int, start: int, end: int) -> None:
        self.chunks.append((doc_id, position,
                            _vectors.vector_id(doc_id, _vectors.CHUNK_SLOT + position),
                            start, end))

    def mark(self, doc_id: int, kind: str, content_hash: str, model: str, status: str,
             error: str | None) -> None:
        self.marks[(doc_id, kind)] = (doc_id, kind, content_hash, model, status, error)

    def unmark(self, conn: Connection, doc_id: int, kinds: tuple[str, ...]) -> None:
        """Hash rows removed now (and any pending mark of them forgotten)."""
        for kind in kinds:
            self.marks.pop((doc_id, kind), None)
        conn.executemany("DELETE FROM derived WHERE doc_id = ? AND kind = ?",
                         [(doc_id, kind) for kind in kinds])

    def flush(self, conn: Connection) -> None:
        if self.chunks:
            conn.executemany("INSERT INTO document_chunks (doc_id, position, vector_id, "
                             "start_char, end_char) VALUES (?, ?, ?, ?, ?)", self.chunks)
        if self.questions:
            conn.executemany("INSERT INTO hype_questions (doc_id, position, question) "
                             "VALUES (?, ?, ?)", self.questions)
        if self.vectors:
            _vectors.insert_many(conn, self.vectors)
        if self.marks:
            conn.executemany(_UPSERT_DERIVED, list(self.marks.values()))
        self.vectors, self.questions, self.chunks, self.marks = [], [], [], {}

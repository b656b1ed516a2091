"""The rows one ``apply`` writes besides the documents themselves, collected
per table and written with one ``executemany`` per table just before its
transaction commits.

Per document, an import used to make ~30 ``execute`` calls (each vector into
vec0 and vector_data, each question, each hash row, plus deletes of slots a
new document cannot have). Collected here, a batch costs a handful of calls
whatever its size. A new document's FTS and tag rows, and each document's
questions_fts row (its questions joined by a newline, in position order),
are written here too, once per document: the per-row triggers that did it
cost more than everything else in an import (migration 0004).

Order within a change does not matter: the slots a change frees are deleted
at once, before any pending row is written, and no two changes of one apply
touch the same document.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model import tag_keys
from . import vectors as _vectors
from .connection import Connection

_UPSERT_DERIVED = (
    "INSERT INTO derived (doc_id, kind, content_hash, model, status, error) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (doc_id, kind) DO UPDATE SET "
    "content_hash = excluded.content_hash, model = excluded.model, "
    "status = excluded.status, error = excluded.error, "
    "made_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')")


_INSERT_DOCUMENTS_FTS = ("INSERT INTO documents_fts (rowid, title, tags, body) "
                         "VALUES (?, ?, ?, ?)")
def tag_rows(doc_id: int, tags: list[str]) -> list[tuple[str, int]]:
    """The document_tags rows of a document: one per distinct non-blank key."""
    return [(key, doc_id) for key in tag_keys(tags)]


@dataclass
class PendingRows:
    # (vector_id, kind, doc_id, topic, doc_type, float32 blob)
    vectors: list[tuple[int, str, int, str, str, bytes]] = field(default_factory=list)
    questions: list[tuple[int, int, str]] = field(default_factory=list)
    # (doc_id, title, tags JSON, body) of documents inserted by this apply
    texts: list[tuple[int, str, str, str]] = field(default_factory=list)
    tags: list[tuple[str, int]] = field(default_factory=list)
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

    def document_text(self, doc_id: int, title: str, tags: list[str], tags_json: str,
                      body: str) -> None:
        """A new document's FTS and tag rows (updates keep their FTS triggers)."""
        self.texts.append((doc_id, title, tags_json, body))
        self.tags += tag_rows(doc_id, tags)

    def replace_tags(self, conn: Connection, doc_id: int, tags: list[str]) -> None:
        """An updated document's tag rows, by tag_key: the UPDATE trigger (kept
        for edits in the sqlite3 shell) lower-cases ASCII letters only."""
        conn.execute("DELETE FROM document_tags WHERE doc_id = ?", (doc_id,))
        self.tags += tag_rows(doc_id, tags)

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
        if self.texts:
            conn.executemany(_INSERT_DOCUMENTS_FTS, self.texts)
            conn.executemany("INSERT INTO titles_fts (rowid, title) VALUES (?, ?)",
                             [(t[0], t[1]) for t in self.texts])
        if self.tags:
            conn.executemany("INSERT OR IGNORE INTO document_tags (tag, doc_id) VALUES (?, ?)",
                             self.tags)
        if self.chunks:
            conn.executemany("INSERT INTO document_chunks (doc_id, position, vector_id, "
                             "start_char, end_char) VALUES (?, ?, ?, ?, ?)", self.chunks)
        if self.questions:
            conn.executemany("INSERT INTO hype_questions (doc_id, position, question) "
                             "VALUES (?, ?, ?)", self.questions)
            _insert_question_texts(conn, question_texts(self.questions))
        if self.vectors:
            _vectors.insert_many(conn, self.vectors)
        if self.marks:
            conn.executemany(_UPSERT_DERIVED, list(self.marks.values()))
        self.vectors, self.questions, self.chunks, self.marks = [], [], [], {}
        self.texts, self.tags = [], []


def _insert_question_texts(conn: Connection, rows: list[tuple[int, str]]) -> None:
    """questions_fts rows of documents whose old row was deleted (or that
    never had one). A row still there for such an id (left by damage: the
    old per-row trigger deleted first) is replaced, as the trigger did."""
    insert = "INSERT INTO questions_fts (rowid, questions) VALUES (?, ?)"
    try:
        conn.executemany(insert, rows)
    except Exception:  # the binding's IntegrityError: that rowid is taken
        conn.executemany("DELETE FROM questions_fts WHERE rowid = ?", [(r[0],) for r in rows])
        conn.executemany(insert, rows)


def question_texts(questions: list[tuple[int, int, str]]) -> list[tuple[int, str]]:
    """(doc_id, its questions joined by a newline in position order): the
    questions_fts row of each document in ``questions``."""
    by_doc: dict[int, list[tuple[int, str]]] = {}
    for doc_id, position, text in questions:
        by_doc.setdefault(doc_id, []).append((position, text))
    return [(doc_id, "\n".join(text for _, text in sorted(rows)))
            for doc_id, rows in by_doc.items()]

"""The full-text vectors of the PostgreSQL backend, from text folded in Python.

to_tsvector lower-cases with the database's LC_CTYPE (ASCII only under "C",
no final sigma under C.UTF-8); the backend feeds it text folded with
kbstore.model.fts_fold, the rule of the query's words (migration 0004). One
place makes the vectors: the write path, the migration's rewrite, doctor's
check and --fix all feed :func:`document_parts` to document_vector() and
title_vector() (SQL functions of migrations 0004 and 0001).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ...model import fts_fold

# Marks the transaction as kbstore's: the documents trigger then leaves the
# vectors it is given (an edit in psql gets them from the raw text).
FOLDED = "SELECT set_config('kbstore.folded', 'on', true)"

_REFOLD = """
UPDATE documents AS d SET fts = document_vector(u.title, u.tags, u.body),
                          title_fts = title_vector(u.title)
FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[]) AS u(id, title, tags, body)
WHERE d.id = u.id
"""
_STALE = """
SELECT d.id FROM documents AS d
JOIN unnest(%s::bigint[], %s::text[], %s::text[], %s::text[]) AS u(id, title, tags, body)
  ON d.id = u.id
WHERE d.fts IS DISTINCT FROM document_vector(u.title, u.tags, u.body)
   OR d.title_fts IS DISTINCT FROM title_vector(u.title)
"""
BATCH = 500


def document_parts(title: str, tags: Sequence[Any], body: str) -> tuple[str, str, str]:
    """The folded title, tags and body to_tsvector reads (the tags as their
    JSON text, as the schema-v1 column read them)."""
    return (fts_fold(title), fts_fold(json.dumps(list(tags), ensure_ascii=False)),
            fts_fold(body))


def _columns(rows: list[tuple[int, str, Any, str]]) -> list[list[Any]]:
    parts = [(key, *document_parts(title, tags, body)) for key, title, tags, body in rows]
    return [list(col) for col in zip(*parts, strict=True)] if parts else [[], [], [], []]


_FIRST_ID = -(2 ** 63)  # below every bigint id: the first keyset page


def _batches(conn: Any, ids: Iterable[int] | None) -> Iterable[list[tuple[int, str, Any, str]]]:
    """The documents (all, or these ids) BATCH at a time, in id order: each
    page is read by its own statement, so memory stays bounded by BATCH
    documents whatever the size of the knowledge base."""
    sql = "SELECT id, title, tags, body FROM documents"
    if ids is not None:
        wanted = sorted(set(ids))
        pages: Iterable[list[Any]] = (conn.execute(
            sql + " WHERE id = ANY(%s) ORDER BY id", (wanted[start:start + BATCH],)).fetchall()
            for start in range(0, len(wanted), BATCH))
    else:
        pages = _keyset(conn, sql + " WHERE id > %s ORDER BY id LIMIT %s", (_FIRST_ID,))
    for rows in pages:
        if rows:
            yield [(int(r[0]), r[1], r[2], r[3]) for r in rows]


def _keyset(conn: Any, sql: str, first: tuple[Any, ...], fixed: tuple[Any, ...] = ()
            ) -> Iterable[list[Any]]:
    """Pages of ``sql`` (``... WHERE key > %s ... ORDER BY key LIMIT %s``,
    after the ``fixed`` parameters), each after the last key of the one
    before; the key is the leading ``len(first)`` columns."""
    after = first
    while True:
        rows = conn.execute(sql, (*fixed, *after, BATCH)).fetchall()
        if not rows:
            return
        yield rows
        if len(rows) < BATCH:
            return
        after = tuple(rows[-1][:len(first)])


def _questions(conn: Any, ids: Iterable[int] | None) -> Iterable[list[Any]]:
    """(doc_id, position, question, folded) of the questions of these
    documents (all: None), BATCH at a time."""
    sql = "SELECT doc_id, position, question, folded FROM hype_questions"
    if ids is None:
        yield from _keyset(conn, sql + " WHERE (doc_id, position) > (%s, %s) "
                           "ORDER BY doc_id, position LIMIT %s", (_FIRST_ID, 0))
        return
    wanted = sorted(set(ids))
    for start in range(0, len(wanted), BATCH):
        chunk = wanted[start:start + BATCH]
        yield from _keyset(conn, sql + " WHERE doc_id = ANY(%s) AND (doc_id, position) > "
                           "(%s, %s) ORDER BY doc_id, position LIMIT %s",
                           (_FIRST_ID, 0), fixed=(chunk,))


def unfolded_documents(conn: Any) -> set[int]:
    """Documents whose stored vectors are not those of their folded text
    (edited in psql, or written before migration 0004)."""
    found: set[int] = set()
    for rows in _batches(conn, None):
        found |= {int(r[0]) for r in conn.execute(_STALE, _columns(rows)).fetchall()}
    return found


def unfolded_questions(conn: Any) -> set[int]:
    """Documents with a question whose folded text is not kbstore's folding."""
    return {int(r[0]) for rows in _questions(conn, None) for r in rows
            if r[3] != fts_fold(r[2])}


def refold(conn: Any, ids: Iterable[int] | None = None) -> int:
    """Rewrite the vectors of these documents (all: None) and the folded text
    of their questions; the statement triggers re-index what changed. Runs
    inside the caller's transaction."""
    conn.execute(FOLDED)
    done = 0
    for rows in _batches(conn, ids):
        conn.execute(_REFOLD, _columns(rows))
        done += len(rows)
    for rows in _questions(conn, ids):
        stale = [(int(d), int(p), fts_fold(q)) for d, p, q, folded in rows
                 if folded != fts_fold(q)]
        if stale:
            conn.execute("UPDATE hype_questions AS q SET folded = u.folded FROM unnest("
                         "%s::bigint[], %s::smallint[], %s::text[]) AS u(doc_id, position, "
                         "folded) WHERE q.doc_id = u.doc_id AND q.position = u.position",
                         [list(col) for col in zip(*stale, strict=True)])
    return done

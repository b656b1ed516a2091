"""Reading a PostgreSQL knowledge base: documents, their stored state and
vectors. Each function is one statement (one snapshot) unless it says
otherwise; paths sort bytewise (COLLATE "C"), as SQLite sorts them."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

from ...model import Derived, Document, Stored

DOC_COLUMNS = "d.id, d.path, d.title, d.body, d.tags, d.topic, d.doc_type, d.created, " \
              "d.updated, d.extra"
# The derived rows of document d, as one JSON array of [kind, hash, model, status].
DERIVED_OF = ("(SELECT coalesce(json_agg(json_build_array(x.kind, x.content_hash, x.model, "
              "x.status)), '[]'::json) FROM derived AS x WHERE x.doc_id = d.id)")


def document(row: Sequence[Any]) -> Document:
    return Document(path=row[1], title=row[2], body=row[3], tags=list(row[4]), topic=row[5],
                    doc_type=row[6], created=row[7], updated=row[8], extra=dict(row[9] or {}))


def _stored(key: Any, content_hash: str, topic: str, doc_type: str, derived: Any) -> Stored:
    made = {kind: Derived(chash, model, status) for kind, chash, model, status in derived}
    return Stored(int(key), content_hash, topic, doc_type, made)


def stored_state(conn: Any, paths: Sequence[str]) -> dict[str, Stored]:
    rows = conn.execute(
        f"SELECT d.path, d.id, d.content_hash, d.topic, d.doc_type, {DERIVED_OF} "
        "FROM documents AS d WHERE d.path = ANY(%s)", (list(paths),)).fetchall()
    return {r[0]: _stored(*r[1:]) for r in rows}


def get(conn: Any, path: str) -> Document | None:
    row = conn.execute(f"SELECT {DOC_COLUMNS} FROM documents AS d WHERE d.path = %s",
                       (path,)).fetchone()
    return None if row is None else document(row)


def list_documents(conn: Any, topic: str | None, limit: int | None,
                   recent: bool) -> list[Document]:
    order = ('coalesce(d.updated, d.created, \'\') COLLATE "C" DESC, d.path COLLATE "C" DESC'
             if recent else 'd.path COLLATE "C"')
    rows = conn.execute(
        f"SELECT {DOC_COLUMNS} FROM documents AS d WHERE %(topic)s::text IS NULL "
        f"OR d.topic = %(topic)s ORDER BY {order} LIMIT %(limit)s",
        {"topic": topic, "limit": limit}).fetchall()
    return [document(r) for r in rows]


def paths(conn: Any) -> list[str]:
    return [r[0] for r in conn.execute(
        'SELECT path FROM documents ORDER BY path COLLATE "C"').fetchall()]


def count(conn: Any) -> int:
    return int(conn.execute("SELECT count(*) FROM documents").fetchone()[0])


def questions(conn: Any, path: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT q.question FROM hype_questions AS q JOIN documents AS d ON d.id = q.doc_id "
        "WHERE d.path = %s ORDER BY q.position", (path,)).fetchall()]


def document_batch(conn: Any, after: int, size: int) -> list[tuple[Document, Stored]]:
    """Documents with key > ``after`` in key order, with their stored state."""
    rows = conn.execute(
        f"SELECT {DOC_COLUMNS}, d.content_hash, {DERIVED_OF} FROM documents AS d "
        "WHERE d.id > %s ORDER BY d.id LIMIT %s", (after, size)).fetchall()
    return [(document(r), _stored(r[0], r[10], r[5], r[6], r[11])) for r in rows]


def float_bytes(values: Any) -> bytes | None:
    return None if values is None else array("f", values).tobytes()


def vectors_of(conn: Any, path: str) -> tuple[bytes | None, list[bytes | None]]:
    """(document vector, question vectors in position order) as float32 bytes;
    a question without its vector gives None in its place."""
    rows = conn.execute(
        "SELECT 0, (SELECT v.embedding::real[] FROM vectors AS v "
        "           WHERE v.doc_id = d.id AND v.slot = 0) "
        "FROM documents AS d WHERE d.path = %(path)s "
        "UNION ALL "
        "SELECT q.position, v.embedding::real[] FROM documents AS d "
        "JOIN hype_questions AS q ON q.doc_id = d.id "
        "LEFT JOIN vectors AS v ON v.doc_id = d.id AND v.slot = q.position "
        "WHERE d.path = %(path)s ORDER BY 1", {"path": path}).fetchall()
    if not rows:
        return None, []
    return float_bytes(rows[0][1]), [float_bytes(r[1]) for r in rows[1:]]


def chunk_vectors_of(conn: Any, path: str) -> list[bytes | None]:
    """The document's chunk vectors (slot 32 + position) in position order as
    float32 bytes; None for a chunk without its vector."""
    rows = conn.execute(
        "SELECT v.embedding::real[] FROM documents AS d "
        "JOIN document_chunks AS c ON c.doc_id = d.id "
        "LEFT JOIN vectors AS v ON v.doc_id = d.id AND v.slot = 32 + c.position "
        "WHERE d.path = %(path)s ORDER BY c.position", {"path": path}).fetchall()
    return [float_bytes(r[0]) for r in rows]


def vector_dim(conn: Any) -> int | None:
    row = conn.execute(
        "SELECT nullif(a.atttypmod, -1) FROM pg_attribute AS a "
        "WHERE a.attrelid = 'vectors'::regclass AND a.attname = 'embedding'").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def schema_bytes(conn: Any, schema: str) -> int:
    return int(conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')", (schema,)).fetchone()[0])

"""Vectors in the SQLite file: sign bits in the vec0 table ``vectors`` (the
KNN prefilter) and float32 copies in the plain table ``vector_data`` (exact
rescoring, exports, rebuilding vec0 without re-embedding).

vector_id = doc_id * SLOTS + slot: slot 0 is the document vector, slots
1..MAX_QUESTIONS its HyPE questions (hype_questions.position). This encoding
lives here and in search.sql only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from .connection import Connection

TABLE = "vectors"
SLOTS = 32
MAX_QUESTIONS = SLOTS - 1
STAGING = "vector_data_next"   # a rebuild in progress (reembed): see stage/swap
# Shadow tables vec0 keeps for a table named `vectors` (left behind if the
# virtual table itself was removed by hand, they block re-creating it).
_SHADOW = re.compile(r"^vectors_(chunks|rowids|info|vector_chunks\d+|metadata\w*|auxiliary)$")


def blob(vector: Any) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype=np.float32).reshape(-1).tobytes()


def table_exists(conn: Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ? AND type = 'table'",
                        (TABLE,)).fetchone() is not None


def table_dim(conn: Connection) -> int | None:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (TABLE,)).fetchone()
    match = re.search(r"(?:float|bit)\[(\d+)\]", row[0] if row and row[0] else "")
    return int(match.group(1)) if match else None


def check_dim(dim: Any) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int) or not 8 <= dim <= 4096 or dim % 8:
        raise ValueError(f"vector dimension must be a multiple of 8 in 8..4096, got {dim!r}")
    return dim


def create_table(conn: Connection, dim: int) -> None:
    """(Re)create the empty vec0 table for ``dim``-dimensional vectors.

    vec0 holds each vector's sign bits for the KNN prefilter. ``kind``
    ('doc' | 'hype') is a partition key, so the document KNN scans only
    document vectors and one document's many HyPE vectors cannot crowd
    others out; topic and doc_type are metadata columns so a topic filter
    runs inside the KNN. chunk_size=4096 (the maximum): fewer per-chunk
    top-k merges per KNN (measured ~1.6x faster at k >= 200 over 700k
    vectors); with no float column in vec0, inserts stay fast at this size.
    """
    check_dim(dim)
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                ).fetchall():
        if _SHADOW.match(name):  # names from sqlite_master, matched to plain words
            conn.execute(f"DROP TABLE {name}")
    conn.execute(
        f"""CREATE VIRTUAL TABLE {TABLE} USING vec0(
            vector_id INTEGER PRIMARY KEY,
            kind TEXT PARTITION KEY,
            embedding_bits bit[{dim}],
            doc_id INTEGER,
            topic TEXT,
            doc_type TEXT,
            chunk_size=4096
        )""")  # dim is a validated integer, not user text


def insert(conn: Connection, doc_id: int, slot: int, topic: str, doc_type: str,
           vector_blob: bytes) -> None:
    """Write one vector (vec0 sign bits + float32 copy) into an EMPTY slot."""
    vector_id = doc_id * SLOTS + slot
    conn.execute(
        f"INSERT INTO {TABLE} (vector_id, kind, embedding_bits, doc_id, topic, doc_type)"
        " VALUES (?, ?, vec_quantize_binary(?), ?, ?, ?)",
        (vector_id, "doc" if slot == 0 else "hype", vector_blob, doc_id, topic, doc_type))
    conn.execute("INSERT OR REPLACE INTO vector_data (vector_id, doc_id, embedding) "
                 "VALUES (?, ?, ?)", (vector_id, doc_id, vector_blob))


def delete_slots(conn: Connection, doc_id: int, slots: Iterable[int]) -> None:
    """Free slots of a document in vec0 and vector_data. vec0 has no INSERT
    OR REPLACE (sqlite-vec #127): a slot is deleted, then inserted. Deleting
    an id vec0 does not hold is cheap (~9 us), so a slot is freed whether or
    not vector_data lists it (they can disagree after damage)."""
    ids = [(doc_id * SLOTS + s,) for s in slots]
    conn.executemany(f"DELETE FROM {TABLE} WHERE vector_id = ?", ids)
    conn.executemany("DELETE FROM vector_data WHERE vector_id = ?", ids)


def used_slots(conn: Connection, doc_id: int) -> list[int]:
    return [int(r[0]) - doc_id * SLOTS for r in conn.execute(
        "SELECT vector_id FROM vector_data WHERE doc_id = ?", (doc_id,))]


def delete_document(conn: Connection, doc_id: int, question_slots: int) -> None:
    """Every vector of a document: the slots vector_data lists, plus the
    document and question slots in case vec0 holds rows vector_data lost."""
    slots = set(used_slots(conn, doc_id)) | set(range(question_slots + 1))
    delete_slots(conn, doc_id, sorted(slots))


def retag(conn: Connection, doc_id: int, topic: str, doc_type: str) -> None:
    """vec0 metadata follows a document that moved topic or type."""
    ids = [(topic, doc_type, doc_id * SLOTS + s) for s in used_slots(conn, doc_id)]
    conn.executemany(f"UPDATE {TABLE} SET topic = ?, doc_type = ? WHERE vector_id = ?", ids)


def float_vector(conn: Connection, doc_id: int, slot: int) -> bytes | None:
    row = conn.execute("SELECT embedding FROM vector_data WHERE vector_id = ?",
                       (doc_id * SLOTS + slot,)).fetchone()
    return None if row is None else bytes(row[0])


def refill_from_floats(conn: Connection) -> int:
    """Rebuild every vec0 row from vector_data (no embedding): after the
    vec0 table was lost or recreated. Rows whose document is gone are
    skipped. Returns the vectors written."""
    rows = conn.execute(
        "SELECT v.vector_id, v.doc_id, v.embedding, d.topic, d.doc_type FROM vector_data v "
        "JOIN documents d ON d.id = v.doc_id").fetchall()
    conn.executemany(
        f"INSERT INTO {TABLE} (vector_id, kind, embedding_bits, doc_id, topic, doc_type) "
        "VALUES (?, ?, vec_quantize_binary(?), ?, ?, ?)",
        [(vid, "doc" if vid % SLOTS == 0 else "hype", emb, did, topic, dtype)
         for vid, did, emb, topic, dtype in rows])
    return len(rows)


# -- rebuilding every vector with another model (reembed) -------------------------------
# New vectors are staged in a plain table, batch by batch, while the old
# index keeps serving; one transaction then swaps them in. A crash while
# staging leaves the old state (plus a staging table the next run resumes).


def stage_create(conn: Connection, fingerprint_id: str) -> None:
    conn.execute(f"CREATE TABLE IF NOT EXISTS {STAGING} ("
                 "vector_id INTEGER PRIMARY KEY, doc_id INTEGER NOT NULL, "
                 "made_from TEXT NOT NULL, model TEXT NOT NULL, embedding BLOB NOT NULL)")
    conn.execute(f"DELETE FROM {STAGING} WHERE model <> ?", (fingerprint_id,))


def stage_exists(conn: Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                        (STAGING,)).fetchone() is not None


def stage_write(conn: Connection, doc_id: int, slot: int, made_from: str, model: str,
                vector_blob: bytes) -> None:
    conn.execute(f"INSERT OR REPLACE INTO {STAGING} (vector_id, doc_id, made_from, model, "
                 "embedding) VALUES (?, ?, ?, ?, ?)",
                 (doc_id * SLOTS + slot, doc_id, made_from, model, vector_blob))


def stage_clear_document(conn: Connection, doc_id: int) -> None:
    conn.execute(f"DELETE FROM {STAGING} WHERE doc_id = ?", (doc_id,))


def staged(conn: Connection) -> dict[int, dict[int, str]]:
    """doc_id -> {slot: made_from} of what is staged."""
    out: dict[int, dict[int, str]] = {}
    for vid, doc_id, made_from in conn.execute(
            f"SELECT vector_id, doc_id, made_from FROM {STAGING}"):
        out.setdefault(int(doc_id), {})[int(vid) - int(doc_id) * SLOTS] = made_from
    return out


def stage_swap(conn: Connection, dim: int) -> int:
    """Inside the caller's transaction: the staged vectors become THE vectors
    (vec0 recreated for ``dim``). Returns the vectors written."""
    create_table(conn, dim)
    conn.execute("DELETE FROM vector_data")
    conn.execute(f"INSERT INTO vector_data (vector_id, doc_id, embedding) "
                 f"SELECT s.vector_id, s.doc_id, s.embedding FROM {STAGING} s "
                 "JOIN documents d ON d.id = s.doc_id")
    conn.execute(f"DROP TABLE {STAGING}")
    return refill_from_floats(conn)


def stage_drop(conn: Connection) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {STAGING}")


def doc_ids_with_vectors(conn: Connection, ids: Sequence[int]) -> set[int]:
    return {int(r[0]) for r in conn.execute(
        "SELECT doc_id FROM vector_data WHERE vector_id IN (SELECT value * ? FROM json_each(?))",
        (SLOTS, _json(ids)))}


def _json(values: Sequence[Any]) -> str:
    import json

    return json.dumps(list(values))

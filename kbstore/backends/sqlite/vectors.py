"""Vectors in the SQLite file: sign bits in the vec0 table ``vectors`` (the
KNN prefilter of large files) and float32 copies in the plain table
``vector_data`` (exact rescoring, exports, rebuilding vec0 without
re-embedding), each row with its sign bits again (``bits``: the prefilter
of small and medium files, scanned through three partial indexes; schema v5).

Each vector has a *slot* within its document: 0 is the document vector,
1..MAX_QUESTIONS its HyPE questions (hype_questions.position), and
CHUNK_SLOT + n its chunk n (document_chunks.position; long documents only).
vector_id encodes (doc_id, slot) in two ranges, so the ids of files made
before chunks existed stay valid:

    doc and questions:  vector_id = doc_id * SLOTS + slot                (< CHUNK_BASE)
    chunk n:            vector_id = CHUNK_BASE + doc_id * MAX_CHUNKS + n

This encoding lives here only: search.sql reads the kind from vec0's
partition key and joins hype_questions / document_chunks by vector_id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ...chunks import MAX_CHUNKS
from .connection import Connection

TABLE = "vectors"
SLOTS = 32
MAX_QUESTIONS = SLOTS - 1
CHUNK_SLOT = SLOTS            # slot of chunk 0
CHUNK_BASE = 1 << 50          # above every doc/question id (doc ids < 2**45)
MAX_DOC_ID = CHUNK_BASE // SLOTS - 1
STAGING = "vector_data_next"   # a rebuild in progress (reembed): see stage/swap
# Shadow tables vec0 keeps for a table named `vectors` (left behind if the
# virtual table itself was removed by hand, they block re-creating it).
_SHADOW = re.compile(r"^vectors_(chunks|rowids|info|vector_chunks\d+|metadata\w*|auxiliary)$")


def vector_id(doc_id: int, slot: int) -> int:
    if slot < CHUNK_SLOT:
        return doc_id * SLOTS + slot
    return CHUNK_BASE + doc_id * MAX_CHUNKS + (slot - CHUNK_SLOT)


def owner(vid: int) -> tuple[int, int]:
    """(doc_id, slot) of a vector id."""
    if vid >= CHUNK_BASE:
        doc_id, n = divmod(vid - CHUNK_BASE, MAX_CHUNKS)
        return doc_id, CHUNK_SLOT + n
    return divmod(vid, SLOTS)


def kind_of(slot: int) -> str:
    """vec0's partition key for a slot."""
    return "doc" if slot == 0 else "hype" if slot < CHUNK_SLOT else "chunk"


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
    ('doc' | 'hype' | 'chunk') is a partition key, so each KNN scans one
    kind and one document's many HyPE or chunk vectors cannot crowd
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


_INSERT_BITS = (f"INSERT INTO {TABLE} (vector_id, kind, embedding_bits, doc_id, topic, doc_type)"
                " VALUES (?, ?, vec_bit(?), ?, ?, ?)")


def sign_bits(blobs: Sequence[bytes]) -> list[bytes]:
    """vec_quantize_binary of each float32 blob, for a whole batch in one
    numpy pass: bit i (LSB first within each byte) is set when component i
    is > 0. 12.3 -> 10.6 us a vec0 row (14k rows alone): the extension no
    longer parses and quantizes each float blob one SQL call at a time."""
    import numpy as np

    if not blobs:
        return []
    floats = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
    packed = np.packbits(floats > 0, axis=1, bitorder="little")
    return [row.tobytes() for row in packed]


def insert_many(conn: Connection, rows: Sequence[tuple[int, str, int, str, str, bytes]]) -> None:
    """Write vectors, (vector_id, kind, doc_id, topic, doc_type, float32 blob)
    each, into slots the caller freed or that are new (a new document's id
    was never used: AUTOINCREMENT). If vec0 still holds one of the ids (a
    damaged file), those are freed and the rows written again.

    vec0 rows go in grouped by partition (kind), so consecutive inserts
    write the same chunk: 16.1 -> 14.5 us a row against the interleaving of
    one doc row and six hype rows per document (70k rows alone, batches of
    448). The sort is stable: within a partition the rows keep their order,
    so chunk positions (and KNN ties) are what they were."""
    by_kind = sorted(rows, key=lambda r: r[1])
    bits = [(r[0], r[1], b, r[2], r[3], r[4])
            for r, b in zip(by_kind, sign_bits([r[5] for r in by_kind]), strict=True)]
    try:
        conn.executemany(_INSERT_BITS, bits)
    except Exception:  # sqlite3 or sqlean's IntegrityError: vec0 has no OR REPLACE
        conn.executemany(f"DELETE FROM {TABLE} WHERE vector_id = ?", [(r[0],) for r in rows])
        conn.executemany(_INSERT_BITS, bits)
    conn.executemany("INSERT OR REPLACE INTO vector_data (vector_id, doc_id, embedding, bits) "
                     "VALUES (?, ?, ?, ?)", [(r[0], r[2], r[5], b[2]) for r, b in
                                             zip(by_kind, bits, strict=True)])


def fill_bits(conn: Connection, batch: int = 4096) -> int:
    """Write the sign bits of every float copy that has none (schema v5's
    migration, doctor --fix), in batches of ``batch`` rows. Only blobs of
    the file's dimension get bits: a damaged one stays out of the bits
    indexes (doctor's invalid_vectors). Returns the rows written."""
    dim = table_dim(conn)
    if dim is None:
        return 0
    written, after = 0, -1
    while True:
        rows = conn.execute(
            "SELECT vector_id, embedding FROM vector_data WHERE vector_id > ? AND bits IS NULL "
            "AND length(embedding) = ? ORDER BY vector_id LIMIT ?",
            (after, 4 * dim, batch)).fetchall()
        if not rows:
            return written
        conn.executemany("UPDATE vector_data SET bits = ? WHERE vector_id = ?",
                         zip(sign_bits([bytes(r[1]) for r in rows]), [r[0] for r in rows],
                             strict=True))
        written, after = written + len(rows), rows[-1][0]


def delete_slots(conn: Connection, doc_id: int, slots: Iterable[int]) -> None:
    """Free slots of a document in vec0 and vector_data. vec0 has no INSERT
    OR REPLACE (sqlite-vec #127): a slot is deleted, then inserted. Deleting
    an id vec0 does not hold is cheap (~9 us), so a slot is freed whether or
    not vector_data lists it (they can disagree after damage)."""
    ids = [(vector_id(doc_id, s),) for s in slots]
    conn.executemany(f"DELETE FROM {TABLE} WHERE vector_id = ?", ids)
    conn.executemany("DELETE FROM vector_data WHERE vector_id = ?", ids)


def used_slots(conn: Connection, doc_id: int) -> list[int]:
    """Slots vector_data holds for a document (doc, question and chunk)."""
    return [owner(int(r[0]))[1] for r in conn.execute(
        "SELECT vector_id FROM vector_data WHERE doc_id = ?", (doc_id,))]


def chunk_slots(conn: Connection, doc_id: int) -> list[int]:
    """Chunk slots a document has, by document_chunks or vector_data."""
    listed = {CHUNK_SLOT + int(r[0]) for r in conn.execute(
        "SELECT position FROM document_chunks WHERE doc_id = ?", (doc_id,))}
    return sorted(listed | {s for s in used_slots(conn, doc_id) if s >= CHUNK_SLOT})


def delete_document(conn: Connection, doc_id: int, question_slots: int) -> None:
    """Every vector of a document: the slots vector_data or document_chunks
    list, plus the document and question slots in case vec0 holds rows
    vector_data lost."""
    slots = set(used_slots(conn, doc_id)) | set(range(question_slots + 1)) \
        | set(chunk_slots(conn, doc_id))
    delete_slots(conn, doc_id, sorted(slots))


def retag(conn: Connection, doc_id: int, topic: str, doc_type: str) -> None:
    """vec0 metadata follows a document that moved topic or type."""
    ids = [(topic, doc_type, vector_id(doc_id, s)) for s in used_slots(conn, doc_id)]
    conn.executemany(f"UPDATE {TABLE} SET topic = ?, doc_type = ? WHERE vector_id = ?", ids)


def float_vector(conn: Connection, doc_id: int, slot: int) -> bytes | None:
    row = conn.execute("SELECT embedding FROM vector_data WHERE vector_id = ?",
                       (vector_id(doc_id, slot),)).fetchone()
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
        [(vid, kind_of(owner(vid)[1]), emb, did, topic, dtype)
         for vid, did, emb, topic, dtype in rows])
    return len(rows)


# -- rebuilding every vector with another model (reembed) -------------------------------
# New vectors are staged in a plain table, batch by batch, while the old
# index keeps serving; one transaction then swaps them in. A crash while
# staging leaves the old state (plus a staging table the next run resumes).


def stage_create(conn: Connection, fingerprint_id: str) -> None:
    columns = {r[1] for r in conn.execute(f"PRAGMA table_info({STAGING})")}
    if columns and "start_char" not in columns:  # staged by a kbstore without chunks
        conn.execute(f"DROP TABLE {STAGING}")
    # start_char/end_char: a chunk's span of the body (NULL for other slots).
    conn.execute(f"CREATE TABLE IF NOT EXISTS {STAGING} ("
                 "vector_id INTEGER PRIMARY KEY, doc_id INTEGER NOT NULL, "
                 "made_from TEXT NOT NULL, model TEXT NOT NULL, embedding BLOB NOT NULL, "
                 "start_char INTEGER, end_char INTEGER)")
    conn.execute(f"DELETE FROM {STAGING} WHERE model <> ?", (fingerprint_id,))


def stage_exists(conn: Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                        (STAGING,)).fetchone() is not None


def stage_write(conn: Connection, doc_id: int, slot: int, made_from: str, model: str,
                vector_blob: bytes, span: tuple[int, int] | None = None) -> None:
    conn.execute(f"INSERT OR REPLACE INTO {STAGING} (vector_id, doc_id, made_from, model, "
                 "embedding, start_char, end_char) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (vector_id(doc_id, slot), doc_id, made_from, model, vector_blob,
                  span[0] if span else None, span[1] if span else None))


def stage_clear_document(conn: Connection, doc_id: int) -> None:
    conn.execute(f"DELETE FROM {STAGING} WHERE doc_id = ?", (doc_id,))


def staged(conn: Connection) -> dict[int, dict[int, str]]:
    """doc_id -> {slot: made_from} of what is staged."""
    out: dict[int, dict[int, str]] = {}
    for vid, doc_id, made_from in conn.execute(
            f"SELECT vector_id, doc_id, made_from FROM {STAGING}"):
        out.setdefault(int(doc_id), {})[owner(int(vid))[1]] = made_from
    return out


def stage_swap(conn: Connection, dim: int) -> dict[int, str]:
    """Inside the caller's transaction: the staged vectors become THE vectors
    (vec0 recreated for ``dim``) and the staged chunks THE chunks. Returns
    doc_id -> chunks hash of the documents that have chunks now."""
    create_table(conn, dim)
    conn.execute("DELETE FROM vector_data")
    conn.execute(f"INSERT INTO vector_data (vector_id, doc_id, embedding, bits) "
                 f"SELECT s.vector_id, s.doc_id, s.embedding, vec_quantize_binary(s.embedding) "
                 f"FROM {STAGING} s JOIN documents d ON d.id = s.doc_id")
    conn.execute("DELETE FROM document_chunks")
    chunked: dict[int, str] = {}
    for vid, doc_id, made_from, start, end in conn.execute(
            f"SELECT s.vector_id, s.doc_id, s.made_from, s.start_char, s.end_char "
            f"FROM {STAGING} s JOIN documents d ON d.id = s.doc_id "
            f"WHERE s.vector_id >= ?", (CHUNK_BASE,)).fetchall():
        slot = owner(int(vid))[1]
        conn.execute("INSERT INTO document_chunks (doc_id, position, vector_id, start_char, "
                     "end_char) VALUES (?, ?, ?, ?, ?)",
                     (doc_id, slot - CHUNK_SLOT, vid, start, end))
        chunked[int(doc_id)] = made_from
    conn.execute(f"DROP TABLE {STAGING}")
    refill_from_floats(conn)
    return chunked


def stage_drop(conn: Connection) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {STAGING}")


def doc_ids_with_vectors(conn: Connection, ids: Sequence[int]) -> set[int]:
    return {int(r[0]) for r in conn.execute(
        "SELECT doc_id FROM vector_data WHERE vector_id IN (SELECT value * ? FROM json_each(?))",
        (SLOTS, _json(ids)))}  # slot 0: doc_id * SLOTS


def _json(values: Sequence[Any]) -> str:
    import json

    return json.dumps(list(values))

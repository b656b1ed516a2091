"""The doctor's row checks of a SQLite file: every table derived from the
documents compared with them, in memory that does not grow with the text.

The documents are read a page at a time (``PAGE`` in id order, each page
owning an id range, the ranges together covering every id); what is
compared per document -- tag rows, hash rows, question text -- is read for
that range only, as is what ``--fix`` rebuilds from them. Vector ids are held
as numpy arrays (16 bytes a vector, no Python object per row), and set
differences that SQL answers directly (missing FTS rows, orphan questions and
chunks) are asked of SQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ...chunks import MAX_CHUNKS
from ...model import HYPE_QUESTIONS, Check, Document, tag_keys
from ..checks import Tally, derived_checks, invalid_tag_docs
from . import vectors as _vectors
from .connection import Connection
from .pending import question_texts

if TYPE_CHECKING:
    import numpy as np

PAGE = 500
SAMPLE = 5  # ids shown per check; counts are always complete
QUESTIONS_FTS = "questions_fts"  # indexes HyPE questions, not documents
SLOTS, CHUNK_SLOT, CHUNK_BASE = _vectors.SLOTS, _vectors.CHUNK_SLOT, _vectors.CHUNK_BASE
LOWEST, HIGHEST = -(2 ** 63), 2 ** 63 - 1   # SQLite's integer range


def id_ranges(conn: Connection) -> Iterator[tuple[int, int]]:
    """(lo, hi) ranges holding PAGE documents each (the last one fewer) in id
    order. The first range starts at the lowest integer and the last ends at
    the highest, so a row of any table, whatever document id it names, falls
    in exactly one range."""
    lo = LOWEST
    while True:
        ids = [int(r[0]) for r in conn.execute(
            "SELECT id FROM documents WHERE id >= ? ORDER BY id LIMIT ?", (lo, PAGE))]
        last = len(ids) < PAGE
        hi = HIGHEST if last else ids[-1]
        yield lo, hi
        if last or hi == HIGHEST:
            return
        lo = hi + 1


def pages(conn: Connection) -> Iterator[tuple[int, int, dict[int, Document]]]:
    """(lo, hi, documents with lo <= id <= hi) for each of ``id_ranges``."""
    for lo, hi in id_ranges(conn):
        rows = conn.execute("SELECT id, path, title, body, tags FROM documents "
                            "WHERE id BETWEEN ? AND ?", (lo, hi)).fetchall()
        yield lo, hi, {int(r[0]): Document(path=r[1], title=r[2], body=r[3],
                                           tags=json.loads(r[4])) for r in rows}


def tag_rows(docs: dict[int, Document]) -> set[tuple[str, int]]:
    return {(key, d) for d, doc in docs.items() for key in tag_keys(doc.tags)}


def _ids(conn: Connection, sql: str, *args: Any) -> set[int]:
    return {int(r[0]) for r in conn.execute(sql, args)}


def row_checks(conn: Connection, fp: str | None, vectors_ok: bool,
               fts_tables: list[str]) -> list[Check]:
    result = Tally(SAMPLE)
    add = result.add
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    missing: set[int] = set()
    extra: set[int] = set()
    live_questions = ("SELECT DISTINCT doc_id AS id FROM hype_questions "
                      "WHERE doc_id IN (SELECT id FROM documents)")
    for table in fts_tables:  # names from the migrations
        if f"{table}_docsize" not in present:
            continue  # the table is gone: the schema check reports it
        expected = live_questions if table == QUESTIONS_FTS else "SELECT id FROM documents"
        missing |= _ids(conn, f"SELECT id FROM ({expected}) WHERE id NOT IN "
                              f"(SELECT id FROM {table}_docsize)")
        extra |= _ids(conn, f"SELECT id FROM {table}_docsize WHERE id NOT IN ({expected})")
    add("documents_missing_fts", missing, "documents absent from an FTS5 index")
    add("orphan_fts_rows", extra, "FTS5 rows of deleted documents")
    questions_fts = QUESTIONS_FTS in present
    if questions_fts:
        add("questions_fts_text", (), "documents whose question text in questions_fts is not "
            "their HyPE questions")
    tags = "document_tags" in present
    if tags:
        add("tag_rows", (), "documents whose exact-tag rows disagree with their tags")
    add("orphan_questions", _ids(conn, "SELECT DISTINCT doc_id FROM hype_questions WHERE "
                                       "doc_id NOT IN (SELECT id FROM documents)"),
        "HyPE questions of deleted documents")
    add("orphan_chunks", _ids(conn, "SELECT DISTINCT doc_id FROM document_chunks WHERE "
                                    "doc_id NOT IN (SELECT id FROM documents)"),
        "chunk rows of deleted documents")
    for lo, hi, docs in pages(conn):
        if questions_fts:
            _question_text_page(conn, add, lo, hi)
        if tags:
            have = {(r[0], int(r[1])) for r in conn.execute(
                "SELECT tag, doc_id FROM document_tags WHERE doc_id BETWEEN ? AND ?", (lo, hi))}
            add("tag_rows", {d for _, d in tag_rows(docs) ^ have} - invalid_tag_docs(docs), "")
        derived = conn.execute("SELECT doc_id, kind, content_hash, model, status, error FROM "
                               "derived WHERE doc_id BETWEEN ? AND ?", (lo, hi)).fetchall()
        derived_checks(add, docs, derived, fp)
    if vectors_ok:
        _vector_checks(conn, add)
    return result.checks()


def stale_questions(conn: Connection) -> list[int]:
    """Documents whose HyPE questions were written for older content."""
    stale = []
    for lo, hi, docs in pages(conn):
        stale += [int(d) for d, chash in conn.execute(
            "SELECT doc_id, content_hash FROM derived WHERE kind = ? AND doc_id BETWEEN ? AND ?",
            (HYPE_QUESTIONS, lo, hi)) if int(d) in docs and docs[int(d)].hype_hash() != chash]
    return stale


def question_rows(conn: Connection, lo: int, hi: int) -> list[tuple[int, str]]:
    """questions_fts rows, as the backend writes them, of the live documents
    with lo <= id <= hi."""
    return question_texts([(int(d), int(p), q) for d, p, q in conn.execute(
        "SELECT doc_id, position, question FROM hype_questions WHERE doc_id BETWEEN ? AND ? "
        "AND doc_id IN (SELECT id FROM documents)", (lo, hi))])


def _question_text_page(conn: Connection, add: Callable[..., None], lo: int, hi: int) -> None:
    """questions_fts holds its own text (written by the backend, no trigger
    since schema v4): compare it with the questions themselves."""
    joined = dict(question_rows(conn, lo, hi))
    indexed = {int(r[0]): r[1] for r in conn.execute(
        f"SELECT rowid, questions FROM {QUESTIONS_FTS} WHERE rowid BETWEEN ? AND ?", (lo, hi))}
    add("questions_fts_text", {d for d in joined.keys() & indexed.keys()
                               if joined[d] != indexed[d]}, "")


# -- vectors ----------------------------------------------------------------------


def _array(conn: Connection, sql: str, *args: Any) -> np.ndarray:
    """The integer rows of ``sql`` as an (n, columns) int64 array, read in
    slices so no list of Python rows the size of the table is ever built."""
    import numpy as np

    cursor = conn.execute(sql, args)
    width = len(cursor.description)
    parts = []
    while rows := cursor.fetchmany(65536):
        parts.append(np.array(rows, dtype=np.int64).reshape(-1, width))
    return np.concatenate(parts) if parts else np.zeros((0, width), dtype=np.int64)


def owners(vids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(doc_id, slot) of each vector id (``vectors.owner`` over an array)."""
    import numpy as np

    chunk = vids >= CHUNK_BASE
    doc, slot = np.divmod(vids, SLOTS)
    cdoc, cn = np.divmod(vids - CHUNK_BASE, MAX_CHUNKS)
    return np.where(chunk, cdoc, doc), np.where(chunk, CHUNK_SLOT + cn, slot)


def ids_of(doc: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """``vectors.vector_id`` over arrays."""
    import numpy as np

    return np.where(slot < CHUNK_SLOT, doc * SLOTS + slot,
                    CHUNK_BASE + doc * MAX_CHUNKS + (slot - CHUNK_SLOT))


def vector_rows(conn: Connection, table: str) -> np.ndarray:
    """(vector_id, doc_id) of every row of ``table`` (vec0 or vector_data)."""
    return _array(conn, f"SELECT vector_id, doc_id FROM {table}")  # names are constants


def listed(conn: Connection) -> tuple[np.ndarray, np.ndarray]:
    """(doc_id, slot) of every question, and of every chunk, that the plain
    tables list."""
    return (_array(conn, "SELECT doc_id, position FROM hype_questions"),
            _array(conn, "SELECT doc_id, position + ? FROM document_chunks", CHUNK_SLOT))


def orphans(rows: np.ndarray, live: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """vector ids of ``rows`` whose document is gone, whose doc_id disagrees
    with the id, or whose question or chunk slot is not in ``slots``."""
    import numpy as np

    vids, docs = rows[:, 0], rows[:, 1]
    doc, slot = owners(vids)
    unlisted = (slot != 0) & ~np.isin(vids, ids_of(slots[:, 0], slots[:, 1]))
    return vids[~np.isin(doc, live) | (docs != doc) | unlisted]


class VectorGaps:
    """What the two copies of the vectors lack or hold too many of: orphan
    vector ids in vec0 (``bits``) and in vector_data (``floats``), and the
    live documents missing their document, question or chunk vectors (a
    vector counts only when both copies hold it)."""

    def __init__(self, conn: Connection) -> None:
        import numpy as np

        live = _array(conn, "SELECT id FROM documents")[:, 0]
        bits = vector_rows(conn, _vectors.TABLE)
        floats = vector_rows(conn, "vector_data")
        both = np.intersect1d(bits[:, 0], floats[:, 0])
        questions, chunks = listed(conn)
        slots = np.concatenate([questions, chunks])
        self.orphan_bits = [int(v) for v in orphans(bits, live, slots)]
        self.orphan_floats = [int(v) for v in orphans(floats, live, slots)]
        del bits, floats, slots
        questions = questions[np.isin(questions[:, 0], live)]
        chunks = chunks[np.isin(chunks[:, 0], live)]
        self.no_document = _without(live, np.zeros_like(live), both)
        self.no_questions = _without(questions[:, 0], questions[:, 1], both)
        self.no_chunks = _without(chunks[:, 0], chunks[:, 1], both)


def _vector_checks(conn: Connection, add: Callable[..., None]) -> None:
    # Each vector lives twice: sign bits in vec0 (KNN) and float32 in vector_data.
    gaps = VectorGaps(conn)
    add("orphan_vectors", {_vectors.owner(v)[0] for v in gaps.orphan_bits + gaps.orphan_floats},
        "vectors of deleted documents, questions or chunks (vec0 or vector_data)")
    add("documents_missing_vectors", gaps.no_document,
        "documents without their document vector (vec0 and vector_data)")
    add("questions_missing_vectors", gaps.no_questions,
        "documents whose HyPE questions lack vectors")
    add("chunks_missing_vectors", gaps.no_chunks, "long documents whose chunks lack vectors")
    invalid, stale_bits = vector_damage(conn)
    add("invalid_vectors", {_vectors.owner(v)[0] for v in invalid},
        "documents with NaN, infinite, zero or wrong-size vectors")
    add("vector_bits", {_vectors.owner(v)[0] for v in stale_bits},
        "documents whose vectors' sign bits (vector_data.bits, scanned by the search) are "
        "missing or disagree with their float copy")


def _without(doc: np.ndarray, slot: np.ndarray, both: np.ndarray) -> set[int]:
    """The documents among ``doc`` whose vector at ``slot`` is not in ``both``."""
    import numpy as np

    return {int(d) for d in doc[~np.isin(ids_of(doc, slot), both)]}


def vector_damage(conn: Connection) -> tuple[set[int], set[int]]:
    """Vector ids of the float copies that are unusable (NaN, infinite,
    zero, wrong size) and of the valid ones whose sign bits are missing or
    wrong (schema v5; a v3/v4 file read as it is has no bits column).
    Checked a slice of rows at a time in numpy."""
    import numpy as np

    dim = _vectors.table_dim(conn) or 0  # no vector table: no float copy is usable
    has_bits = any(r[1] == "bits" for r in conn.execute("PRAGMA table_info(vector_data)"))
    bad: set[int] = set()
    stale: set[int] = set()
    cursor = conn.execute("SELECT vector_id, embedding, "
                          f"{'bits' if has_bits else 'NULL'} FROM vector_data")
    while rows := cursor.fetchmany(4096):
        sized = [r for r in rows if isinstance(r[1], bytes) and len(r[1]) == 4 * dim]
        bad.update(int(r[0]) for r in rows if not (isinstance(r[1], bytes)
                                                   and len(r[1]) == 4 * dim))
        if not sized:
            continue
        floats = np.frombuffer(b"".join(r[1] for r in sized), dtype=np.float32).reshape(-1, dim)
        finite_nonzero: Any = np.isfinite(floats).all(axis=1) & floats.any(axis=1)
        usable = [bool(ok) for ok in finite_nonzero]
        bad.update(int(r[0]) for r, ok in zip(sized, usable, strict=True) if not ok)
        if has_bits:
            good = [r for r, ok in zip(sized, usable, strict=True) if ok]
            stale.update(int(r[0]) for r, b in zip(good, _vectors.sign_bits(
                [r[1] for r in good]), strict=True) if r[2] != b)
    return bad, stale

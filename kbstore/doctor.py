"""`kbstore doctor`: find, and where possible repair, damage to a store.

Everything but the documents themselves is derived (the FTS5 index, vectors,
hash rows), so almost any damage short of a corrupt file can be rebuilt from
the ``documents`` table: :func:`diagnose` reports what is wrong, :func:`fix`
rebuilds it and diagnoses again.

A *problem* makes the store wrong (a document search cannot find, a vector
of a deleted document, a vector made from older content). *Notes* are work
left to do that the store copes with (HyPE questions waiting for the LLM).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import schema
from .embed import fingerprint_id
from .ingest import Document

if TYPE_CHECKING:
    from .store import KnowledgeStore

SLOTS = schema.VECTOR_SLOTS
SAMPLE = 5  # ids shown per check; counts are always complete


@dataclass
class Check:
    name: str
    count: int = 0            # rows affected (0 = healthy)
    detail: str = ""
    fixable: bool = True      # doctor --fix can rebuild it
    problem: bool = True      # False: a note that does not fail the store
    sample: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.count == 0 or not self.problem

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "count": self.count, "detail": self.detail,
                "fixable": self.fixable, "problem": self.problem, "sample": self.sample}


@dataclass
class DoctorReport:
    path: str
    checks: list[Check] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)  # actions --fix took

    @property
    def problems(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.problems

    def get(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "checks": [c.to_dict() for c in self.checks],
                "fixed": self.fixed}


def _ids(conn: Any, sql: str) -> set[int]:
    return {int(r[0]) for r in conn.execute(sql)}


def _integrity(conn: Any) -> Check:
    rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    bad = [] if rows == ["ok"] else rows
    return Check("integrity", len(bad), "; ".join(bad[:3]) or "PRAGMA integrity_check: ok",
                 fixable=False, sample=bad[:SAMPLE])


def fts_tables(conn: Any) -> list[str]:
    """The FTS5 indexes over the documents table (documents_fts, and any a
    later migration adds): all are derived, all are checked and rebuilt."""
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                        "AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%' ORDER BY name")
    return [name for name, sql in rows
            if re.search(r"content\s*=\s*'documents'", sql) and re.fullmatch(r"\w+", name)]


def _fts_integrity(conn: Any) -> Check:
    # rank = 1 also compares the index with its external content table.
    # It is an INSERT, so it needs (and waits for) the write lock.
    failed = []
    for table in fts_tables(conn):  # names from sqlite_master, checked to be plain words
        try:
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")
        except Exception as exc:  # SQLITE_CORRUPT_VTAB from the binding
            failed.append(f"{table}: {exc}")
    return Check("fts_integrity", len(failed), "; ".join(failed) or "FTS5 integrity-check: ok",
                 sample=failed[:SAMPLE])


def _vector_dim(conn: Any) -> int | None:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                       (schema.VECTOR_TABLE,)).fetchone()
    match = re.search(r"(?:float|bit)\[(\d+)\]", row[0] if row else "")
    return int(match.group(1)) if match else None


def _setup_checks(conn: Any) -> tuple[list[Check], str | None]:
    """Is there an embedder fingerprint and a vec0 table of its dimension?"""
    stored = schema.get_meta(conn, "embedder")
    if stored is None:
        return [Check("fingerprint", 1, "no embedder fingerprint: run `kbstore init`",
                      fixable=False)], None
    fp = fingerprint_id(stored)
    dim = _vector_dim(conn) if schema.vector_table_exists(conn) else None
    if dim != stored.get("dim"):
        what = "missing" if dim is None else f"{dim}-dimensional"
        return [Check("vector_table", 1, f"vector table is {what}, the embedder {fp} makes "
                      f"{stored.get('dim')}-dimensional vectors")], fp
    return [Check("vector_table", 0, f"vec0 table, {dim} dimensions")], fp


def _documents(conn: Any) -> dict[int, Document]:
    import json

    rows = conn.execute("SELECT id, path, title, body, tags FROM documents")
    return {int(r[0]): Document(path=r[1], title=r[2], body=r[3], tags=json.loads(r[4]))
            for r in rows}


def _row_checks(conn: Any, fp: str | None, vectors_ok: bool) -> list[Check]:
    from .store import doc_vector_hash, hype_hash

    docs = _documents(conn)
    ids = set(docs)
    checks: list[Check] = []

    def add(name: str, found: Any, detail: str, **kw: Any) -> None:
        found = sorted(found)
        checks.append(Check(name, len(found), detail if found else "", sample=found[:SAMPLE], **kw))

    missing: set[int] = set()
    extra: set[int] = set()
    for table in fts_tables(conn):
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                            (f"{table}_docsize",)).fetchone():
            continue  # columnsize=0: no per-row table to compare
        indexed = _ids(conn, f"SELECT id FROM {table}_docsize")
        missing |= ids - indexed
        extra |= indexed - ids
    add("documents_missing_fts", missing, "documents absent from an FTS5 index")
    add("orphan_fts_rows", extra, "FTS5 rows of deleted documents")

    questions = {(int(r[0]), int(r[1])) for r in
                 conn.execute("SELECT doc_id, position FROM hype_questions")}
    add("orphan_questions", {d for d, _ in questions if d not in ids},
        "HyPE questions of deleted documents")
    derived = conn.execute("SELECT doc_id, kind, content_hash, model, status FROM derived"
                           ).fetchall()
    add("orphan_derived", {int(r[0]) for r in derived if int(r[0]) not in ids},
        "hash rows of deleted documents")

    by_kind: dict[str, dict[int, tuple[str, str, str]]] = {}
    for doc_id, kind, content_hash, model, status in derived:
        by_kind.setdefault(kind, {})[int(doc_id)] = (content_hash, model, status)
    doc_rows = by_kind.get("doc_vector", {})
    qrows = by_kind.get("hype_questions", {})
    add("documents_missing_hash_row", ids - set(doc_rows),
        "documents without a 'doc_vector' hash row (never embedded)")
    add("stale_vectors", {d for d, (h, _, _) in doc_rows.items()
                          if d in docs and h != doc_vector_hash(docs[d])},
        "document vectors made from older content")
    add("pending_hype", {d for d, (_, _, s) in qrows.items() if d in ids and s == "pending"},
        "documents whose HyPE questions wait for the LLM (`kbstore import --hype`)",
        fixable=False, problem=False)
    add("stale_questions", {d for d, (h, _, s) in qrows.items()
                            if d in docs and s == "ok" and h != hype_hash(docs[d])},
        "HyPE questions written for older content (--fix drops them; the next import with "
        "HyPE asks again)")
    if fp is not None:
        add("fingerprint_mismatch", {d for kind in ("doc_vector", "hype_vectors")
                                     for d, (_, m, _) in by_kind.get(kind, {}).items()
                                     if d in ids and m != fp},
            f"vectors made by another embedder than the stored {fp}")
    if not vectors_ok:
        return checks

    # Each vector lives twice: sign bits in vec0 (KNN) and float32 in vector_data.
    vectors = _vector_rows(conn)
    data = _vector_data_rows(conn)
    both = set(vectors) & set(data)
    add("orphan_vectors", _orphans(vectors, ids, questions) | _orphans(data, ids, questions),
        "vectors of deleted documents or questions (vec0 or vector_data)")
    add("documents_missing_vectors", {d for d in ids if d * SLOTS not in both},
        "documents without their document vector (vec0 and vector_data)")
    add("questions_missing_vectors", {d for d, pos in questions
                                      if d in ids and d * SLOTS + pos not in both},
        "documents whose HyPE questions lack vectors")
    return checks


def _vector_rows(conn: Any) -> dict[int, int]:
    return {int(r[0]): int(r[1]) for r in
            conn.execute(f"SELECT vector_id, doc_id FROM {schema.VECTOR_TABLE}")}


def _vector_data_rows(conn: Any) -> dict[int, int]:
    return {int(r[0]): int(r[1]) for r in conn.execute("SELECT vector_id, doc_id FROM vector_data")}


def _orphans(rows: dict[int, int], ids: set[int], questions: set[tuple[int, int]]) -> set[int]:
    """vector ids whose document is gone, whose doc_id disagrees with the id,
    or whose HyPE slot has no question."""
    return {v for v, d in rows.items()
            if v // SLOTS not in ids or d != v // SLOTS
            or (v % SLOTS and (v // SLOTS, v % SLOTS) not in questions)}


def diagnose(store: KnowledgeStore) -> DoctorReport:
    """Check ``store`` without changing it (the FTS5 check takes the write
    lock for a moment but writes nothing)."""
    conn = store.conn
    report = DoctorReport(str(store.path))
    report.checks.append(_guarded("integrity", _integrity, conn))
    report.checks.append(_guarded("fts_integrity", _fts_integrity, conn))
    setup, fp = _setup_checks(conn)
    report.checks += setup
    vectors_ok = all(c.ok for c in setup)
    conn.execute("BEGIN")  # one snapshot for the cross-table comparisons
    try:
        report.checks += _row_checks(conn, fp, vectors_ok)
    except Exception as exc:  # a damaged file can fail any query
        report.checks.append(Check("tables", 1, f"could not compare the tables: {exc}",
                                   fixable=False))
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")
    return report


def _guarded(name: str, check: Any, conn: Any) -> Check:
    try:
        return check(conn)  # type: ignore[no-any-return]
    except Exception as exc:
        return Check(name, 1, f"check failed: {exc}", fixable=False)


def fix(store: KnowledgeStore, *, batch_size: int = 64) -> DoctorReport:
    """Rebuild everything derivable, then diagnose again. Never calls the
    LLM; uses ``store.embedder`` (the stored model) for missing vectors."""
    from . import db as _db
    from .writer import embed_existing

    before = diagnose(store)
    actions: list[str] = []
    bad = {c.name for c in before.problems}
    conn = store.conn
    if "vector_table" in bad and schema.get_meta(conn, "embedder"):
        # Wrong dimension or no table: every vector has to be made again.
        done = store.reembed(store.embedder, batch_size=batch_size)
        actions.append(f"rebuilt the vector table and re-embedded {done} document(s)")
        bad = {c.name for c in diagnose(store).problems}
    with _db.transaction(conn):
        if bad & {"fts_integrity", "documents_missing_fts", "orphan_fts_rows"}:
            for table in fts_tables(conn):
                conn.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")
            actions.append("rebuilt the FTS5 index(es) from the documents table")
        actions += _delete_orphans(conn, bad)
        actions += _forget_missing_vectors(conn, bad)
    # The writer re-embeds whatever lacks a hash row of the current content
    # and model (so also fingerprint mismatches); it drops stale questions.
    if bad & {"documents_missing_vectors", "questions_missing_vectors", "stale_vectors",
              "documents_missing_hash_row", "stale_questions", "fingerprint_mismatch"}:
        done = embed_existing(store, batch_size=batch_size)
        actions.append(f"re-embedded {done} document(s)")
    after = diagnose(store)
    after.fixed = actions
    return after


def _delete_orphans(conn: Any, bad: set[str]) -> list[str]:
    actions = []
    if "orphan_vectors" in bad:
        live = _ids(conn, "SELECT id FROM documents")
        questions = {(int(r[0]), int(r[1])) for r in
                     conn.execute("SELECT doc_id, position FROM hype_questions")}
        doomed = [(v,) for v in _orphans(_vector_rows(conn), live, questions)]
        conn.executemany(f"DELETE FROM {schema.VECTOR_TABLE} WHERE vector_id = ?", doomed)
        data = [(v,) for v in _orphans(_vector_data_rows(conn), live, questions)]
        conn.executemany("DELETE FROM vector_data WHERE vector_id = ?", data)
        actions.append(f"deleted {len(doomed) + len(data)} orphan vector row(s)")
    if "orphan_questions" in bad:
        n = conn.execute("DELETE FROM hype_questions WHERE doc_id NOT IN "
                         "(SELECT id FROM documents)").rowcount
        actions.append(f"deleted {n} orphan HyPE question(s)")
    if "orphan_derived" in bad:
        n = conn.execute("DELETE FROM derived WHERE doc_id NOT IN (SELECT id FROM documents)"
                         ).rowcount
        actions.append(f"deleted {n} orphan hash row(s)")
    return actions


def _forget_missing_vectors(conn: Any, bad: set[str]) -> list[str]:
    """Drop the hash rows that claim a vector exists when it does not, so the
    writer's content-hash check re-embeds those documents."""
    if not bad & {"documents_missing_vectors", "questions_missing_vectors"}:
        return []
    vectors = set(_vector_rows(conn)) & set(_vector_data_rows(conn))
    docs = _ids(conn, "SELECT id FROM documents")
    no_doc_vector = [(d,) for d in docs if d * SLOTS not in vectors]
    conn.executemany("DELETE FROM derived WHERE doc_id = ? AND kind = 'doc_vector'",
                     no_doc_vector)
    no_qvec = {(int(d),) for d, pos in conn.execute("SELECT doc_id, position FROM hype_questions")
               if int(d) * SLOTS + int(pos) not in vectors}
    conn.executemany("DELETE FROM derived WHERE doc_id = ? AND kind = 'hype_vectors'",
                     sorted(no_qvec))
    return [f"marked {len(no_doc_vector) + len(no_qvec)} document(s) for re-embedding"]

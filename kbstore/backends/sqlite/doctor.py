"""Checks and repairs of a SQLite knowledge-base file (``kbstore doctor``).

Everything but the documents themselves is derived -- FTS5 indexes, tag
rows, vectors, hash rows, even the triggers -- so almost any damage short of
a corrupt file can be rebuilt from the ``documents`` table. The expected
schema is what the migrations create in a fresh in-memory database, so a
dropped index, trigger or FTS table is noticed and re-created exactly.
"""

from __future__ import annotations

import contextlib
import json
from functools import lru_cache
from typing import Any

from ...migrations import steps  # package-dir mapped
from ...model import (
    CHUNK_VECTORS,
    DOC_VECTOR,
    HYPE_QUESTIONS,
    HYPE_VECTORS,
    Check,
    fingerprint_id,
)
from ..checks import guarded
from . import doctor_rows as _rows_
from . import migrations as _migrations
from . import vectors as _vectors
from .connection import Connection, binding, snapshot, transaction
from .doctor_rows import QUESTIONS_FTS, SAMPLE

SLOTS = _vectors.SLOTS
owner = _vectors.owner
# Plain tables holding only derived data: re-created empty if dropped.
_DERIVED_TABLES = {"document_tags", "hype_questions", "document_chunks", "vector_data",
                   "derived"}


@lru_cache(maxsize=8)
def expected_schema(applied: int | None = None) -> dict[str, tuple[str, str]]:
    """name -> (type, sql) of every object the migrations create (the first
    ``applied`` of them: a file read as it is, never migrated, has only
    those)."""
    conn = binding().connect(":memory:", isolation_level=None)
    try:
        for _, path in steps("sqlite")[:applied]:
            conn.executescript(path.read_text(encoding="utf-8"))
        return {name: (kind, sql) for kind, name, sql in conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
            "AND name NOT LIKE 'sqlite_%'")}
    finally:
        conn.close()


def _squash(sql: str | None) -> str:
    return " ".join((sql or "").split())


def _schema_check(conn: Connection) -> Check:
    actual = {name: (kind, sql) for kind, name, sql in conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL")}
    applied = _migrations.state(conn).version
    wrong = sorted(name for name, (kind, sql) in expected_schema(applied).items()
                   if name not in actual or _squash(actual[name][1]) != _squash(sql))
    lost = [n for n in wrong if n == "documents" or n == "meta"]
    return Check("schema", len(wrong), f"missing or altered schema objects: {', '.join(wrong)}"
                 if wrong else "", fixable=not lost, sample=wrong[:SAMPLE])


def fts_tables() -> list[str]:
    return sorted(n for n, (k, sql) in expected_schema().items()
                  if k == "table" and "USING fts5" in (sql or ""))


def _integrity(conn: Connection) -> Check:
    # FTS5 caches each index's structure per connection, and the integrity
    # check trusts that cache: on a connection that read an index before
    # another process wrote to it, it reported "malformed inverted index"
    # for a healthy file. A query on each index in the same read transaction
    # reloads the structure first.
    with snapshot(conn):
        for table in fts_tables():  # constants
            with contextlib.suppress(Exception):  # a dropped table: the schema check says so
                conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH 'kbstore' "
                             "LIMIT 1").fetchall()
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    bad = [] if rows == ["ok"] else rows
    return Check("integrity", len(bad), "; ".join(bad[:3]) or "PRAGMA integrity_check: ok",
                 fixable=False, sample=bad[:SAMPLE])


def _fts_integrity(conn: Connection, writable: bool) -> Check:
    if not writable:
        # The FTS5 check is an INSERT: a read-only file cannot run it (PRAGMA
        # integrity_check covers FTS5 on SQLite >= 3.44).
        return Check("fts_integrity", 0, "the FTS5 check writes; run `kbstore doctor --fix` "
                     "to include it", problem=False, skipped=True)
    failed = []
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    for table in fts_tables():  # names from the migrations, plain words
        if table not in present:
            continue  # reported by the schema check
        try:
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")
        except Exception as exc:  # SQLITE_CORRUPT_VTAB from the binding
            failed.append(f"{table}: {exc}")
    return Check("fts_integrity", len(failed), "; ".join(failed) or "FTS5 integrity-check: ok",
                 sample=failed[:SAMPLE])


def _meta_checks(conn: Connection, fp: str | None) -> tuple[list[Check], bool]:
    checks = []
    fusion = _meta(conn, "fusion")
    checks.append(Check("meta_fusion", 0 if isinstance(fusion, dict) else 1,
                        "" if isinstance(fusion, dict) else
                        f"stored fusion defaults are not a JSON object: {fusion!r:.80}"))
    stored = _meta(conn, "embedder")
    if not isinstance(stored, dict) or not isinstance(stored.get("dim"), int):
        checks.append(Check("fingerprint", 1, "no embedder fingerprint; documents are kept. "
                            "Run `kbstore doctor --fix --embedder NAME` to record one and "
                            "re-embed", fixable=False))
        return checks, False
    dim = _vectors.table_dim(conn) if _vectors.table_exists(conn) else None
    if dim != stored["dim"]:
        what = "missing" if dim is None else f"{dim}-dimensional"
        checks.append(Check("vector_table", 1, f"vector table is {what}, the embedder "
                            f"{fingerprint_id(stored)} makes {stored['dim']}-dimensional "
                            "vectors"))
        return checks, False
    checks.append(Check("vector_table", 0, f"vec0 table, {dim} dimensions"))
    if _vectors.stage_exists(conn):
        checks.append(Check("rebuild_in_progress", 1, "a `kbstore reembed` was interrupted; "
                            "the old vectors still serve. Run it again to finish, or --fix "
                            "to discard the staged vectors", problem=False))
    return checks, True


def _meta(conn: Connection, key: str) -> Any:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])
    except Exception:
        return None


def _row_checks(conn: Connection, fp: str | None, vectors_ok: bool) -> list[Check]:
    return _rows_.row_checks(conn, fp, vectors_ok, fts_tables())


def diagnose(conn: Connection, fp: str | None, *, writable: bool) -> list[Check]:
    checks = [guarded("integrity", _integrity, conn), guarded("schema", _schema_check, conn),
              guarded("fts_integrity", _fts_integrity, conn, writable)]
    setup, vectors_ok = _meta_checks(conn, fp)
    checks += setup
    try:
        with snapshot(conn):  # one snapshot for the cross-table comparisons
            checks += _row_checks(conn, fp, vectors_ok)
    except Exception as exc:  # a damaged file can fail any query
        checks.append(Check("tables", 1, f"could not compare the tables: {exc}",
                            fixable=False))
    return checks


# -- repairs ------------------------------------------------------------------------


def repair(conn: Connection, bad: set[str], defaults: dict[str, Any]) -> list[str]:
    """Rebuild what needs no embedder, in one transaction. Vectors that must
    be re-made are forgotten (their hash rows dropped) so the write path
    re-embeds them afterwards."""
    actions: list[str] = []
    with transaction(conn):
        if "schema" in bad:
            actions += _recreate_schema(conn)
            bad |= {"fts_integrity", "tag_rows"}
        if "meta_fusion" in bad:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('fusion', ?)",
                         (json.dumps(defaults, sort_keys=True),))
            actions.append("rewrote the stored fusion defaults")
        if bad & {"fts_integrity", "documents_missing_fts", "orphan_fts_rows",
                  "questions_fts_text"}:
            for table in fts_tables():
                if table == QUESTIONS_FTS:  # its own content: refilled from the questions
                    conn.execute(f"DELETE FROM {QUESTIONS_FTS}")
                    for lo, hi in _rows_.id_ranges(conn):  # memory: one page's questions
                        conn.executemany(f"INSERT INTO {QUESTIONS_FTS} (rowid, questions) "
                                         "VALUES (?, ?)", _rows_.question_rows(conn, lo, hi))
                else:
                    conn.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")
            actions.append("rebuilt the FTS5 indexes from the documents and questions")
        if "tag_rows" in bad:
            conn.execute("DELETE FROM document_tags")
            for _, _, docs in _rows_.pages(conn):
                conn.executemany("INSERT OR IGNORE INTO document_tags (tag, doc_id) "
                                 "VALUES (?, ?)", sorted(_rows_.tag_rows(docs)))
            actions.append("rebuilt the exact-tag rows")
        if "vector_table" in bad:
            actions += _rebuild_vector_table(conn)
        if "vector_bits" in bad:
            stale = _rows_.vector_damage(conn)[1]
            conn.executemany("UPDATE vector_data SET bits = NULL WHERE vector_id = ?",
                             [(v,) for v in sorted(stale)])
            n = _vectors.fill_bits(conn)
            actions.append(f"rewrote the sign bits of {n} vector(s) from their float copies")
        if "rebuild_in_progress" in bad:
            _vectors.stage_drop(conn)
            actions.append("discarded the vectors staged by an interrupted reembed")
        if "secrets_in_errors" in bad:
            from ...redact import redact

            rows = conn.execute("SELECT doc_id, kind, error FROM derived "
                                "WHERE error IS NOT NULL").fetchall()
            conn.executemany("UPDATE derived SET error = ? WHERE doc_id = ? AND kind = ?",
                             [(redact(e), d, k) for d, k, e in rows if redact(e) != e])
            actions.append("redacted credentials in stored LLM errors")
        actions += _delete_orphans(conn, bad)
        actions += _forget_bad_vectors(conn, bad)
    return actions


def _recreate_schema(conn: Connection) -> list[str]:
    actual = {name: _squash(sql) for name, sql in conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL")}
    done = []
    expected = expected_schema()
    order = {"table": 0, "index": 1, "trigger": 2}
    for name, (kind, sql) in sorted(expected.items(), key=lambda i: order.get(i[1][0], 3)):
        if kind == "table" and name.startswith(tuple(f"{t}_" for t in fts_tables())):
            continue  # FTS5 shadow tables come with their virtual table
        if actual.get(name) == _squash(sql):
            continue
        if kind == "table" and name in actual and name not in _DERIVED_TABLES \
                and "USING fts5" not in sql:
            continue  # a user table with data kbstore cannot rebuild: reported, kept
        if name in actual:
            conn.execute(f"DROP {kind.upper()} IF EXISTS {name}")  # names from the migrations
        conn.execute(sql)
        done.append(name)
    return [f"re-created {', '.join(done)}"] if done else []


def _rebuild_vector_table(conn: Connection) -> list[str]:
    stored = _meta(conn, "embedder") or {}
    dim = _vectors.check_dim(stored.get("dim"))
    _vectors.create_table(conn, dim)
    sizes = {int(r[0]) for r in conn.execute("SELECT DISTINCT length(embedding) FROM vector_data")}
    if sizes <= {4 * dim}:
        n = _vectors.refill_from_floats(conn)
        return [f"re-created the vector table and refilled {n} vector(s) from their float copies"]
    conn.execute("DELETE FROM vector_data")
    conn.execute("DELETE FROM document_chunks")
    conn.execute("DELETE FROM derived WHERE kind IN (?, ?, ?)",
                 (DOC_VECTOR, HYPE_VECTORS, CHUNK_VECTORS))
    return [f"re-created the {dim}-dimensional vector table; every document will be re-embedded"]


def _delete_orphans(conn: Connection, bad: set[str]) -> list[str]:
    actions = []
    if "orphan_vectors" in bad:
        gaps = _rows_.VectorGaps(conn)
        doomed = [(v,) for v in gaps.orphan_bits]
        conn.executemany(f"DELETE FROM {_vectors.TABLE} WHERE vector_id = ?", doomed)
        data = [(v,) for v in gaps.orphan_floats]
        conn.executemany("DELETE FROM vector_data WHERE vector_id = ?", data)
        actions.append(f"deleted {len(doomed) + len(data)} orphan vector row(s)")
    for check, table in (("orphan_questions", "hype_questions"), ("orphan_derived", "derived"),
                         ("orphan_chunks", "document_chunks")):
        if check in bad:  # table names are constants
            n = conn.execute(f"DELETE FROM {table} WHERE doc_id NOT IN (SELECT id FROM documents)"
                             ).rowcount
            actions.append(f"deleted {n} orphan row(s) from {table}")
    if "stale_questions" in bad:
        n = 0
        for doc_id in _rows_.stale_questions(conn):
            _vectors.delete_slots(conn, doc_id, range(1, SLOTS))
            conn.execute("DELETE FROM hype_questions WHERE doc_id = ?", (doc_id,))
            conn.execute(f"DELETE FROM {QUESTIONS_FTS} WHERE rowid = ?", (doc_id,))
            conn.execute("DELETE FROM derived WHERE doc_id = ? AND kind IN (?, ?)",
                         (doc_id, HYPE_QUESTIONS, HYPE_VECTORS))
            n += 1
        actions.append(f"dropped the stale HyPE questions of {n} document(s)")
    return actions


def _forget_bad_vectors(conn: Connection, bad: set[str]) -> list[str]:
    """Drop hash rows that claim a vector exists when it does not (or is
    unusable), so the write path re-embeds those documents."""
    if not bad & {"documents_missing_vectors", "questions_missing_vectors",
                  "chunks_missing_vectors", "invalid_vectors"}:
        return []
    if "invalid_vectors" in bad:
        for vid in _rows_.vector_damage(conn)[0]:
            doc_id, slot = owner(vid)
            _vectors.delete_slots(conn, doc_id, [slot])
    gaps = _rows_.VectorGaps(conn)
    no_vector = [(d,) for d in sorted(gaps.no_document)]
    for (d,) in no_vector:  # a half-present slot (only in vec0 or only as floats) is freed
        _vectors.delete_slots(conn, d, [0])
    conn.executemany("DELETE FROM derived WHERE doc_id = ? AND kind = 'doc_vector'", no_vector)
    no_qvec = [(d,) for d in sorted(gaps.no_questions)]
    conn.executemany("DELETE FROM derived WHERE doc_id = ? AND kind = 'hype_vectors'", no_qvec)
    no_cvec = [(d,) for d in sorted(gaps.no_chunks)]
    conn.executemany("DELETE FROM derived WHERE doc_id = ? AND kind = 'chunk_vectors'", no_cvec)
    return [f"marked {len(no_vector) + len(no_qvec) + len(no_cvec)} document(s) for "
            "re-embedding"]



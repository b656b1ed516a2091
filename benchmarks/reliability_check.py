"""The independent checker: everything a store must satisfy, read with plain SQL.

A ``postgresql://`` location is checked by benchmarks/reliability_check_pg.py
(the same questions in PostgreSQL's tables); the functions here dispatch.

It is independent of kbstore's own code on purpose: it reads the SQLite file
with plain SQL through a read-only connection, so it can check
kbstore.doctor and the write path rather than trust them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import reliability_check_pg as pg
from benchmarks.reliability_docs import SEED_MARKER, doc_path, is_postgres, markers
from kbstore import Document, FakeEmbedder
from kbstore.backends.sqlite.connection import connect
from kbstore.embed import embedding_text
from kbstore.model import fingerprint_id

SLOTS = 32  # vector_id = doc_id * SLOTS + slot in the SQLite file


def read_only(db: str | os.PathLike[str]) -> Any:
    """A connection that cannot change the file (sqlite-vec loaded, so the
    vec0 table can be read)."""
    return connect(db, mode="read")


def reading(db: str | os.PathLike[str]) -> contextlib.closing[Any]:
    """:func:`read_only` (a PostgreSQL location: a read-only connection with
    the knowledge base's schema on its search path), closed at the end of a
    ``with`` block. Plain SQL the two schemas share runs on either."""
    if is_postgres(db):
        return pg.reading(str(db))
    return contextlib.closing(read_only(db))


def damaged_ids(conn: Any) -> tuple[int, dict[str, set[int]]]:
    """(documents, {kind of half-indexed state: document ids}) in ONE read
    snapshot (every set empty for a healthy store). Written independently of
    kbstore.doctor so each can check the other."""
    if hasattr(conn, "pgconn"):  # a PostgreSQL connection from reading()
        return pg.damaged_ids(conn)
    conn.execute("BEGIN")
    try:
        docs = {r[0]: Document(path=r[1], title=r[2], body=r[3], tags=json.loads(r[4]))
                for r in conn.execute("SELECT id, path, title, body, tags FROM documents")}
        fts = {r[0] for r in conn.execute("SELECT id FROM documents_fts_docsize")}
        bits = {r[0]: r[1] for r in conn.execute("SELECT vector_id, doc_id FROM vectors")}
        floats = {r[0]: (r[1], r[2]) for r in conn.execute(
            "SELECT vector_id, doc_id, length(embedding) FROM vector_data")}
        # schema v5: each float copy carries its sign bits (bit i, LSB first
        # in each byte, set when component i > 0), what the search scans; an
        # older file (a migrate killed before it committed) has no such column
        has_bits = any(r[1] == "bits" for r in conn.execute("PRAGMA table_info(vector_data)"))
        sign_bits = {r[0]: (bytes(r[1]), r[2]) for r in conn.execute(
            "SELECT vector_id, embedding, bits FROM vector_data")} if has_bits else {}
        questions = {(r[0], r[1]) for r in conn.execute(
            "SELECT doc_id, position FROM hype_questions")}
        derived = {(r[0], r[1]): (r[2], r[3], r[4]) for r in conn.execute(
            "SELECT doc_id, kind, content_hash, status, model FROM derived")}
        tags_want = set(conn.execute(
            "SELECT lower(trim(j.value)), d.id FROM documents d, json_each(d.tags) j "
            "WHERE trim(j.value) <> ''").fetchall())
        tags_have = set(conn.execute("SELECT tag, doc_id FROM document_tags").fetchall())
        row = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
        vec_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'"
                               ).fetchone()
    finally:
        conn.execute("COMMIT")
    ids = set(docs)
    fingerprint = json.loads(row[0]) if row else {}
    fp, dim = fingerprint_id(fingerprint), fingerprint.get("dim")
    vec_dim = re.search(r"bit\[(\d+)\]", vec_sql[0] if vec_sql else "")
    # A vector is complete when both its sign bits (vec0) and floats exist.
    vectors = {v: d for v, d in bits.items() if floats.get(v, (None,))[0] == d}
    plain = {v: d for v, (d, _) in floats.items()}
    asked = {d for d, _ in questions}
    return len(docs), {
        "missing_fts": ids - fts,
        "orphan_fts": fts - ids,
        "missing_doc_vector": {d for d in ids if d * SLOTS not in vectors},
        "missing_hash_row": {d for d in ids if (d, "doc_vector") not in derived},
        "stale_hash": {d for d in ids if (d, "doc_vector") in derived
                       and derived[d, "doc_vector"][0] != docs[d].vector_hash()},
        "missing_question_vector": {d for d, p in questions if d * SLOTS + p not in vectors},
        # Questions are current for the content they sit with, and marked so.
        "stale_questions": {d for d in asked & ids
                            if derived.get((d, "hype_questions"), ("", "", ""))[:2]
                            != (docs[d].hype_hash(), "ok")
                            or derived.get((d, "hype_vectors"), ("",))[0]
                            != docs[d].hype_hash()},
        "orphan_vectors": {v // SLOTS for rows in (bits, plain) for v, d in rows.items()
                           if v // SLOTS not in ids or d != v // SLOTS
                           or (v % SLOTS and (v // SLOTS, v % SLOTS) not in questions)},
        "orphan_questions": {d for d, _ in questions if d not in ids},
        "orphan_derived": {d for d, _ in derived if d not in ids},
        # Every vector is the stored embedder's: its model, its size (never a
        # mix of an old and a new embedder).
        "wrong_model_vectors": {d for (d, kind), (_, _, model) in derived.items()
                                if kind in ("doc_vector", "hype_vectors") and model != fp}
        | {v // SLOTS for v, (_, size) in floats.items() if size != 4 * (dim or 0)}
        | ({-1} if vec_dim is None or int(vec_dim.group(1)) != dim else set()),
        "wrong_sign_bits": {v // SLOTS for v, (emb, b) in sign_bits.items()
                            if len(emb) == 4 * (dim or 0) and (b is None or bytes(b) != np.packbits(
                                np.frombuffer(emb, np.float32) > 0, bitorder="little").tobytes())},
        "tag_rows": {d for _, d in tags_want ^ tags_have},
        "half_written": {i for i, d in docs.items()
                         if len(markers(d.title) | markers(d.body)) > 1},
    }


def consistency(conn: Any) -> dict[str, int]:
    """Counts of every kind of half-indexed state in ONE read snapshot (all 0
    for a healthy store); see :func:`damaged_ids`."""
    documents, found = damaged_ids(conn)
    return {"documents": documents, **{k: len(v) for k, v in found.items()}}


def check_store(db: str | os.PathLike[str]) -> dict[str, int]:
    """File integrity plus :func:`consistency`, for a store nobody writes to."""
    if is_postgres(db):
        return pg.check_store(str(db))
    conn = read_only(db)
    try:
        out = {"integrity": 0 if [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
               else 1, "fts_integrity": 0}
        # FTS5's integrity-check is spelled as an INSERT (it writes nothing):
        # the read-only connection allows it for this statement only.
        conn.execute("PRAGMA query_only = OFF")
        try:
            for table in ("documents_fts", "titles_fts"):  # constants
                try:
                    conn.execute(f"INSERT INTO {table} ({table}, rank) "
                                 "VALUES ('integrity-check', 1)")
                except Exception:
                    out["fts_integrity"] += 1
        finally:
            conn.execute("PRAGMA query_only = ON")
        out.update(consistency(conn))
    finally:
        conn.close()
    return out


def damage(counts: dict[str, int]) -> tuple[int, int]:
    """(corrupt, half-indexed) from check_store counts."""
    corrupt = counts["integrity"] + counts["fts_integrity"]
    half = sum(v for k, v in counts.items()
               if k not in ("integrity", "fts_integrity", "documents"))
    return corrupt, half



def embedder_dim(db: Path | str) -> int:
    """The dimension of the embedder the store's fingerprint names."""
    with reading(db) as conn:
        value = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()[0]
    return int((json.loads(value) if isinstance(value, str) else value)["dim"])


def without_questions(db: Path | str) -> list[str]:
    """Paths of the documents that have no current HyPE questions."""
    with reading(db) as conn:
        return [r[0] for r in conn.execute(
            "SELECT path FROM documents d WHERE NOT EXISTS (SELECT 1 FROM derived h "
            "WHERE h.doc_id = d.id AND h.kind = 'hype_questions' AND h.status = 'ok')")]


def digest(db: str | Path) -> str | None:
    """What must not change while a store is only read: the file's bytes (a
    PostgreSQL knowledge base: every row of its tables)."""
    import hashlib

    if is_postgres(db):
        return pg.digest(str(db))
    file = Path(db)
    return hashlib.sha256(file.read_bytes()).hexdigest() if file.exists() else None


def contents(db: Path | str) -> dict[str, tuple[str, str, str]]:
    """path -> (title, body, tags as JSON text) of every stored document. The
    tags are written the same way for both backends (SQLite returns JSON text,
    PostgreSQL a list), so a copy from one to the other compares equal."""
    with reading(db) as conn:
        return {r[0]: (r[1], r[2], _tags_text(r[3])) for r in conn.execute(
            "SELECT path, title, body, tags FROM documents")}


def _tags_text(tags: Any) -> str:
    if not isinstance(tags, str):
        return json.dumps(tags)
    try:
        return json.dumps(json.loads(tags))
    except ValueError:  # damaged on purpose (the fuzzers): compared as it is
        return tags


def vectors_match(db: Path | str) -> list[str]:
    """Every stored vector is exactly what the stored embedder makes of the
    document (or question) now: never an old model's vector under the new
    fingerprint."""
    if is_postgres(db):
        return pg.vectors_match(str(db))
    with reading(db) as conn:
        fp = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'embedder'"
                                     ).fetchone()[0])
        embedder = FakeEmbedder(int(fp["dim"]))
        docs = {r[0]: (r[1], json.loads(r[2]), r[3]) for r in conn.execute(
            "SELECT id, title, tags, body FROM documents")}
        questions = {(r[0], r[1]): r[2] for r in conn.execute(
            "SELECT doc_id, position, question FROM hype_questions")}
        stored = {r[0]: bytes(r[1]) for r in conn.execute(
            "SELECT vector_id, embedding FROM vector_data")}
    bad = []
    for vid, blob in stored.items():
        doc_id, slot = divmod(vid, SLOTS)
        if doc_id not in docs:
            continue  # the consistency check counts orphans
        text = (embedding_text(*docs[doc_id]) if slot == 0
                else questions.get((doc_id, slot)))
        if text is None:
            continue
        want = embedder.embed_documents([text])[0]
        want = want / np.linalg.norm(want)
        have = np.frombuffer(blob, dtype=np.float32)
        if have.shape != want.shape or not np.allclose(have, want, atol=1e-5):
            bad.append(f"vector {vid} is not the {fp['dim']}-d embedder's")
    return bad


# -- lost writes: what the final state may hold after the writers' runs ----------


def expected_markers(finals: list[dict[str, str | None]], seeded: int
                     ) -> dict[str, set[str | None]]:
    """path -> markers the final state may hold (several only for paths more
    than one writer wrote: whichever committed last)."""
    allowed: dict[str, set[str | None]] = {doc_path(i): {SEED_MARKER} for i in range(seeded)}
    touched: dict[str, set[str | None]] = {}
    for final in finals:
        for path, marker in final.items():
            touched.setdefault(path, set()).add(marker)
    allowed.update(touched)
    return allowed


def titles(db: Path | str) -> dict[str, str]:
    """path -> title of every stored document."""
    with reading(db) as conn:
        return {p: t for p, t in conn.execute("SELECT path, title FROM documents")}


def lost_writes(stored: dict[str, str], allowed: dict[str, set[str | None]]) -> list[str]:
    """Documents whose stored title (path -> title) carries a marker the
    writers did not leave there, and documents nobody wrote."""
    lost = []
    for path, options in allowed.items():
        have = next(iter(markers(stored[path])), "?") if path in stored else None
        if have not in options:
            lost.append(f"{path}: stored {have}, expected one of {sorted(map(str, options))}")
    lost += [f"{p}: unexpected document" for p in stored if p not in allowed
             and not p.startswith("projects/racer-")]
    return lost

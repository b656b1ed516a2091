"""The independent checker for a PostgreSQL knowledge base, in plain SQL.

The PostgreSQL half of benchmarks/reliability_check.py (which dispatches
here for a ``postgresql://`` location), written apart from kbstore's own
code (kbstore/backends/postgres/doctor.py) so each can check the other. Every
read of the whole knowledge base is ONE repeatable-read snapshot through a
read-only connection.

What a SIGKILL of a client can do to PostgreSQL is not page damage (the
server outlives the client and its WAL makes every commit atomic): it is a
half-applied sequence of transactions. So *corrupt* here means the
structures kbstore derives inside the database disagree with what they index
-- the BM25 postings and totals with the documents' tsvectors and the HyPE
questions (the counterpart of FTS5's integrity-check), and a table's index
with its heap (the same row count through the primary-key index as through a
sequential scan) -- and *half indexed* means the rows a document's content
implies (vector, hash rows, questions, tags, postings) are missing, stale or
orphaned.
"""

from __future__ import annotations

import contextlib
import json
import random
from typing import Any

import numpy as np

from benchmarks.reliability_docs import markers
from kbstore import Document, FakeEmbedder
from kbstore.embed import embedding_text, fingerprint_id
from kbstore.model import fts_fold

SLOT_CHUNKS = 32  # vector slots 32+ hold chunk vectors (the harness's documents have none)


def checker(url: str) -> Any:
    """A read-only connection to the knowledge base of ``url`` (the
    knowledge base's schema first on its search path)."""
    import psycopg

    from kbstore.backends.postgres.connection import parse

    target = parse(url)
    conn = psycopg.connect(target.conninfo, autocommit=True,
                           options="-c default_transaction_read_only=on")
    conn.execute("SELECT set_config('search_path', %s, false)", (f'"{target.schema}", public',))
    return conn


def reading(url: str) -> contextlib.closing[Any]:
    return contextlib.closing(checker(url))


def _snapshot(conn: Any) -> Any:
    return _Snapshot(conn)


class _Snapshot:
    """``with _Snapshot(conn):`` -- one repeatable-read, read-only transaction."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.tx = conn, conn.transaction()

    def __enter__(self) -> None:
        self.tx.__enter__()
        self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def __exit__(self, *exc: Any) -> None:
        self.tx.__exit__(*exc)


def _fingerprint(conn: Any) -> dict[str, Any]:
    row = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
    value = row[0] if row else {}
    return json.loads(value) if isinstance(value, str) else dict(value)


def _unit(vec: Any) -> np.ndarray:
    vec = np.asarray(vec, dtype=np.float32)
    return vec / (np.linalg.norm(vec) or 1.0)


def damaged(conn: Any) -> dict[str, set[int]]:
    """{kind of half-indexed state: document ids} in ONE snapshot (every set
    empty for a healthy knowledge base). The stored vectors are compared with
    the fake embedder's vectors of the current text, at the stored
    fingerprint's dimension: a stale vector (an old version's, or another
    embedder's) shows."""
    with _snapshot(conn):
        docs = {r[0]: Document(path=r[1], title=r[2], body=r[3], tags=list(r[4]))
                for r in conn.execute("SELECT id, path, title, body, tags FROM documents")}
        vectors = {(r[0], r[1]): np.asarray(r[2], dtype=np.float32) for r in conn.execute(
            "SELECT doc_id, slot, embedding::real[] FROM vectors")}
        questions = {(r[0], r[1]): r[2] for r in conn.execute(
            "SELECT doc_id, position, question FROM hype_questions")}
        derived = {(r[0], r[1]): (r[2], r[3], r[4]) for r in conn.execute(
            "SELECT doc_id, kind, content_hash, status, model FROM derived")}
        tags_want = set(conn.execute(
            "SELECT lower(trim(t.value)), d.id FROM documents AS d, "
            "jsonb_array_elements_text(d.tags) AS t(value) WHERE trim(t.value) <> ''"
        ).fetchall())
        tags_have = set(conn.execute("SELECT tag, doc_id FROM document_tags").fetchall())
        postings = {r[0] for r in conn.execute("SELECT DISTINCT doc_id FROM fts_postings")}
        fingerprint = _fingerprint(conn)
    fp, dim = fingerprint_id(fingerprint) if fingerprint else "", fingerprint.get("dim")
    ids = set(docs)
    want: dict[int, np.ndarray] = {}
    if docs and dim:
        made = FakeEmbedder(int(dim)).embed_documents(
            [embedding_text(d.title, d.tags, d.body) for d in docs.values()])
        want = {key: _unit(vec) for key, vec in zip(docs, made, strict=True)}

    def wrong_vector(key: int) -> bool:
        have = vectors.get((key, 0))
        return have is not None and (have.shape != want[key].shape
                                     or float(np.dot(have, want[key])) < 0.999)

    asked = {d for d, _ in questions}
    return {
        "missing_doc_vector": {d for d in ids if (d, 0) not in vectors},
        "wrong_doc_vector": {d for d in ids if want and wrong_vector(d)},
        "missing_hash_row": {d for d in ids if (d, "doc_vector") not in derived},
        "stale_hash": {d for d in ids if (d, "doc_vector") in derived
                       and derived[d, "doc_vector"][0] != docs[d].vector_hash()},
        "missing_question_vector": {d for d, p in questions if (d, p) not in vectors},
        "stale_questions": {d for d in asked & ids
                            if derived.get((d, "hype_questions"), ("", "", ""))[:2]
                            != (docs[d].hype_hash(), "ok")
                            or derived.get((d, "hype_vectors"), ("",))[0]
                            != docs[d].hype_hash()},
        "orphan_vectors": {d for d, s in vectors if d not in ids
                           or (0 < s < SLOT_CHUNKS and (d, s) not in questions)},
        "orphan_questions": {d for d, _ in questions if d not in ids},
        "orphan_derived": {d for d, _ in derived if d not in ids},
        "wrong_model_vectors": {d for (d, kind), (_, _, model) in derived.items()
                                if kind in ("doc_vector", "hype_vectors") and model != fp}
        | {d for (d, _), vec in vectors.items() if vec.shape != (dim,)},
        "tag_rows": {d for _, d in tags_want ^ tags_have},
        "missing_postings": ids - postings,
        "orphan_postings": postings - ids,
        "half_written": {i for i, d in docs.items()
                         if len(markers(d.title) | markers(d.body)) > 1},
    }


def consistency(conn: Any) -> dict[str, int]:
    return {k: len(v) for k, v in damaged(conn).items()}


def damaged_ids(conn: Any) -> tuple[int, dict[str, set[int]]]:
    found = damaged(conn)
    return conn.execute("SELECT count(*) FROM documents").fetchone()[0], found


# -- corrupt: derived index structures disagree with what they index ----------------

# Postings of every document's tsvector (title A, tags B, body C), as written
# here from the documented layout of fts_postings (migration 0001).
_WANT_POSTINGS = """
    SELECT x.lexeme, d.id, coalesce(cardinality(array_positions(x.weights, 'A')), 0),
           coalesce(cardinality(array_positions(x.weights, 'B')), 0),
           coalesce(cardinality(array_positions(x.weights, 'C')), 0)
               + coalesce(cardinality(array_positions(x.weights, 'D')), 0),
           (SELECT sum(cardinality(y.positions)) FROM unnest(d.fts) AS y)::integer
    FROM documents AS d, unnest(d.fts) AS x"""
_HAVE_POSTINGS = ("SELECT term, doc_id, tf_title, tf_tags, tf_body, doc_len "
                  "FROM fts_postings")
_WANT_TITLES = """
    SELECT x.lexeme, d.id, cardinality(x.positions),
           (SELECT sum(cardinality(y.positions)) FROM unnest(d.title_fts) AS y)::integer
    FROM documents AS d, unnest(d.title_fts) AS x"""
_HAVE_TITLES = "SELECT term, doc_id, tf, title_len FROM title_postings"
_WANT_QUESTIONS = """
    SELECT x.lexeme, q.doc_id, cardinality(x.positions),
           (SELECT sum(cardinality(y.positions)) FROM unnest(q.v) AS y)::integer
    FROM (SELECT doc_id, to_tsvector('english', regexp_replace(
              string_agg(coalesce(folded, question), E'\\n' ORDER BY position),
              '[!-/:-@\\[-`{-~]+', ' ', 'g')) AS v
          FROM hype_questions GROUP BY doc_id) AS q, unnest(q.v) AS x"""
_HAVE_QUESTIONS = "SELECT term, doc_id, tf, q_len FROM question_postings"
_KEYED = {"documents": "id", "vectors": "doc_id, slot", "derived": "doc_id, kind",
          "hype_questions": "doc_id, position", "fts_postings": "term, doc_id",
          "document_tags": "tag, doc_id"}


def _mismatch(conn: Any, want: str, have: str) -> int:
    return int(conn.execute(f"SELECT (SELECT count(*) FROM (({want}) EXCEPT ALL ({have})) a) "
                            f"+ (SELECT count(*) FROM (({have}) EXCEPT ALL ({want})) b)"
                            ).fetchone()[0])  # constant SQL


def _fts_integrity(conn: Any) -> int:
    """Postings (documents, titles, questions) and their totals that disagree
    with the stored tsvectors and questions; 0 when they all agree. The
    question totals count the documents whose questions have a lexeme (a
    question of punctuation or stop words only has none: migration 0003)."""
    bad = _mismatch(conn, _WANT_POSTINGS, _HAVE_POSTINGS)
    bad += _mismatch(conn, _WANT_TITLES, _HAVE_TITLES)
    bad += _mismatch(conn, _WANT_QUESTIONS, _HAVE_QUESTIONS)
    totals = conn.execute(
        "SELECT (SELECT coalesce(sum(docs), 0) FROM fts_totals) = (SELECT count(*) FROM "
        "documents), (SELECT coalesce(sum(tokens), 0) FROM fts_totals) = (SELECT coalesce("
        "sum(n), 0) FROM (SELECT DISTINCT doc_id, doc_len AS n FROM fts_postings) AS p), "
        "(SELECT coalesce(sum(title_tokens), 0) FROM fts_totals) = (SELECT coalesce(sum(n), "
        "0) FROM (SELECT DISTINCT doc_id, title_len AS n FROM title_postings) AS t), "
        "(SELECT coalesce(sum(docs), 0) FROM question_totals) = (SELECT count(DISTINCT "
        "doc_id) FROM question_postings), (SELECT coalesce(sum(tokens), 0) FROM "
        "question_totals) = (SELECT coalesce(sum(n), 0) FROM (SELECT DISTINCT doc_id, q_len "
        "AS n FROM question_postings) AS q)").fetchone()
    return bad + sum(not ok for ok in totals)


def _index_integrity(conn: Any) -> int:
    """Tables whose primary-key index and heap disagree (row count through an
    index-only scan vs a sequential scan), and duplicate paths."""
    bad = 0
    for table, key in _KEYED.items():  # constants
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        by_index = conn.execute(f"SELECT count(*) FROM (SELECT {key} FROM {table} "
                                f"ORDER BY {key}) AS k").fetchone()[0]
        conn.execute("SET LOCAL enable_seqscan = on")
        conn.execute("SET LOCAL enable_indexscan = off")
        conn.execute("SET LOCAL enable_indexonlyscan = off")
        by_heap = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        conn.execute("SET LOCAL enable_indexscan = on")
        conn.execute("SET LOCAL enable_indexonlyscan = on")
        bad += by_index != by_heap
    bad += conn.execute("SELECT count(*) - count(DISTINCT path) FROM documents").fetchone()[0]
    return int(bad)


def check_store(url: str) -> dict[str, int]:
    """Integrity counts plus :func:`consistency`, for a knowledge base nobody
    writes to (the keys of the SQLite checker's, plus PostgreSQL's own)."""
    with reading(url) as conn:
        with _snapshot(conn):
            out = {"integrity": _index_integrity(conn), "fts_integrity": _fts_integrity(conn)}
        out["documents"] = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        found = consistency(conn)
        out.update(found)
        out["unfolded_fts"] = len(unfolded(conn))
    return out


def unfolded(conn: Any) -> set[int]:
    """Documents whose tsvectors are not made from kbstore's case folding of
    their text (the rule of the query's words, migration 0004)."""
    rows = conn.execute("SELECT id, title, tags, body FROM documents ORDER BY id").fetchall()
    if not rows:
        return set()
    ids = [r[0] for r in rows]
    return {r[0] for r in conn.execute(
        "SELECT d.id FROM documents AS d JOIN unnest(%s::bigint[], %s::text[], %s::text[], "
        "%s::text[]) AS u(id, title, tags, body) ON u.id = d.id "
        "WHERE d.fts IS DISTINCT FROM document_vector(u.title, u.tags, u.body) "
        "OR d.title_fts IS DISTINCT FROM title_vector(u.title)",
        (ids, [fts_fold(r[1]) for r in rows],
         [fts_fold(json.dumps(list(r[2]), ensure_ascii=False)) for r in rows],
         [fts_fold(r[3]) for r in rows])).fetchall()}


# -- what the write paths' rules read -----------------------------------------------------


def vectors_match(url: str) -> list[str]:
    """Every stored document/question vector is the stored embedder's vector
    of the current text (see reliability_check.vectors_match)."""
    with reading(url) as conn, _snapshot(conn):
        dim = int(_fingerprint(conn)["dim"])
        docs = {r[0]: (r[1], list(r[2]), r[3]) for r in conn.execute(
            "SELECT id, title, tags, body FROM documents")}
        questions = {(r[0], r[1]): r[2] for r in conn.execute(
            "SELECT doc_id, position, question FROM hype_questions")}
        stored = conn.execute("SELECT doc_id, slot, embedding::real[] FROM vectors").fetchall()
    embedder, bad = FakeEmbedder(dim), []
    for doc_id, slot, vec in stored:
        if doc_id not in docs or slot >= SLOT_CHUNKS:
            continue
        text = embedding_text(*docs[doc_id]) if slot == 0 else questions.get((doc_id, slot))
        if text is None:
            continue
        want, have = _unit(embedder.embed_documents([text])[0]), np.asarray(vec, np.float32)
        if have.shape != want.shape or not np.allclose(have, want, atol=1e-5):
            bad.append(f"vector {doc_id}/{slot} is not the {dim}-d embedder's")
    return bad


def bad_vectors_stored(url: str) -> int:
    """NaN, infinite, zero or wrong-size vectors in the knowledge base."""
    with reading(url) as conn:
        dim = _fingerprint(conn).get("dim")
        rows = conn.execute("SELECT embedding::real[] FROM vectors").fetchall()
    return sum(len(v) != dim or not np.all(np.isfinite(v)) or not np.any(v)
               for v in (np.asarray(r[0], np.float32) for r in rows))


def digest(url: str) -> str:
    """A hash of every row of every table of the knowledge base (what an
    export must leave unchanged)."""
    import hashlib

    from psycopg import sql

    from kbstore.backends.postgres.connection import parse

    schema = parse(url).schema
    out = hashlib.sha256()
    with reading(url) as conn, _snapshot(conn):
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (schema,))]
        for table in tables:
            rows = conn.execute(sql.SQL("SELECT t::text FROM {} AS t ORDER BY 1").format(
                sql.Identifier(table))).fetchall()
            out.update(table.encode() + b"\0" + "\n".join(r[0] for r in rows).encode())
    return out.hexdigest()


# Per kind of benchmarks.reliability_path_inputs.damage_plan: a statement
# over the documents' ids (True) or without them (False). doc_floats has no
# counterpart: a vector is one row here, not sign bits plus floats.
_DAMAGE = {
    "doc_vectors": ("DELETE FROM vectors WHERE slot = 0 AND doc_id = ANY(%s)", True),
    "doc_hash_rows": ("DELETE FROM derived WHERE kind = 'doc_vector' AND doc_id = ANY(%s)",
                      True),
    "tags": ("DELETE FROM document_tags", False),
    "stale_hash": ("UPDATE derived SET content_hash = 'stale' WHERE kind = 'doc_vector' "
                   "AND doc_id = ANY(%s)", True),
    "fusion": ("UPDATE meta SET value = '[1, 2]'::jsonb WHERE key = 'fusion'", False),
    "question_vectors": ("DELETE FROM vectors WHERE slot BETWEEN 1 AND 31 "
                         "AND doc_id = ANY(%s)", True),
}


def inflict_damage(url: str, rng: random.Random) -> list[str]:
    """The SQLite harness's damage (damage_plan) in PostgreSQL's tables, in
    one transaction; returns what was done."""
    import psycopg

    from benchmarks.reliability_path_inputs import damage_plan, describe_damage
    from kbstore.backends.postgres.connection import parse

    target = parse(url)
    with psycopg.connect(target.conninfo) as conn:  # one transaction
        conn.execute("SELECT set_config('search_path', %s, true)", (f'"{target.schema}", public',))
        plan = damage_plan([r[0] for r in conn.execute("SELECT id FROM documents ORDER BY id")],
                           rng)
        for kind, ids in plan:
            if kind in _DAMAGE:
                sql, per_ids = _DAMAGE[kind]
                conn.execute(sql, (ids,) if per_ids else None)
    return describe_damage(plan)

"""Checks and repairs of a PostgreSQL knowledge base (``kbstore doctor``).

As on SQLite, everything but the documents is derived and can be rebuilt
from the ``documents`` table: the BM25 postings and totals (kept by
triggers, so a disabled trigger or a bulk load with triggers off leaves
them wrong), tag rows, hash rows, vectors. The expected schema objects are
read from the migration files; a dropped index, trigger or function is
re-created from its statement there. Checks read one repeatable-read
snapshot; repairs run in one transaction under the exclusive knowledge base
lock, so they are safe while others write (writers wait, then re-check).
Both read the documents a page at a time (fold.BATCH, by id) and leave
comparisons of whole tables to the server, so the memory they take is
bounded by a page, not by the size of the knowledge base.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from ...migrations import steps  # package-dir mapped
from ...model import (
    CHUNK_VECTORS,
    DOC_VECTOR,
    HYPE_QUESTIONS,
    HYPE_VECTORS,
    Check,
    Document,
    tag_keys,
)
from ...redact import redact
from ..checks import Tally, derived_checks, guarded, invalid_tag_docs
from .connection import rebuild_holders, snapshot, write_transaction
from .fold import _FIRST_ID, _keyset, refold, unfolded_documents, unfolded_questions
from .rebuild import check_dim
from .write import CHUNK_SLOT, STAGING, staging_exists, write_tags

SAMPLE = 5
_OBJECT = re.compile(r"^CREATE (?:OR REPLACE )?(TABLE|INDEX|TRIGGER|FUNCTION) (\w+)",
                     re.MULTILINE)
# Statements a repair can run again: indexes and triggers end at the first
# semicolon, functions at their closing dollar quote.
_STATEMENT = {"index": r"^CREATE INDEX {name} [^;]*;", "trigger": r"^CREATE TRIGGER {name} [^;]*;",
              "function": r"^CREATE (?:OR REPLACE )?FUNCTION {name}\(.*?\$\$;"}
# The HNSW indexes are made by set_vector_dimension() (migration 0001) once the
# dimension is known; the same definitions, for re-creating a dropped one.
HNSW = {"vectors_doc_hnsw": "slot = 0", "vectors_hype_hnsw": "slot BETWEEN 1 AND 31",
        "vectors_chunk_hnsw": "slot >= 32"}
_POSTINGS_WANT = """
    SELECT x.lexeme COLLATE "C" AS term, d.id AS doc_id,
           cardinality(array_positions(x.weights, 'A')) AS tf_title,
           cardinality(array_positions(x.weights, 'B')) AS tf_tags,
           cardinality(x.positions) - cardinality(array_positions(x.weights, 'A'))
               - cardinality(array_positions(x.weights, 'B')) AS tf_body,
           (sum(cardinality(x.positions)) OVER (PARTITION BY d.id))::integer AS doc_len
    FROM documents AS d, unnest(d.fts) AS x"""
_TITLES_WANT = """
    SELECT x.lexeme COLLATE "C" AS term, d.id AS doc_id, cardinality(x.positions) AS tf,
           (sum(cardinality(x.positions)) OVER (PARTITION BY d.id))::integer AS title_len
    FROM documents AS d, unnest(d.title_fts) AS x"""

# A document's questions as one text (question_postings, migration 0003).
_QUESTIONS_WANT = """
    SELECT x.lexeme COLLATE "C" AS term, g.doc_id, cardinality(x.positions) AS tf,
           (sum(cardinality(x.positions)) OVER (PARTITION BY g.doc_id))::integer AS q_len
    FROM (SELECT DISTINCT doc_id FROM hype_questions) AS g,
         unnest(questions_vector(g.doc_id)) AS x"""


@lru_cache(maxsize=1)
def migration_text() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for _, path in steps("postgres"))


@lru_cache(maxsize=1)
def expected_objects() -> dict[str, str]:
    """name -> kind ('table', 'index', 'trigger', 'function') the migrations create."""
    return {name: kind.lower() for kind, name in _OBJECT.findall(migration_text())}


def _statement(kind: str, name: str) -> str | None:
    # the last definition: a later migration may replace a function
    found = re.findall(_STATEMENT[kind].format(name=re.escape(name)), migration_text(),
                       re.MULTILINE | re.DOTALL)
    return found[-1] if found else None


def _present(conn: Any, schema: str) -> dict[str, str]:
    """What the schema holds: name -> kind ('trigger_disabled' for a trigger
    that is switched off)."""
    rows = conn.execute("""
        SELECT c.relname, CASE c.relkind WHEN 'i' THEN 'index' ELSE 'table' END
        FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = %(s)s AND c.relkind IN ('r', 'i', 'p')
        UNION ALL
        SELECT t.tgname, CASE WHEN t.tgenabled = 'D' THEN 'trigger_disabled' ELSE 'trigger' END
        FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
        JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = %(s)s AND NOT t.tgisinternal
        UNION ALL
        SELECT p.proname, 'function' FROM pg_proc AS p
        JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = %(s)s
    """, {"s": schema}).fetchall()
    return {name: kind for name, kind in rows}


def _schema_check(conn: Any, schema: str) -> Check:
    present = _present(conn, schema)
    wrong = sorted(n for n, kind in expected_objects().items() if present.get(n) != kind)
    fixable = all(expected_objects()[n] != "table" for n in wrong)
    return Check("schema", len(wrong), "missing or disabled schema objects: "
                 f"{', '.join(wrong)}" + ("" if fixable else "; a lost table cannot be rebuilt:"
                                          " `kbstore copy` what is left into a new knowledge "
                                          "base") if wrong else "", fixable=fixable,
                 sample=wrong[:SAMPLE])


def _integrity(conn: Any, schema: str) -> Check:
    bad = [f"constraint {r[0]} is not validated" for r in conn.execute(
        "SELECT c.conname FROM pg_constraint AS c JOIN pg_namespace AS n "
        "ON n.oid = c.connamespace WHERE n.nspname = %s AND NOT c.convalidated",
        (schema,)).fetchall()]
    conn.execute("SELECT count(*) FROM documents").fetchone()  # every row readable
    return Check("integrity", len(bad), "; ".join(bad[:3]) or "constraints valid, documents "
                 "readable", fixable=False, sample=bad[:SAMPLE])


def _index_check(conn: Any, schema: str) -> Check:
    bad = [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND NOT (i.indisvalid AND i.indisready) ORDER BY 1",
        (schema,)).fetchall()]
    return Check("indexes", len(bad), f"invalid indexes (an interrupted build): "
                 f"{', '.join(bad)}" if bad else "", sample=bad[:SAMPLE])


def _meta(conn: Any, key: str) -> Any:
    row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
    return None if row is None else row[0]


def _meta_checks(conn: Any, schema: str, dim: int | None) -> tuple[list[Check], bool]:
    from ...model import fingerprint_id

    fusion = _meta(conn, "fusion")
    checks = [Check("meta_fusion", 0 if isinstance(fusion, dict) else 1, "" if isinstance(
        fusion, dict) else f"stored fusion defaults are not a JSON object: {fusion!r:.80}")]
    stored = _meta(conn, "embedder")
    if not isinstance(stored, dict) or not isinstance(stored.get("dim"), int):
        checks.append(Check("fingerprint", 1, "no embedder fingerprint; documents are kept. "
                            "Run `kbstore doctor --fix --embedder NAME` to record one and "
                            "re-embed", fixable=False))
        return checks, False
    present = _present(conn, schema)
    lost = [name for name in HNSW if present.get(name) != "index"]
    if dim != stored["dim"] or lost:
        what = ("missing" if dim is None else f"{dim}-dimensional") if dim != stored["dim"] \
            else f"without its HNSW index ({', '.join(lost)})"
        checks.append(Check("vector_table", 1, f"vector column is {what}, the embedder "
                            f"{fingerprint_id(stored)} makes {stored['dim']}-dimensional "
                            "vectors"))
        return checks, dim == stored["dim"]
    checks.append(Check("vector_table", 0, f"pgvector column, {dim} dimensions, HNSW indexes"))
    running = [p for p in rebuild_holders(conn, schema) if p != conn.info.backend_pid]
    if staging_exists(conn, schema) and running:
        checks.append(Check("rebuild_in_progress", 0, "a `kbstore reembed` is running "
                            f"(server process {running[0]}); the old vectors serve until it "
                            "swaps the new ones in", problem=False))
    elif staging_exists(conn, schema):
        checks.append(Check("rebuild_in_progress", 1, "a `kbstore reembed` was interrupted; "
                            "the old vectors still serve. Run it again to finish, or --fix "
                            "to discard the staged vectors", problem=False))
    return checks, True


def _ids(conn: Any, sql: str, *args: Any) -> set[int]:
    return {int(r[0]) for r in conn.execute(sql, args).fetchall()}


_LAST_ID = 2 ** 63 - 1  # the last page's range reaches past every bigint id
# Statements over whole tables whose answer is the damaged documents: the
# server compares the tables and returns a count and the sample (_counted).
_POSTINGS_OFF = (
    f"SELECT doc_id FROM (({_POSTINGS_WANT}) EXCEPT SELECT term, doc_id, tf_title, tf_tags, "
    "tf_body, doc_len FROM fts_postings) AS a UNION SELECT doc_id FROM (SELECT term, doc_id, "
    f"tf_title, tf_tags, tf_body, doc_len FROM fts_postings EXCEPT ({_POSTINGS_WANT})) AS b "
    f"UNION SELECT doc_id FROM (({_TITLES_WANT}) EXCEPT SELECT term, doc_id, tf, title_len "
    "FROM title_postings) AS c UNION SELECT doc_id FROM (SELECT term, doc_id, tf, title_len "
    f"FROM title_postings EXCEPT ({_TITLES_WANT})) AS d "
    f"UNION SELECT doc_id FROM (({_QUESTIONS_WANT}) EXCEPT SELECT term, doc_id, tf, q_len "
    "FROM question_postings) AS e UNION SELECT doc_id FROM (SELECT term, doc_id, tf, q_len "
    f"FROM question_postings EXCEPT ({_QUESTIONS_WANT})) AS f")
_ORPHAN_QUESTIONS = ("SELECT q.doc_id FROM hype_questions AS q LEFT JOIN documents AS d "
                     "ON d.id = q.doc_id WHERE d.id IS NULL")
# chunk n has vector slot CHUNK_SLOT + n; slots 1..CHUNK_SLOT-1 are question positions
_ORPHAN_VECTORS = (
    "SELECT v.doc_id FROM vectors AS v LEFT JOIN documents AS d ON d.id = v.doc_id "
    "LEFT JOIN hype_questions AS q ON q.doc_id = v.doc_id AND q.position = v.slot "
    "LEFT JOIN document_chunks AS c ON c.doc_id = v.doc_id AND c.position = v.slot - %(chunk)s "
    "WHERE d.id IS NULL OR (v.slot > 0 AND v.slot < %(chunk)s AND q.doc_id IS NULL) "
    "OR (v.slot >= %(chunk)s AND c.doc_id IS NULL)")
_DOCUMENTS_MISSING = ("SELECT d.id AS doc_id FROM documents AS d LEFT JOIN vectors AS v "
                      "ON v.doc_id = d.id AND v.slot = 0 WHERE v.doc_id IS NULL")
_QUESTIONS_MISSING = ("SELECT q.doc_id FROM hype_questions AS q JOIN documents AS d ON d.id = "
                      "q.doc_id LEFT JOIN vectors AS v ON v.doc_id = q.doc_id AND v.slot = "
                      "q.position WHERE v.doc_id IS NULL")
_CHUNKS_MISSING = ("SELECT c.doc_id FROM document_chunks AS c JOIN documents AS d ON d.id = "
                   "c.doc_id LEFT JOIN vectors AS v ON v.doc_id = c.doc_id AND v.slot = "
                   "c.position + %(chunk)s WHERE v.doc_id IS NULL")
_INVALID_VECTORS = ("SELECT doc_id FROM vectors WHERE vector_dims(embedding) <> %(dim)s "
                    "OR vector_norm(embedding) = 0")
_TAG_DETAIL = "documents whose exact-tag rows disagree with their tags"


def _counted(conn: Any, sql: str, **params: Any) -> tuple[int, list[int]]:
    """How many distinct documents ``sql`` (a ``doc_id`` column) names, and
    the SAMPLE smallest: the server does the work, Python gets SAMPLE rows."""
    rows = conn.execute(f"SELECT u.doc_id, count(*) OVER () FROM (SELECT DISTINCT s.doc_id "
                        f"FROM ({sql}) AS s) AS u ORDER BY u.doc_id LIMIT %(sample)s",
                        {**params, "sample": SAMPLE}).fetchall()
    return (int(rows[0][1]) if rows else 0), [int(r[0]) for r in rows]


def _pages(conn: Any) -> Iterator[tuple[int, int, dict[int, Document]]]:
    """The documents BATCH at a time (fold._keyset), each page with the id
    range (lo, hi] it covers. The ranges follow one another up to the
    largest bigint (the last one may hold no document), so every row keyed
    by doc_id, a deleted document's too, falls in exactly one page."""
    lo = _FIRST_ID
    for rows in _keyset(conn, "SELECT id, path, title, body, tags FROM documents "
                        "WHERE id > %s ORDER BY id LIMIT %s", (_FIRST_ID,)):
        hi = int(rows[-1][0])
        yield lo, hi, {int(r[0]): Document(path=r[1], title=r[2], body=r[3], tags=list(r[4]))
                       for r in rows}
        lo = hi
    yield lo, _LAST_ID, {}


def _row_checks(conn: Any, fp: str | None, dim: int | None, vectors_ok: bool) -> list[Check]:
    """Rows against the documents, a page of documents at a time (memory is
    bounded by a page, not by the knowledge base); comparisons of whole
    tables run in the server."""
    tally = Tally(SAMPLE)
    tally.counted("fts_postings", *_counted(conn, _POSTINGS_OFF),
                  "documents whose BM25 postings disagree with their text or HyPE questions (or "
                  "postings of deleted documents)")
    unfolded = sorted(unfolded_questions(conn))
    tally.add("fts_fold", unfolded_documents(conn) | _ids(
        conn, "SELECT id FROM documents WHERE id = ANY(%s)", unfolded),
        "documents whose full-text vectors are not made from kbstore's case folding "
        "(text or HyPE questions edited in psql: the server's folding follows its locale)")
    totals = conn.execute(
        "SELECT (SELECT coalesce(sum(docs), 0) FROM fts_totals), (SELECT count(*) FROM "
        "documents), (SELECT coalesce(sum(tokens), 0) FROM fts_totals), (SELECT coalesce("
        "sum(doc_len), 0) FROM (SELECT DISTINCT doc_id, doc_len FROM fts_postings) AS p), "
        "(SELECT coalesce(sum(title_tokens), 0) FROM fts_totals), (SELECT coalesce("
        "sum(title_len), 0) FROM (SELECT DISTINCT doc_id, title_len FROM title_postings) AS t), "
        "(SELECT coalesce(sum(docs), 0) FROM question_totals), (SELECT count(DISTINCT doc_id) "
        "FROM question_postings), (SELECT coalesce(sum(tokens), 0) FROM question_totals), "
        "(SELECT coalesce(sum(q_len), 0) FROM (SELECT DISTINCT doc_id, q_len FROM "
        "question_postings) AS q)"
    ).fetchone()
    labels = ("documents", "tokens", "title tokens", "question documents", "question tokens")
    off = [label for n, label in enumerate(labels)
           if int(totals[2 * n]) != int(totals[2 * n + 1])]
    tally.note(Check("fts_totals", len(off), f"BM25 totals disagree with the postings: "
                     f"{', '.join(off)}" if off else "", sample=off))
    tally.add("tag_rows", (), _TAG_DETAIL)  # listed here; counted page by page below
    tally.counted("orphan_questions", *_counted(conn, _ORPHAN_QUESTIONS),
                  "HyPE questions of deleted documents")
    for lo, hi, docs in _pages(conn):
        want = {(key, d) for d, doc in docs.items() for key in tag_keys(doc.tags)}
        have = {(r[0], int(r[1])) for r in conn.execute(
            "SELECT tag, doc_id FROM document_tags WHERE doc_id > %s AND doc_id <= %s",
            (lo, hi))}
        tally.add("tag_rows", {d for _, d in want ^ have} - invalid_tag_docs(docs), _TAG_DETAIL)
        derived = conn.execute("SELECT doc_id, kind, content_hash, model, status, error "
                               "FROM derived WHERE doc_id > %s AND doc_id <= %s",
                               (lo, hi)).fetchall()
        derived_checks(tally.add, docs, derived, fp)
    if vectors_ok:
        for name, sql, detail in (
                ("orphan_vectors", _ORPHAN_VECTORS,
                 "vectors of deleted documents, questions or chunks"),
                ("documents_missing_vectors", _DOCUMENTS_MISSING,
                 "documents without their document vector"),
                ("questions_missing_vectors", _QUESTIONS_MISSING,
                 "documents whose HyPE questions lack vectors"),
                ("chunks_missing_vectors", _CHUNKS_MISSING,
                 "long documents whose chunks lack vectors"),
                ("invalid_vectors", _INVALID_VECTORS,
                 "documents with zero or wrong-size vectors")):
            tally.counted(name, *_counted(conn, sql, chunk=CHUNK_SLOT, dim=dim), detail)
    return tally.checks()


def diagnose(conn: Any, schema: str, fp: str | None, dim: int | None) -> list[Check]:
    checks = []
    with snapshot(conn):
        for name, check in (("integrity", _integrity), ("schema", _schema_check),
                            ("indexes", _index_check)):
            checks.append(guarded(name, check, conn, schema))
        setup, vectors_ok = _meta_checks(conn, schema, dim)
        checks += setup
        try:
            checks += _row_checks(conn, fp, dim, vectors_ok)
        except Exception as exc:
            checks.append(Check("tables", 1, f"could not compare the tables: {redact(str(exc))}",
                                fixable=False))
    return checks


# -- repairs -------------------------------------------------------------------------


def repair(conn: Any, schema: str, bad: set[str], defaults: dict[str, Any]) -> list[str]:
    """Rebuild what needs no embedder, in one transaction under the exclusive
    lock. Vectors that must be re-made lose their hash rows, so the write
    path re-embeds them afterwards."""
    from psycopg.types.json import Jsonb

    actions: list[str] = []
    with write_transaction(conn, schema, exclusive=True):
        if "schema" in bad:
            actions += _recreate_objects(conn, schema)
            bad |= {"fts_postings", "fts_totals", "tag_rows"}
        if "meta_fusion" in bad:
            conn.execute("INSERT INTO meta (key, value) VALUES ('fusion', %s) ON CONFLICT (key) "
                         "DO UPDATE SET value = excluded.value", (Jsonb(defaults),))
            actions.append("rewrote the stored fusion defaults")
        if "indexes" in bad:
            for (name,) in conn.execute(
                    "SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = "
                    "i.indexrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE "
                    "n.nspname = %s AND NOT (i.indisvalid AND i.indisready)",
                    (schema,)).fetchall():
                conn.execute(f'REINDEX INDEX "{schema}"."{name}"')  # names from the catalog
                actions.append(f"rebuilt index {name}")
        if "fts_fold" in bad:
            done = refold(conn)
            actions.append(f"made the full-text vectors of {done} document(s) again from "
                           "folded text")
        if bad & {"fts_postings", "fts_totals"}:
            conn.execute("DELETE FROM fts_postings")
            conn.execute("DELETE FROM title_postings")
            conn.execute("DELETE FROM fts_totals")
            # a page of documents (or of the questions' documents) per call: the
            # server's arrays stay as small as a page
            for rows in _keyset(conn, "SELECT id FROM documents WHERE id > %s ORDER BY id "
                                "LIMIT %s", (_FIRST_ID,)):
                conn.execute("SELECT fts_index(array_agg(id ORDER BY id), array_agg(fts ORDER BY "
                             "id), array_agg(title_fts ORDER BY id), 1) FROM documents "
                             "WHERE id = ANY(%s)", ([r[0] for r in rows],))
            conn.execute("DELETE FROM question_postings")
            conn.execute("DELETE FROM question_totals")
            for rows in _keyset(conn, "SELECT DISTINCT doc_id FROM hype_questions WHERE doc_id > "
                                "%s ORDER BY doc_id LIMIT %s", (_FIRST_ID,)):
                conn.execute("SELECT questions_index(%s::bigint[])", ([r[0] for r in rows],))
            actions.append("rebuilt the BM25 postings and totals from the documents and "
                           "questions")
        if "tag_rows" in bad:
            conn.execute("DELETE FROM document_tags")
            for rows in _keyset(conn, "SELECT id, tags FROM documents WHERE id > %s "
                                "ORDER BY id LIMIT %s", (_FIRST_ID,)):
                write_tags(conn, [(int(r[0]), list(r[1])) for r in rows])
            actions.append("rebuilt the exact-tag rows")
        if "vector_table" in bad:
            actions += _repair_vector_table(conn, schema)
        if "rebuild_in_progress" in bad and not [
                p for p in rebuild_holders(conn, schema) if p != conn.info.backend_pid]:
            # (re-checked under the lock: a reembed may have started meanwhile)
            conn.execute(f"DROP TABLE IF EXISTS {STAGING}")
            actions.append("discarded the vectors staged by an interrupted reembed")
        if "secrets_in_errors" in bad:
            for rows in _keyset(conn, "SELECT doc_id, kind, error FROM derived WHERE error IS "
                                "NOT NULL AND (doc_id, kind) > (%s, %s) ORDER BY doc_id, kind "
                                "LIMIT %s", (_FIRST_ID, "")):
                with conn.cursor() as cur:
                    cur.executemany("UPDATE derived SET error = %s WHERE doc_id = %s AND "
                                    "kind = %s", [(redact(e), d, k) for d, k, e in rows
                                                  if redact(e) != e])
            actions.append("redacted credentials in stored LLM errors")
        actions += _delete_orphans(conn, bad)
        actions += _forget_bad_vectors(conn, bad)
    return actions


def _recreate_objects(conn: Any, schema: str) -> list[str]:
    present = _present(conn, schema)
    done = []
    order = {"function": 0, "index": 1, "trigger": 2}
    for name, kind in sorted(expected_objects().items(), key=lambda i: order.get(i[1], 3)):
        if present.get(name) == kind or kind == "table":
            continue
        if kind == "trigger" and present.get(name) == "trigger_disabled":
            table = conn.execute("SELECT c.relname FROM pg_trigger AS t JOIN pg_class AS c ON "
                                 "c.oid = t.tgrelid JOIN pg_namespace AS n ON n.oid = "
                                 "c.relnamespace WHERE n.nspname = %s AND t.tgname = %s",
                                 (schema, name)).fetchone()[0]
            conn.execute(f'ALTER TABLE "{table}" ENABLE TRIGGER "{name}"')  # catalog names
            done.append(f"enabled {name}")
            continue
        statement = _statement(kind, name)
        if statement:
            conn.execute(statement)  # kbstore's own migration text
            done.append(name)
    return [f"re-created {', '.join(done)}"] if done else []


def _repair_vector_table(conn: Any, schema: str) -> list[str]:
    stored = _meta(conn, "embedder") or {}
    dim = check_dim(stored.get("dim"))
    from .read import vector_dim

    if vector_dim(conn) == dim:
        present = _present(conn, schema)
        made = []
        for name, where in HNSW.items():
            if present.get(name) != "index":
                conn.execute(f"CREATE INDEX {name} ON vectors USING hnsw "
                             f"(embedding vector_cosine_ops) WHERE {where}")  # constants
                made.append(name)
        return [f"re-created {', '.join(made)}"] if made else []
    conn.execute("SELECT set_vector_dimension(%s)", (dim,))
    conn.execute("DELETE FROM derived WHERE kind IN (%s, %s, %s)",
                 (DOC_VECTOR, HYPE_VECTORS, CHUNK_VECTORS))
    return [f"reshaped the vector column to {dim} dimensions; every document will be "
            "re-embedded"]


def _delete_orphans(conn: Any, bad: set[str]) -> list[str]:
    actions = []
    if "orphan_vectors" in bad:
        n = conn.execute("DELETE FROM vectors AS v WHERE NOT EXISTS (SELECT 1 FROM documents "
                         "AS d WHERE d.id = v.doc_id) OR (v.slot BETWEEN 1 AND 31 AND NOT "
                         "EXISTS (SELECT 1 FROM hype_questions AS q WHERE q.doc_id = v.doc_id "
                         "AND q.position = v.slot)) OR (v.slot >= 32 AND NOT EXISTS (SELECT 1 "
                         "FROM document_chunks AS c WHERE c.doc_id = v.doc_id AND "
                         "c.position = v.slot - 32))").rowcount
        actions.append(f"deleted {n} orphan vector row(s)")
    for check, table in (("orphan_questions", "hype_questions"), ("orphan_derived", "derived")):
        if check in bad:  # table names are constants
            n = conn.execute(f"DELETE FROM {table} WHERE doc_id NOT IN (SELECT id FROM "
                             "documents)").rowcount
            actions.append(f"deleted {n} orphan row(s) from {table}")
    if "stale_questions" in bad:
        dropped = 0
        for rows in _keyset(conn, "SELECT d.id, d.title, d.body, h.content_hash FROM documents "
                            "AS d JOIN derived AS h ON h.doc_id = d.id AND h.kind = %s WHERE "
                            "d.id > %s ORDER BY d.id LIMIT %s", (_FIRST_ID,),
                            fixed=(HYPE_QUESTIONS,)):
            stale = [int(doc_id) for doc_id, title, body, chash in rows
                     if Document(path="", title=title, body=body).hype_hash() != chash]
            if not stale:
                continue
            conn.execute("DELETE FROM vectors WHERE slot BETWEEN 1 AND 31 AND doc_id = ANY(%s)",
                         (stale,))
            conn.execute("DELETE FROM hype_questions WHERE doc_id = ANY(%s)", (stale,))
            conn.execute("DELETE FROM derived WHERE doc_id = ANY(%s) AND kind IN (%s, %s)",
                         (stale, HYPE_QUESTIONS, HYPE_VECTORS))
            dropped += len(stale)
        actions.append(f"dropped the stale HyPE questions of {dropped} document(s)")
    return actions


def _forget_bad_vectors(conn: Any, bad: set[str]) -> list[str]:
    if not bad & {"documents_missing_vectors", "questions_missing_vectors",
                  "chunks_missing_vectors", "invalid_vectors"}:
        return []
    stored = _meta(conn, "embedder") or {}
    conn.execute("DELETE FROM vectors WHERE vector_dims(embedding) <> %s "
                 "OR vector_norm(embedding) = 0", (stored.get("dim") or 0,))
    n = conn.execute("DELETE FROM derived AS x WHERE x.kind = %s AND NOT EXISTS (SELECT 1 "
                     "FROM vectors AS v WHERE v.doc_id = x.doc_id AND v.slot = 0)",
                     (DOC_VECTOR,)).rowcount
    n += conn.execute("DELETE FROM derived AS x WHERE x.kind = %s AND EXISTS (SELECT 1 FROM "
                      "hype_questions AS q WHERE q.doc_id = x.doc_id AND NOT EXISTS (SELECT 1 "
                      "FROM vectors AS v WHERE v.doc_id = q.doc_id AND v.slot = q.position))",
                      (HYPE_VECTORS,)).rowcount
    n += conn.execute("DELETE FROM derived AS x WHERE x.kind = %s AND EXISTS (SELECT 1 FROM "
                      "document_chunks AS c WHERE c.doc_id = x.doc_id AND NOT EXISTS (SELECT 1 "
                      "FROM vectors AS v WHERE v.doc_id = c.doc_id AND v.slot = c.position + %s))",
                      (CHUNK_VECTORS, CHUNK_SLOT)).rowcount
    return [f"marked {n} document(s) for re-embedding"]

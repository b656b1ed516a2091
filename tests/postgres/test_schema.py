"""PostgreSQL schema, migrations and the search statement, against a real
server (tests/pg_server.py): pgvector's iterative scans, the migration
runner's guarantees, the BM25 statistics the triggers keep, and the
statement's ranking next to the SQLite statement's on the same documents."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
from pathlib import Path

import psycopg
import pytest
from kbstore.migrations import steps

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.postgres import fold, migrate, query
from kbstore.documents import make_document
from kbstore.embed import embedding_text
from kbstore.errors import SchemaTooNewError
from tests import pg_server
from tests.conftest_pg import PgKnowledgeBase

NOW = "2026-12-01T00:00:00+00:00"
ALL_STEPS = [name for name, _ in steps("postgres")]


def open_kb(kb: PgKnowledgeBase, dim: int = 16) -> psycopg.Connection:
    conn = psycopg.connect(kb.url)
    migrate.ensure_schema(conn, kb.schema)
    conn.autocommit = True
    migrate.use_schema(conn, kb.schema, local=False)
    for key, value in query.SESSION_SETTINGS.items():
        conn.execute("SELECT set_config(%s, %s, false)", (key, value))
    conn.execute("SELECT set_vector_dimension(%s)", (dim,))
    return conn


def insert_documents(conn: psycopg.Connection, docs: list, embedder: FakeEmbedder) -> None:
    """Documents with ids 1..n in order (as a fresh SQLite store numbers
    them) and their document vectors, as kbstore's write path would store them."""
    vectors = embedder.embed_documents([embedding_text(d.title, d.tags, d.body) for d in docs])
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO documents (id, path, topic, doc_type, title, tags, body, created, "
            "updated, content_hash) VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s)",
            [(i, d.path, d.topic, d.doc_type, d.title, json.dumps(d.tags), d.body, d.created,
              d.updated, d.content_hash()) for i, d in enumerate(docs, start=1)])
        cur.executemany(
            "INSERT INTO vectors (doc_id, slot, topic, embedding) VALUES (%s, 0, %s, %s::vector)",
            [(i, d.topic, query.vector_text(v))
             for i, (d, v) in enumerate(zip(docs, vectors, strict=True), start=1)])


def run_search(conn: psycopg.Connection, text: str, embedder: FakeEmbedder, **kw) -> list[dict]:
    vector = embedder.embed_queries([text])[0]
    params = query.search_params(text, vector, topic=kw.pop("topic", None),
                                 limit=kw.pop("limit", 10), now=NOW, **kw)
    cur = conn.execute(query.statement(), params)
    names = [c.name for c in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# -- the server ---------------------------------------------------------------


def test_server_has_pgvector_with_iterative_hnsw_scans(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        version = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        assert tuple(int(p) for p in version.split(".")[:2]) >= (0, 8)
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        assert conn.execute("SHOW hnsw.iterative_scan").fetchone()[0] == "relaxed_order"


# -- migrations ---------------------------------------------------------------


def test_migrations_apply_once_and_record_their_version(pg_kb: PgKnowledgeBase) -> None:
    with psycopg.connect(pg_kb.url) as conn:
        assert migrate.ensure_schema(conn, pg_kb.schema) == ALL_STEPS
        assert migrate.ensure_schema(conn, pg_kb.schema) == []
        current = migrate.state(conn, pg_kb.schema)
        assert (current.version, current.pending, current.unknown) \
            == (migrate.SCHEMA_VERSION, [], [])


def test_a_newer_schema_is_refused_without_writing(pg_kb: PgKnowledgeBase) -> None:
    with psycopg.connect(pg_kb.url, autocommit=True) as conn:
        migrate.ensure_schema(conn, pg_kb.schema)
        conn.execute(f"INSERT INTO {pg_kb.schema}.schema_migrations (version, name) "
                     "VALUES (%s, '9999_from_the_future')", (migrate.SCHEMA_VERSION + 1,))
        with pytest.raises(SchemaTooNewError, match="upgrade kbstore"):
            migrate.ensure_schema(conn, pg_kb.schema)
        assert migrate.state(conn, pg_kb.schema).unknown == ["9999_from_the_future"]


def test_a_failing_step_leaves_no_trace(pg_kb: PgKnowledgeBase,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps and bookkeeping share one transaction: step 2 failing undoes step 1,
    its bookkeeping row and even the new schema."""
    real_steps, real_sql = migrate.steps, migrate.step_sql
    monkeypatch.setattr(migrate, "steps", lambda backend: [
        *real_steps(backend), ("9999_broken", Path("9999_broken.sql"))])
    monkeypatch.setattr(migrate, "step_sql", lambda name: (
        "CREATE TABLE half_done (x integer); SELECT no_such_function();"
        if name == "9999_broken" else real_sql(name)))
    with psycopg.connect(pg_kb.url) as conn:
        with pytest.raises(psycopg.errors.UndefinedFunction):
            migrate.ensure_schema(conn, pg_kb.schema)
        conn.rollback()
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                            (pg_kb.schema,)).fetchone()[0] == 0


def _open_at_once(url: str, schema: str, barrier, results) -> None:
    with psycopg.connect(url) as conn:
        barrier.wait()
        results.put(migrate.ensure_schema(conn, schema))


def test_processes_racing_to_create_a_new_database_serialize(pg_database: str) -> None:
    """Four processes open the same new knowledge base on a database without
    pgvector at the same moment: one creates everything, none fails."""
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    schema = migrate.schema_for("race")
    procs = [ctx.Process(target=_open_at_once, args=(pg_database, schema, barrier, results))
             for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    applied = sorted(results.get(timeout=5) for _ in procs)
    assert applied == [[], [], [], ALL_STEPS]
    with psycopg.connect(pg_database) as conn:
        assert conn.execute(f"SELECT count(*) FROM {schema}.schema_migrations"
                            ).fetchone()[0] == len(ALL_STEPS)


# -- what the triggers keep ----------------------------------------------------

POSTINGS_FROM_SCRATCH = """
    SELECT x.lexeme, d.id, cardinality(array_positions(x.weights, 'A')),
           cardinality(array_positions(x.weights, 'B')),
           cardinality(x.positions) - cardinality(array_positions(x.weights, 'A'))
               - cardinality(array_positions(x.weights, 'B')),
           sum(cardinality(x.positions)) OVER (PARTITION BY d.id)
    FROM documents AS d, unnest(d.fts) AS x
"""


def test_bm25_statistics_follow_inserts_updates_upserts_and_deletes(
        pg_kb: PgKnowledgeBase) -> None:
    conn = open_kb(pg_kb)
    docs = [make_document(f"domains/d{i}.md", title=f"Title {i} fox-trot", tags=["x", f"t{i}"],
                          body=f"body words {' '.join(['run'] * i)} café {i}") for i in range(12)]
    insert_documents(conn, docs, FakeEmbedder(dim=16))
    conn.execute("UPDATE documents SET body = 'entirely new running text' WHERE id IN (2, 3)")
    conn.execute("UPDATE documents SET title = 'The Fox' WHERE id = 4")
    conn.execute("UPDATE documents SET content_hash = 'only the hash' WHERE id = 5")
    conn.execute("DELETE FROM documents WHERE id IN (6, 7)")
    conn.execute(
        "INSERT INTO documents (id, path, topic, doc_type, title, body, content_hash) VALUES "
        "(1, 'domains/d1.md', 'domains', 'entry', 'Upserted', 'new body', 'h'), "
        "(40, 'domains/new.md', 'domains', 'entry', 'Fresh', 'fresh text here', 'h') "
        "ON CONFLICT (path) DO UPDATE SET title = excluded.title, body = excluded.body")
    stored = set(conn.execute("SELECT term, doc_id, tf_title, tf_tags, tf_body, doc_len "
                              "FROM fts_postings").fetchall())
    assert stored == set(conn.execute(POSTINGS_FROM_SCRATCH).fetchall())
    titles = set(conn.execute("SELECT term, doc_id, tf FROM title_postings").fetchall())
    assert titles == set(conn.execute(
        "SELECT x.lexeme, d.id, cardinality(x.positions) FROM documents AS d, "
        "unnest(title_vector(d.title)) AS x").fetchall())
    assert ("the", 4, 1) in titles and ("fox", 4, 1) in titles  # unstemmed, no stopwords
    totals = conn.execute("SELECT sum(docs), sum(tokens), sum(title_tokens) "
                          "FROM fts_totals").fetchone()
    assert totals == conn.execute(
        "SELECT count(*), (SELECT sum(cardinality(x.positions)) FROM documents AS d, "
        "unnest(d.fts) AS x), (SELECT sum(cardinality(x.positions)) FROM documents AS d, "
        "unnest(title_vector(d.title)) AS x) FROM documents").fetchone()


def test_tags_dates_and_the_vector_topic_follow_the_document(pg_kb: PgKnowledgeBase) -> None:
    conn = open_kb(pg_kb)
    docs = [make_document("journal/2026-11-01-a.md", title="A", body="b",
                          tags=["Home-Automation", " Fox "], updated="2026-11-01"),
            make_document("domains/b.md", title="B", body="b", updated="2026-01-02T03:04:05+02:00")]
    insert_documents(conn, docs, FakeEmbedder(dim=16))
    assert conn.execute("SELECT updated_at::text FROM documents WHERE id = 2").fetchone()[0] \
        == "2026-01-02 01:04:05+00"
    # kbstore only stores ISO dates, but a row written by hand must not break search
    conn.execute("UPDATE documents SET updated = 'yesterday' WHERE id = 2")
    assert sorted(conn.execute("SELECT tag FROM document_tags WHERE doc_id = 1").fetchall()) \
        == [("fox",), ("home-automation",)]
    rows = dict(conn.execute("SELECT id, updated_at::text FROM documents").fetchall())
    assert rows == {1: "2026-11-01 00:00:00+00", 2: None}  # 'yesterday' is not a date
    conn.execute("UPDATE documents SET tags = '[\"other\"]', topic = 'projects' WHERE id = 1")
    assert conn.execute("SELECT tag FROM document_tags WHERE doc_id = 1").fetchall() \
        == [("other",)]
    assert conn.execute("SELECT topic FROM vectors WHERE doc_id = 1").fetchone()[0] == "projects"


# -- the statement -------------------------------------------------------------

# Words whose Porter (SQLite) and Snowball (PostgreSQL) stems agree and that
# no stopword list holds, so both engines see the same tokens and lengths.
WORDS = "alpha beta gamma delta kappa sigma omega zeta theta lambda".split()


def corpus() -> list:
    docs = []
    for i in range(30):
        title = f"{WORDS[i % 10]} {WORDS[(i * 3) % 10]} {WORDS[(i * 7 + 1) % 10]}"
        body = " ".join(WORDS[(i * j + j) % 10] for j in range(5 + i % 9))
        topic, doc_type = ("journal", "journal") if i % 5 == 0 else ("domains", "entry")
        path = f"journal/2026-11-{i % 28 + 1:02d}-n{i}.md" if topic == "journal" \
            else f"domains/n{i}.md"
        docs.append(make_document(path, title=title, body=body, tags=[WORDS[(i * 5) % 10]],
                                  updated=f"2026-11-{i % 28 + 1:02d}"))
    return docs


class RandomEmbedder(FakeEmbedder):
    """A seeded random unit vector per text: no two documents tie on cosine,
    so float32 (sqlite-vec) vs pgvector rounding cannot reorder them."""

    name = "random"

    def _one(self, text: str):
        import hashlib

        import numpy as np

        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        vec = np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)
        return vec / np.linalg.norm(vec)


@pytest.fixture
def both_backends(pg_kb: PgKnowledgeBase, tmp_path: Path):
    embedder = RandomEmbedder(dim=16)
    docs = corpus()
    store = KnowledgeStore.open(tmp_path / "kb.sqlite", embedder, hype=False)
    store.upsert_many(docs)
    conn = open_kb(pg_kb)
    insert_documents(conn, docs, embedder)
    yield store, conn, embedder
    store.close()
    conn.close()


QUERIES = ["alpha beta", "gamma", "kappa sigma omega", "zeta zeta theta", "lambda delta alpha",
           "beta omega"]


@pytest.mark.parametrize("settings", [{}, {"fusion": "convex"}, {"k_rrf": 60, "w_vec": 1.5},
                                      {"min_similarity": 0.2}, {"topic": "journal"}])
def test_the_statement_ranks_like_the_sqlite_statement(both_backends, settings) -> None:
    """Same documents, same vectors, tokens both engines stem alike: every
    retriever's rank and raw score, the boosts, the recency and the final order
    agree with the SQLite statement (BM25 to 1e-9)."""
    store, conn, embedder = both_backends
    for text in QUERIES:
        sqlite_hits = store.search(text, limit=10, explain=True, now=NOW, **settings)
        pg_rows = run_search(conn, text, embedder, **settings)
        assert [h.path for h in sqlite_hits] == [r["path"] for r in pg_rows], text
        for hit, row in zip(sqlite_hits, pg_rows, strict=True):
            ex = hit.explain
            assert (ex["ranks"]["frontmatter"], ex["ranks"]["fts"], ex["ranks"]["vector"]) \
                == (row["fm_rank"], row["fts_rank"], row["vec_rank"]), (text, hit.path)
            # BM25 in double precision on both; cosine in float32 in sqlite-vec
            for ours, theirs, tol in ((row["fts_score"], ex["raw"]["bm25"], 1e-12),
                                      (row["vec_score"], ex["raw"]["cosine"], 1e-6)):
                assert (ours is None) == (theirs is None)
                if ours is not None:
                    assert ours == pytest.approx(theirs, rel=1e-9, abs=tol)
            assert (row["hype_rank"], row["hype_fts_rank"], row["date_rank"]) \
                == (ex["ranks"]["hype"], ex["ranks"]["hype_fts"], ex["ranks"]["date"])
            assert (row["boost"], row["recency"]) == pytest.approx((ex["boost"], ex["recency"]))
            assert row["score"] == pytest.approx(hit.score, rel=1e-6)


def test_a_topic_filter_never_makes_the_vector_search_short(pg_kb: PgKnowledgeBase) -> None:
    """An HNSW scan that gives up early (here: max_scan_tuples 20, the planner
    pushed onto the index) returns fewer rows than the topic holds; the
    statement's exact fallback still returns all of them, best first."""
    conn = open_kb(pg_kb)
    embedder = FakeEmbedder(dim=16)
    docs = [make_document(f"{'projects' if i % 25 == 0 else 'domains'}/v{i}.md",
                          title=f"t{i}", body=f"word{i} text") for i in range(400)]
    insert_documents(conn, docs, embedder)
    conn.execute("ANALYZE vectors")
    conn.execute("SET hnsw.ef_search = 10")
    conn.execute("SET hnsw.max_scan_tuples = 20")
    conn.execute("SET enable_sort = off")  # make the planner prefer the HNSW index
    qvec = query.vector_text(embedder.embed_queries(["word7 text"])[0])
    plain = conn.execute(
        "SELECT doc_id FROM vectors WHERE slot = 0 AND topic = 'projects' "
        "ORDER BY embedding <=> %s::vector LIMIT 16", (qvec,)).fetchall()
    assert len(plain) < 16  # the pitfall is real on this server
    rows = run_search(conn, "word7 text", embedder, topic="projects", limit=16,
                      w_fm=0, w_fts=0, vec_k_doc=16)
    assert len(rows) == 16 and all(r["topic"] == "projects" for r in rows)
    sims = [r["vec_score"] for r in rows]
    assert sims == sorted(sims, reverse=True)


def test_the_statement_runs_in_psql(pg_kb: PgKnowledgeBase, tmp_path: Path) -> None:
    conn = open_kb(pg_kb)
    embedder = FakeEmbedder(dim=16)
    insert_documents(conn, corpus(), embedder)
    params = query.search_params("kappa sigma", embedder.embed_queries(["kappa sigma"])[0],
                                 topic=None, limit=3, now=NOW)
    script = tmp_path / "search.psql"
    script.write_text(query.psql_script(params, pg_kb.schema))
    command = [str(pg_server.psql_path()), "-X", "-v", "ON_ERROR_STOP=1", "-A", "-t",
               "-F", "|", "-f", str(script), pg_kb.url]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    paths = [line.split("|")[1] for line in out.splitlines() if line.count("|") > 5]
    expected = [r["path"] for r in run_search(conn, "kappa sigma", embedder, limit=3)]
    assert paths == expected and len(paths) == 3


def test_search_defaults_file_sets_every_parameter_at_kbstore_defaults() -> None:
    text = (query.SQL_DIR / "search_defaults.psql").read_text()
    values = {}
    for line in text.splitlines():
        if line.startswith("\\set "):
            _, key, value = line.split(" ", 2)
            values[key] = value.strip("'")
    assert set(values) == set(query.statement_variables())
    defaults = query.search_params("x", None, topic=None, limit=10)
    for key in set(values) - {"fts_terms", "title_terms", "tag_terms", "qvec", "now"}:
        assert values[key] == defaults[key], key


def test_knowledge_bases_in_one_database_are_separate(pg_url: str) -> None:
    """Two knowledge bases share a database; a write to one, from a session
    whose search_path names the other, still keeps its statistics in its own
    schema (the trigger functions pin their search_path)."""
    kbs = [PgKnowledgeBase(pg_url, n, migrate.schema_for(n))
           for n in (pg_server.unique_kb_name(), pg_server.unique_kb_name())]
    try:
        first, second = (open_kb(kb) for kb in kbs)
        insert_documents(second, [make_document("domains/x.md", title="Only here",
                                                body="alpha words")], FakeEmbedder(dim=16))
        first.execute(f"INSERT INTO {kbs[1].schema}.documents (id, path, topic, doc_type, "
                      "title, body, content_hash) VALUES "
                      "(2, 'domains/y.md', 'domains', 'entry', 'Y', 'beta words', 'h')")
        assert first.execute("SELECT count(*) FROM documents").fetchone()[0] == 0
        assert first.execute("SELECT count(*) FROM fts_postings").fetchone()[0] == 0
        assert second.execute("SELECT sum(docs) FROM fts_totals").fetchone()[0] == 2
        assert second.execute(
            "SELECT count(DISTINCT doc_id) FROM fts_postings").fetchone()[0] == 2
        found = run_search(second, "beta", FakeEmbedder(dim=16))
        assert [r["path"] for r in found if r["fts_rank"] is not None] == ["domains/y.md"]
        assert run_search(first, "beta", FakeEmbedder(dim=16)) == []
    finally:
        for kb in kbs:
            pg_server.drop_schema(pg_url, kb.schema)


def test_migration_4_folds_the_stored_text_in_python(pg_kb: PgKnowledgeBase,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A knowledge base of schema v3 (vectors from the server's folding: no
    final sigma) gets its full-text vectors, postings and question text made
    again from Python-folded text when migration 4 runs."""
    real_steps = migrate.steps
    monkeypatch.setattr(migrate, "steps", lambda backend: real_steps(backend)[:3])
    conn = open_kb(pg_kb)
    insert_documents(conn, [make_document("domains/k.md", title="Κόσμος", tags=["Ωραίος"],
                                          body="ο κόσμος"),
                            make_document("domains/o.md", title="Other", body="plain")],
                     FakeEmbedder(dim=16))
    conn.execute("INSERT INTO hype_questions (doc_id, position, question) "
                 "VALUES (1, 1, 'Τι είναι ο κόσμος;')")
    assert ("κόσμος",) in conn.execute("SELECT term FROM fts_postings").fetchall()
    conn.close()
    monkeypatch.setattr(migrate, "steps", real_steps)
    conn = open_kb(pg_kb)
    assert migrate.state(conn, pg_kb.schema).version == len(ALL_STEPS)
    terms = {r[0] for r in conn.execute("SELECT term FROM fts_postings WHERE doc_id = 1")}
    assert {"κόσμοσ", "ωραίοσ"} <= terms and "κόσμος" not in terms
    assert {r[0] for r in conn.execute("SELECT term FROM title_postings WHERE doc_id = 1")} \
        == {"κόσμοσ"}
    assert "κόσμοσ" in {r[0] for r in conn.execute("SELECT term FROM question_postings")}
    assert fold.unfolded_documents(conn) == set() and fold.unfolded_questions(conn) == set()
    assert set(conn.execute("SELECT term, doc_id, tf_title, tf_tags, tf_body, doc_len "
                            "FROM fts_postings").fetchall()) \
        == set(conn.execute(POSTINGS_FROM_SCRATCH).fetchall())


def test_the_fold_check_and_its_rewrite_read_documents_and_questions_in_bounded_batches(
        pg_kb: PgKnowledgeBase, monkeypatch: pytest.MonkeyPatch) -> None:
    """Migration 4's rewrite, doctor's fts_fold check and --fix read at most
    fold.BATCH documents (and questions) per statement: with a batch of 3,
    11 documents and 14 questions need several pages each, and every
    unfolded row on every page is found and folded."""
    monkeypatch.setattr(fold, "BATCH", 3)
    conn = open_kb(pg_kb)
    docs = [make_document(f"domains/d{i:02d}.md", title=f"ΚΌΣΜΟΣ {i}", body=f"note {i}")
            for i in range(11)]
    insert_documents(conn, docs, FakeEmbedder(dim=16))
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO hype_questions (doc_id, position, question) "
                        "VALUES (%s, %s, %s)", [(d, p, f"Τι είναι ΚΌΣΜΟΣ {d}-{p};")
                                                for d in (1, 4, 6, 7, 8, 9, 11) for p in (1, 2)])
    # Vectors that are not those of the folded text (as a psql edit under
    # another locale leaves them), questions without their folded text.
    conn.execute("UPDATE documents SET fts = ''::tsvector, title_fts = ''::tsvector")
    every = set(range(1, 12))
    fetched: list[int] = []
    real_fetchall = psycopg.Cursor.fetchall

    def counting(cursor: psycopg.Cursor) -> list:
        rows = real_fetchall(cursor)
        fetched.append(len(rows))
        return rows

    monkeypatch.setattr(psycopg.Cursor, "fetchall", counting)
    assert fold.unfolded_documents(conn) == every
    assert fold.unfolded_questions(conn) == {1, 4, 6, 7, 8, 9, 11}
    with conn.transaction():
        assert fold.refold(conn) == 11
    with conn.transaction():
        assert fold.refold(conn, [2, 4, 6, 9, 10]) == 5
    assert fold.unfolded_documents(conn) == set() and fold.unfolded_questions(conn) == set()
    assert max(fetched) <= 3 and len(fetched) > 10
    monkeypatch.setattr(psycopg.Cursor, "fetchall", real_fetchall)
    terms = {r[0] for r in conn.execute("SELECT term FROM question_postings")}
    assert "κόσμοσ" in terms and "ΚΌΣΜΟΣ".lower() not in terms
    assert set(conn.execute("SELECT term, doc_id, tf_title, tf_tags, tf_body, doc_len "
                            "FROM fts_postings").fetchall()) \
        == set(conn.execute(POSTINGS_FROM_SCRATCH).fetchall())

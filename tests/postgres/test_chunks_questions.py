"""Schema v3 on PostgreSQL: the BM25 postings of HyPE questions follow
hype_questions, chunk vectors follow their document, doctor finds and
repairs damage to both, and migration 0003 upgrades a v2 knowledge base
that already holds questions and vectors."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.postgres import migrate
from kbstore.doctor import diagnose, fix
from tests import pg_server
from tests.conftest_pg import PgKnowledgeBase

LONG = " ".join(f"harbour{i} ledger" for i in range(200))  # past FakeEmbedder's 128 words


def _sql(kb: PgKnowledgeBase, statement: str, *args: object) -> list[tuple]:
    with psycopg.connect(kb.url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(kb.schema)))
        cur = conn.execute(statement, args or None)
        return cur.fetchall() if cur.description else []


def _postings(kb: PgKnowledgeBase) -> dict[tuple[str, int], tuple[int, int]]:
    return {(t, d): (tf, n) for t, d, tf, n in
            _sql(kb, "SELECT term, doc_id, tf, q_len FROM question_postings")}


@pytest.fixture
def store(pg_kb: PgKnowledgeBase, fake_llm):
    fake_llm.answer = lambda prompt: ("How are ledgers kept in the harbour office?\n"
                                      "Which ledger lists the ships?" if "Harbour" in prompt
                                      else "Where is the kiln?")
    url = pg_server.kb_url(pg_kb.url, pg_kb.name)
    with KnowledgeStore.open(url, FakeEmbedder(64), hype=True) as kb:
        kb.upsert("domains/harbour.md", title="Harbour", body=LONG)
        kb.upsert("domains/kiln.md", title="Kiln", body="kiln firing schedule")
        yield kb


def test_question_postings_follow_the_questions(store: KnowledgeStore,
                                                pg_kb: PgKnowledgeBase) -> None:
    ids = dict(_sql(pg_kb, "SELECT path, id FROM documents"))
    posts = _postings(pg_kb)
    harbour = ids["domains/harbour.md"]
    # "ledgers" and "ledger" stem alike; stopwords are not indexed
    assert posts[("ledger", harbour)][0] == 2 and ("how", harbour) not in posts
    lengths = {d: n for (_, d), (_, n) in posts.items()}  # one length per document
    assert len(lengths) == 2 and lengths[harbour] == sum(
        tf for (_, d), (tf, _) in posts.items() if d == harbour)
    assert _sql(pg_kb, "SELECT sum(docs), sum(tokens) FROM question_totals")[0] \
        == (2, sum(lengths.values()))
    store.delete("domains/harbour.md")
    assert {d for _, d in _postings(pg_kb)} == {ids["domains/kiln.md"]}
    assert _sql(pg_kb, "SELECT sum(docs) FROM question_totals")[0][0] == 1
    hits = store.search("where is the kiln", explain=True)
    assert hits[0].explain["ranks"]["hype_fts"] == 1


def test_chunk_vectors_follow_the_document(store: KnowledgeStore,
                                           pg_kb: PgKnowledgeBase) -> None:
    chunks = _sql(pg_kb, "SELECT count(*) FROM document_chunks")[0][0]
    assert chunks >= 2
    assert _sql(pg_kb, "SELECT count(*) FROM vectors WHERE slot >= 32")[0][0] == chunks
    store.upsert("domains/harbour.md", title="Harbour", body="short now")
    assert _sql(pg_kb, "SELECT count(*) FROM document_chunks")[0][0] == 0
    assert _sql(pg_kb, "SELECT count(*) FROM vectors WHERE slot >= 32")[0][0] == 0
    assert _sql(pg_kb, "SELECT count(*) FROM derived WHERE kind = 'chunk_vectors'")[0][0] == 0


def test_doctor_repairs_question_postings_and_chunk_vectors(store: KnowledgeStore,
                                                            pg_kb: PgKnowledgeBase) -> None:
    before = _postings(pg_kb)
    _sql(pg_kb, "DELETE FROM question_postings WHERE term = 'ledger'")
    _sql(pg_kb, "DELETE FROM vectors WHERE slot = 33")
    found = {c.name for c in diagnose(store).problems}
    assert {"fts_postings", "chunks_missing_vectors"} <= found, found
    after = fix(store)
    assert after.ok, [c.name for c in after.problems]
    assert _postings(pg_kb) == before
    assert _sql(pg_kb, "SELECT count(*) FROM vectors WHERE slot = 33")[0][0] == 1


def test_migration_0003_upgrades_a_v2_knowledge_base(pg_kb: PgKnowledgeBase) -> None:
    with psycopg.connect(pg_kb.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(pg_kb.schema)))
        migrate.use_schema(conn, pg_kb.schema, local=False)
        conn.execute(f"CREATE TABLE {migrate.MIGRATIONS_TABLE} (version integer PRIMARY KEY, "
                     "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        for version, name in enumerate(("0001_initial", "0002_extra_order"), start=1):
            conn.execute(migrate.step_sql(name))
            conn.execute(f"INSERT INTO {migrate.MIGRATIONS_TABLE} (version, name) "
                         "VALUES (%s, %s)", (version, name))
        conn.execute("SELECT set_vector_dimension(8)")
        conn.execute("INSERT INTO documents (id, path, topic, doc_type, title, body, "
                     "content_hash) VALUES (1, 'domains/a.md', 'domains', 'entry', 'A', "
                     "'alpha', 'h')")
        conn.execute("INSERT INTO hype_questions VALUES (1, 1, 'Which kiln fires stoneware?')")
        conn.execute("INSERT INTO vectors VALUES (1, 1, 'domains', '[1,0,0,0,0,0,0,0]')")
        conn.commit()
        assert migrate.ensure_schema(conn, pg_kb.schema) == ["0003_chunk_vectors",
                                                             "0004_python_case_fold"]
        migrate.use_schema(conn, pg_kb.schema, local=False)
        terms = {r[0] for r in conn.execute("SELECT term FROM question_postings")}
        assert terms == {"kiln", "fire", "stonewar"}
        indexes = dict(conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s "
            "AND indexname LIKE 'vectors_%%_hnsw'", (pg_kb.schema,)).fetchall())
        assert set(indexes) == {"vectors_doc_hnsw", "vectors_hype_hnsw", "vectors_chunk_hnsw"}
        assert "slot <= 31" in indexes["vectors_hype_hnsw"]
        assert "slot >= 32" in indexes["vectors_chunk_hnsw"]
        assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == 1  # kept

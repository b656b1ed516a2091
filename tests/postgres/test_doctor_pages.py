"""kbstore doctor on PostgreSQL reads the documents a page at a time
(fold.BATCH, here 3): damage on both sides of page boundaries, and rows of
deleted documents past the last one, are each reported exactly once, and
--fix (whose tag and HyPE repairs page the same way) leaves a clean store
with every document's text as it was."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.postgres import fold
from kbstore.doctor import diagnose, fix
from kbstore.redact import redact
from tests import pg_server
from tests.conftest_pg import PgKnowledgeBase

LONG = " ".join(f"harbour{i} ledger" for i in range(200))  # chunked by FakeEmbedder
SECRET = "LLM failed: key sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kM9nP2rS5uX8"


def _sql(kb: PgKnowledgeBase, statement: str, *args: object, orphan: bool = False) -> list:
    """``orphan``: with foreign keys and triggers off (session_replication_role),
    the only way rows of a deleted document get in."""
    with psycopg.connect(kb.url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(kb.schema)))
        if orphan:
            conn.execute("SET session_replication_role = replica")
        cur = conn.execute(statement, args or None)
        return cur.fetchall() if cur.description else []


@pytest.fixture
def url(pg_kb: PgKnowledgeBase, fake_llm, monkeypatch: pytest.MonkeyPatch) -> str:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(fold, "BATCH", 3)
    fake_llm.answer = lambda prompt: "What is in this note?\nWhich project is it for?"
    url = pg_server.kb_url(pg_kb.url, pg_kb.name)
    with KnowledgeStore.open(url, FakeEmbedder(64), hype=True) as store:
        for i in range(20):
            # paths in another order than ids: samples of paths are sorted by path
            store.upsert(f"projects/n{i * 3 % 20:02d}.md", title=f"Note {i}",
                         body=LONG if i == 11 else f"note {i} about topic{i % 4} and more",
                         tags=[f"t{i % 5}", "shared"])
    return url


def _texts(kb: PgKnowledgeBase) -> list[tuple]:
    return _sql(kb, "SELECT path, title, body, tags FROM documents ORDER BY path")


def _found(url: str) -> dict[str, tuple[int, list]]:
    with KnowledgeStore.open(url, read_only=True, hype=False) as store:
        return {c.name: (c.count, c.sample) for c in diagnose(store).problems}


def test_damage_around_page_boundaries_is_found_once_and_fixed(
        url: str, pg_kb: PgKnowledgeBase) -> None:
    assert _found(url) == {}
    ids = [r[0] for r in _sql(pg_kb, "SELECT id FROM documents ORDER BY id")]
    assert len(ids) == 20
    # ids[9] is deleted; its vector and hash row come back as orphans (in the
    # page after ids[8]); gone = ids past the last document (the range after
    # the last page).
    gone = ids[-1] + 1000
    vector = _sql(pg_kb, "SELECT topic, embedding::text FROM vectors "
                         "WHERE doc_id = %s AND slot = 0", ids[9])[0]
    hashes = _sql(pg_kb, "SELECT kind, content_hash, model FROM derived WHERE doc_id = %s "
                         "AND kind = 'doc_vector'", ids[9])[0]
    _sql(pg_kb, "DELETE FROM documents WHERE id = %s", ids[9])
    live = [i for i in ids if i != ids[9]]  # pages: 3 per page, ids[9] between pages
    for doc_id in (ids[9], gone):
        _sql(pg_kb, "INSERT INTO vectors (doc_id, slot, topic, embedding) "
                    "VALUES (%s, 0, %s, %s::vector)", doc_id, *vector, orphan=True)
        _sql(pg_kb, "INSERT INTO derived (doc_id, kind, content_hash, model) "
                    "VALUES (%s, %s, %s, %s)", doc_id, *hashes, orphan=True)
    # missing document vectors: the first of page 2 and one in page 6
    _sql(pg_kb, "DELETE FROM vectors WHERE slot = 0 AND doc_id = ANY(%s)", [ids[3], ids[17]])
    # a chunk of the long document (page 4) lost its vector
    _sql(pg_kb, "DELETE FROM vectors WHERE doc_id = %s AND slot = 33", ids[11])
    # tag rows: the last of page 1 lost its rows, a wrong one in page 4, and
    # one of a deleted document past the last page
    _sql(pg_kb, "DELETE FROM document_tags WHERE doc_id = %s", ids[2])
    _sql(pg_kb, "INSERT INTO document_tags (tag, doc_id) VALUES ('wrong', %s)", ids[12])
    _sql(pg_kb, "INSERT INTO document_tags (tag, doc_id) VALUES ('t1', %s)", gone, orphan=True)
    # an orphan HyPE question (its postings were never made: fts_postings too)
    _sql(pg_kb, "INSERT INTO hype_questions (doc_id, position, question, folded) "
                "VALUES (%s, 1, 'Orphan?', 'orphan?')", gone + 1, orphan=True)
    # postings off for the last of page 2 and the first of page 3
    for doc_id in (live[5], live[6]):
        _sql(pg_kb, "UPDATE fts_postings SET tf_body = tf_body + 1 WHERE doc_id = %s AND "
                    "term = (SELECT min(term) FROM fts_postings WHERE doc_id = %s)",
             doc_id, doc_id)
    # stale HyPE questions in pages 2 and 6; credentials in errors of pages 1 to 5
    # (the repair reads the rows with an error 3 at a time too)
    _sql(pg_kb, "UPDATE derived SET content_hash = 'old' WHERE kind = 'hype_questions' "
                "AND doc_id = ANY(%s)", [live[4], live[16]])
    assert redact(SECRET) != SECRET
    _sql(pg_kb, "UPDATE derived SET error = %s WHERE kind = 'doc_vector' AND doc_id = ANY(%s)",
         SECRET, [live[1], live[5], live[9], live[13]])
    texts = _texts(pg_kb)

    assert _found(url) == {
        "documents_missing_vectors": (2, [ids[3], ids[17]]),
        "orphan_vectors": (2, [ids[9], gone]),
        "orphan_derived": (2, [ids[9], gone]),
        "chunks_missing_vectors": (1, [ids[11]]),
        "tag_rows": (3, [ids[2], ids[12], gone]),
        "orphan_questions": (1, [gone + 1]),
        "fts_postings": (3, [live[5], live[6], gone + 1]),
        "stale_questions": (2, [live[4], live[16]]),
        "secrets_in_errors": (4, [live[1], live[5], live[9], live[13]]),
    }

    with KnowledgeStore.open(url, FakeEmbedder(64), hype=False) as store:
        after = fix(store)
        assert after.ok and after.problems == [], [c.to_dict() for c in after.problems]
        assert "dropped the stale HyPE questions of 2 document(s)" in after.fixed
        assert "rebuilt the exact-tag rows" in after.fixed
    assert _found(url) == {}
    assert _texts(pg_kb) == texts
    tags = _sql(pg_kb, "SELECT doc_id, tag FROM document_tags ORDER BY doc_id, tag")
    assert tags == sorted((d, t) for d in live for t in {f"t{ids.index(d) % 5}", "shared"})
    assert _sql(pg_kb, "SELECT count(*) FROM derived WHERE error LIKE '%%sk-proj-%%'") == [(0,)]
    assert _sql(pg_kb, "SELECT count(DISTINCT doc_id) FROM vectors WHERE slot = 0")[0][0] == 19


def test_samples_are_the_smallest_over_all_pages(url: str, pg_kb: PgKnowledgeBase) -> None:
    """More damaged documents than a sample holds, spread over every page:
    the count is all of them and the sample the five smallest ids (or paths)."""
    ids = [r[0] for r in _sql(pg_kb, "SELECT id FROM documents ORDER BY id")]
    damaged = ids[1::2]  # one or two in every page
    _sql(pg_kb, "DELETE FROM document_tags WHERE doc_id = ANY(%s)", damaged)
    _sql(pg_kb, "DELETE FROM derived WHERE kind = 'doc_vector' AND doc_id = ANY(%s)",
         damaged[::-1])
    found = _found(url)
    assert found["tag_rows"] == (10, damaged[:5])
    assert found["documents_missing_hash_row"] == (10, damaged[:5])
    with KnowledgeStore.open(url, FakeEmbedder(64), hype=False) as store:
        assert fix(store).ok
    assert _found(url) == {}


def test_a_sample_of_paths_is_sorted_over_all_pages(url: str, pg_kb: PgKnowledgeBase) -> None:
    """invalid_tags names paths, whose order is not the pages' id order."""
    rows = _sql(pg_kb, "SELECT id, path FROM documents ORDER BY id")
    bad = [path for _, path in rows[::3]]  # the first of every page
    _sql(pg_kb, "UPDATE documents SET tags = '[1, \"Y\"]' WHERE path = ANY(%s)", bad)
    assert bad != sorted(bad)
    assert _found(url)["invalid_tags"] == (7, sorted(bad)[:5])

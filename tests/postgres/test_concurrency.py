"""Many processes on ONE PostgreSQL knowledge base (benchmarks/pg_concurrency.py
with CI bounds; the benchmark runs 60 s): 4 writers + 4 readers, then the
same with a reembed loop and a ``doctor --fix`` loop running alongside.
No error reaches a caller, no write is lost, no reader ever sees a
half-written document, and the final state passes the oracle and doctor."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from benchmarks import pg_concurrency as conc
from benchmarks.reliability_docs import fake_hype, make_docs, open_store
from tests import pg_server

slow = pytest.mark.slow


def _assert_clean(result: dict) -> None:
    assert result["errors"] == [] and result["error_count"] == 0
    assert result["lost_write_count"] == 0, result["lost_writes"]
    assert result["half_written"] == 0, result["half_written_samples"]
    assert result["final_damage"] == {}
    assert result["doctor_problems_after"] == []
    # The processes really overlapped: every writer and reader did work.
    assert result["writer_ops"] >= 4 and result["searches"] >= 4
    assert result["snapshots_checked"] >= 1


@slow
def test_four_writers_and_four_readers(pg_url: str, tmp_path: Path) -> None:
    url = pg_server.kb_url(pg_url, pg_server.unique_kb_name("conc"))
    result = conc.run(url, tmp_path, seconds=5, seeded=120)
    print(f"\nconcurrency: {result}")
    _assert_clean(result)
    assert result["deletes"] >= 1 and result["documents"] >= 100


@slow
def test_reembed_and_doctor_fix_while_others_write(pg_url: str, tmp_path: Path) -> None:
    url = pg_server.kb_url(pg_url, pg_server.unique_kb_name("maint"))
    result = conc.run(url, tmp_path, seconds=6, seeded=120, maintenance=True)
    print(f"\nmaintenance: {result}")
    _assert_clean(result)
    assert result["reembed_runs"] >= 1 and result["reembedded_documents"] >= 100
    assert result["doctor_runs"] >= 1
    # doctor saw a healthy knowledge base every time, and so fixed nothing.
    assert result["doctor_problems_seen"] == [] and result["doctor_fixed"] == []


def test_the_oracle_sees_half_indexed_documents(pg_url: str) -> None:
    """The oracle is not blind: a missing vector, a vector of old content, a
    missing hash row and stale postings all show."""
    url = pg_server.kb_url(pg_url, pg_server.unique_kb_name("oracle"))
    with fake_hype(), open_store(url) as store:
        store.upsert_many(make_docs(range(6), "m0x0"))
    with contextlib.closing(conc.checker(url)) as conn:
        assert {k: v for k, v in conc.consistency(conn).items() if v} == {}
    import psycopg

    from kbstore.backends.postgres.connection import parse

    target = parse(url)
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{target.schema}", public')
        ids = [r[0] for r in conn.execute("SELECT id FROM documents ORDER BY id")]
        conn.execute("DELETE FROM vectors WHERE doc_id = %s AND slot = 0", (ids[0],))
        conn.execute("UPDATE vectors SET embedding = (SELECT embedding FROM vectors "
                     "WHERE doc_id = %s AND slot = 0) WHERE doc_id = %s AND slot = 0",
                     (ids[2], ids[1]))
        conn.execute("DELETE FROM derived WHERE doc_id = %s AND kind = 'doc_vector'", (ids[3],))
        conn.execute("DELETE FROM fts_postings WHERE doc_id = %s", (ids[4],))
    with contextlib.closing(conc.checker(url)) as conn:
        found = {k: v for k, v in conc.damaged(conn).items() if v}
    assert found == {"missing_doc_vector": {ids[0]}, "wrong_doc_vector": {ids[1]},
                     "missing_hash_row": {ids[3]}, "missing_postings": {ids[4]}}

"""The reliability harness on PostgreSQL, with CI bounds
(``python -m benchmarks.reliability --backend postgres`` runs it at full
size; benchmarks/results/reliability_postgres.md): SIGKILL at random moments
of a write path, deletes from several processes racing a long operation,
and the checker (benchmarks/reliability_check_pg.py) shown not to be blind.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import psycopg
import pytest

from benchmarks import reliability_paths as paths
from benchmarks import reliability_races as races
from benchmarks.reliability_check import check_store, damage
from benchmarks.reliability_check_pg import checker
from benchmarks.reliability_docs import PG_ENV, new_store, seed_store
from benchmarks.reliability_path_inputs import inflict_damage
from tests import pg_server

slow = pytest.mark.slow
posix_only = pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")


@pytest.fixture
def on_postgres(pg_server_handle: pg_server.Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """The harness's stores are knowledge bases on the test server (this
    process and the children it starts)."""
    monkeypatch.setenv(PG_ENV, pg_server_handle.url)
    return pg_server_handle.url


def _write(url: str, sql: str) -> None:
    from kbstore.backends.postgres.connection import parse

    target = parse(url)
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)",
                     (f'"{target.schema}", public',))
        conn.execute(sql)


def test_the_postgres_checker_sees_corruption_and_half_indexed_documents(
        on_postgres: str, tmp_path: Path) -> None:
    db = new_store(tmp_path, "oracle")
    assert str(db).startswith("postgresql://")
    seed_store(db, 12)
    assert damage(check_store(db)) == (0, 0)
    inflict_damage(db, random.Random(5))  # vectors of 20-80% of the documents, and more
    corrupt, half = damage(check_store(db))
    assert corrupt == 0 and half >= 2
    # Postings a document's tsvector does not hold: the counterpart of a
    # failed FTS5 integrity-check.
    _write(str(db), "DELETE FROM fts_postings WHERE doc_id = (SELECT min(id) FROM documents)")
    counts = check_store(db)
    assert counts["fts_integrity"] > 0 and counts["missing_postings"] == 1
    with checker(str(db)) as conn:  # read-only: the server refuses a write
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("DELETE FROM documents")


@slow
@posix_only
def test_a_sigkill_in_a_postgres_write_path_leaves_the_old_or_new_state(
        on_postgres: str, tmp_path: Path) -> None:
    stats = paths.run_path_trials("upsert_many", tmp_path, trials=3, n=40, seed=11)
    print(f"\nupsert_many on PostgreSQL: {stats}")
    assert stats["trials"] == 3 and stats["killed_mid_way"] >= 1
    assert (stats["corrupt"], stats["half_indexed"], stats["lost"]) == (0, 0, 0)
    assert stats["resumed"] == 3 and stats["failures"] == []


@slow
@posix_only
def test_deletes_from_several_processes_racing_two_imports_stick(on_postgres: str,
                                                                 tmp_path: Path) -> None:
    """Two processes import the same records (two machines) while two others
    delete documents, some of them both at once."""
    stats = races.run_race("import_jsonl", tmp_path, rounds=1, n=40, extra=10, deletes=10,
                           seed=3, deleters=2, ops=2)
    print(f"\nimport_jsonl race on PostgreSQL: {stats}")
    # Every victim deleted (once, whichever deleter won -- or again after the
    # second import wrote it back: that is its new version, not a resurrection).
    assert stats["deletes"] >= 10
    assert (stats["resurrected"], stats["lost"]) == (0, 0)
    assert stats["errors"] == [] and stats["store_damage"] == []

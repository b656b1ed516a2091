"""Reliability: SIGKILL mid-import, concurrent processes, racing writers,
failing models, privacy.

The process-level scenarios live in benchmarks/reliability_scenarios.py
(benchmarks/reliability.py runs them at full size); here they run with CI
bounds and are marked ``slow``. The harness's checker reads the SQLite file
with plain SQL, so these tests belong to the SQLite suite.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks import reliability_fuzz as fuzz
from benchmarks import reliability_paths as paths
from benchmarks import reliability_races as races
from benchmarks import reliability_scenarios as scenarios
from benchmarks.reliability_check import check_store, damage, expected_markers, lost_writes
from benchmarks.reliability_docs import doc_path, make_docs, markers, open_store, seed_store
from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.doctor import diagnose
from kbstore.documents import make_document
from kbstore.hype_jobs import select_targets

from .util import SLOTS, raw

slow = pytest.mark.slow
posix_only = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and file modes are POSIX")


def _clean(db: Path) -> dict[str, int]:
    """check_store counts that are not zero (documents aside)."""
    return {k: v for k, v in check_store(db).items() if v and k != "documents"}


# -- crash safety ------------------------------------------------------------


@slow
@posix_only
def test_sigkill_at_random_moments_never_corrupts_or_half_indexes(tmp_path: Path) -> None:
    # CI-sized (the file stays within a few minutes); every write path has
    # its own trials below, and the benchmark runs 100 per path.
    stats = scenarios.run_crash_trials(tmp_path, trials=10, n=400, seed=7)
    print(f"\ncrash trials: {stats}")
    assert stats["trials"] == 10
    # The kills really landed while the child was importing (not after it).
    assert stats["killed_mid_import"] >= 3
    assert stats["failures"] == []
    assert stats["corrupt"] == 0
    assert stats["half_indexed"] == 0
    assert stats["doctor_problems"] == 0
    assert stats["reimports_completed"] == 10


def test_the_oracle_sees_half_indexed_documents(tmp_path: Path) -> None:
    """check_store (used after every kill) is not blind: it reports a
    document without its vector and a vector without its document."""
    db = tmp_path / "kb.sqlite"
    seed_store(db, 10)
    assert _clean(db) == {}
    with open_store(db) as store:
        raw(store).execute("DELETE FROM vectors WHERE vector_id = ?", (1 * SLOTS,))
        raw(store).execute("UPDATE documents SET body = 'other marker m9x9' WHERE id = 2")
        raw(store).execute("DELETE FROM derived WHERE doc_id = 3 AND kind = 'doc_vector'")
    counts = _clean(db)
    # doc 2's HyPE questions were written for its old body: stale as well.
    assert counts == {"missing_doc_vector": 1, "stale_hash": 1, "half_written": 1,
                      "missing_hash_row": 1, "stale_questions": 1}
    assert damage(check_store(db)) == (0, 5)


def test_the_oracle_sees_lost_writes() -> None:
    """lost_writes (the concurrency scenarios' final check, SQLite and
    PostgreSQL) reports a seeded document gone, a writer's last version
    missing, and a document nobody wrote; a deleted one may be absent."""
    allowed = expected_markers([{doc_path(1): "m1x3", doc_path(2): None}], seeded=3)
    stored = {doc_path(1): "doc 1 m1x2", doc_path(7): "doc 7 m1x1"}
    assert lost_writes(stored, allowed) == [
        f"{doc_path(0)}: stored None, expected one of ['m0x0']",
        f"{doc_path(1)}: stored m1x2, expected one of ['m1x3']",
        f"{doc_path(7)}: unexpected document"]
    assert lost_writes({doc_path(0): "doc 0 m0x0", doc_path(1): "doc 1 m1x3"}, allowed) == []


# -- concurrency ---------------------------------------------------------------


@slow
def test_one_writer_and_four_readers_share_a_file(tmp_path: Path) -> None:
    stats = scenarios.run_concurrency(tmp_path, seconds=10, readers=4, seed=3)
    print(f"\nconcurrency: { {k: v for k, v in stats.items() if 'sample' not in k} }")
    assert stats["errors"] == []
    assert stats["half_written"] == 0, stats["half_written_samples"]
    assert stats["lost_write_count"] == 0, stats["lost_writes"]
    assert stats["store_damage"] == {}
    assert stats["writer_ops"] > 0 and stats["deletes"] >= 0
    assert stats["searches"] > 0 and stats["hits_checked"] > 0
    assert stats["snapshots_checked"] > 0


@slow
def test_two_writers_serialize_cleanly(tmp_path: Path) -> None:
    stats = scenarios.run_two_writers(tmp_path, seconds=5, seed=5)
    print(f"\ntwo writers: {stats}")
    assert stats["errors"] == []
    assert stats["lost_write_count"] == 0, stats["lost_writes"]
    assert stats["store_damage"] == {}
    assert stats["writer_ops"] > 0


@slow
def test_processes_racing_to_create_a_new_file_get_one_schema(tmp_path: Path) -> None:
    stats = scenarios.run_migration_race(tmp_path, procs=6, rounds=1)
    print(f"\nmigration race: {stats}")
    assert stats["errors"] == []
    assert stats["bad_schema"] == []


class _RacingEmbedder(FakeEmbedder):
    """Runs ``meanwhile`` (another writer's commit) once, during the first
    embedding call: after the batch was planned, before it takes the lock."""

    def __init__(self, meanwhile) -> None:  # type: ignore[no-untyped-def]
        super().__init__(dim=64)
        self.meanwhile = meanwhile

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        if self.meanwhile is not None:
            action, self.meanwhile = self.meanwhile, None
            action()
        return super().embed_documents(texts)


def _other_writer(db: Path, action: str, path: str):  # type: ignore[no-untyped-def]
    def run() -> None:
        with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as other:
            if action == "insert":
                other.upsert(path, title="other writer m2x1", body="written by the other m2x1")
            else:
                other.delete(path)
    return run


@pytest.mark.parametrize("action", ["insert", "delete"])
def test_a_batch_planned_before_another_writer_commits_is_replanned(
        tmp_path: Path, action: str) -> None:
    """Daemon + CLI: the other process inserts (or deletes) the same path
    between this batch's planning and its transaction. Formerly: UNIQUE
    constraint failed (insert) or vectors of a deleted row (delete)."""
    db = tmp_path / "kb.sqlite"
    path = "projects/contested.md"
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        if action == "delete":
            store.upsert(path, title="first m1x1", body="first version m1x1")
        store.embedder = _RacingEmbedder(_other_writer(db, action, path))
        result = store.upsert(path, title="mine m1x2", body="my version m1x2")
        assert result in ("added", "updated")
        assert store.get(path).title == "mine m1x2"  # type: ignore[union-attr]
        assert diagnose(store).ok
    assert _clean(db) == {}


# -- failing models ------------------------------------------------------------


class _FailingEmbedder(FakeEmbedder):
    def __init__(self, fail_on_call: int) -> None:
        super().__init__(dim=64)
        self.fail_on_call, self.batches = fail_on_call, 0

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        self.batches += bool(texts)  # embed_queries([]) also lands here
        if texts and self.batches == self.fail_on_call:
            raise RuntimeError("embedding model crashed")
        return super().embed_documents(texts)


def _docs(n: int, marker: str = "m0x1"):  # type: ignore[no-untyped-def]
    return make_docs(range(n), marker)


def test_an_embedder_failing_mid_import_loses_only_that_batch(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, _FailingEmbedder(fail_on_call=3), hype=False) as store:
        with pytest.raises(RuntimeError, match="embedding model crashed"):
            store.upsert_many(_docs(250), batch_size=50)
        assert len(store) == 100  # batches 1 and 2 committed, batch 3 rolled back, 4-5 never ran
        assert store.paths() == sorted(doc_path(i) for i in range(100))
    assert _clean(db) == {}
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:  # the next run
        report = store.upsert_many(_docs(250), batch_size=50)
        assert (report.added, report.unchanged, report.embedded) == (150, 100, 150)
        assert len(store) == 250
    assert _clean(db) == {}


def test_an_embedder_failing_on_question_vectors_rolls_back_the_batch(
        tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    class QuestionsFail(FakeEmbedder):
        def embed_queries(self, texts):  # type: ignore[no-untyped-def]
            if texts:
                raise RuntimeError("query encoder crashed")
            return super().embed_queries(texts)

    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, QuestionsFail(64), hype=True) as store:
        store.hype.backoff = 0
        with pytest.raises(RuntimeError, match="query encoder crashed"):
            store.upsert_many(_docs(20), batch_size=10)
        assert len(store) == 0
    assert _clean(db) == {}
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=True) as store:
        report = store.upsert_many(_docs(20), batch_size=10)
        assert (report.added, report.hype_generated, report.hype_pending) == (20, 20, 0)
    assert _clean(db) == {}


def test_a_failing_llm_keeps_documents_and_leaves_hype_pending(
        tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "kb.sqlite"
    fake_llm.fail_with = RuntimeError("model overloaded")
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=True) as store:
        store.hype.backoff = 0
        report = store.upsert_many(_docs(12), batch_size=5)
        assert (report.added, report.embedded, report.hype_pending) == (12, 12, 12)
        assert store.status()["hype_pending"] == 12
        assert diagnose(store).get("pending_hype").count == 12
        assert diagnose(store).ok  # pending HyPE is work left, not damage
    assert _clean(db) == {}
    fake_llm.fail_with = None
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=True) as store:  # the next run
        report = store.upsert_many(_docs(12), batch_size=5)
        assert (report.hype_generated, report.hype_pending, report.embedded) == (12, 0, 0)
        assert store.status()["hype_pending"] == 0
        assert store.status()["hype_questions"] == 36
    assert _clean(db) == {}


def test_an_llm_failing_for_some_documents_only_marks_those(
        tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    def answer(prompt: str) -> str:
        if "doc 3 " in prompt or "doc 7 " in prompt:
            raise RuntimeError("content filter")
        return "What is it?\nHow do I use it?"

    fake_llm.answer = answer
    with KnowledgeStore.open(tmp_path / "kb.sqlite", FakeEmbedder(64), hype=True) as store:
        report = store.upsert_many(_docs(10))
        assert (report.added, report.hype_generated, report.hype_pending) == (10, 8, 2)
        pending = {doc.path for doc, _ in select_targets(store, "pending")}
        assert pending == {doc_path(3), doc_path(7)}
        assert store.status()["hype_failed"] == 2


# -- privacy -------------------------------------------------------------------


@posix_only
def test_a_new_database_and_its_wal_are_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)  # a typical umask would make files world-readable
    try:
        db = tmp_path / "private.sqlite"
        with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
            store.upsert("projects/a.md", title="a", body="secret diary")
            companions = [Path(f"{db}{suffix}") for suffix in ("-wal", "-shm")]
            assert companions[0].exists()  # WAL mode: the write went to the -wal file
            for file in [db, *companions]:
                if file.exists():
                    assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    finally:
        os.umask(old)


SECRET = "sk-test-SECRET123"


def test_an_api_key_in_an_llm_error_never_reaches_the_database_or_logs(
        tmp_path: Path, fake_llm, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    fake_llm.fail_with = RuntimeError(
        f"AuthenticationError: Incorrect API key provided: {SECRET}. api_key={SECRET}")
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="kbstore")  # whatever level a CLI run left it at
    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=True) as store:
        report = store.upsert_many(_docs(5))
        assert report.hype_pending == 5
        conn = raw(store)
        errors = [r[0] for r in conn.execute("SELECT error FROM derived WHERE error "
                                             "IS NOT NULL")]
        assert any("RuntimeError" in e and "[redacted]" in e for e in errors)  # kept, but...
        dump = []
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                     ).fetchall():
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                dump += [v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in row]
    assert dump and not [v for v in dump if "SECRET123" in v]  # ...never the key
    assert "SECRET123" not in caplog.text
    assert any("HyPE failed" in r.getMessage() for r in caplog.records)
    for file in (db, Path(f"{db}-wal")):
        if file.exists():
            assert b"SECRET123" not in file.read_bytes(), file


def test_the_cli_does_not_print_an_api_key_from_an_llm_error(
        tmp_path: Path, fake_llm, sample_workspace: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    fake_llm.fail_with = RuntimeError(f"Incorrect API key provided: {SECRET}")
    db = tmp_path / "kb.sqlite"
    KnowledgeStore.open(db, FakeEmbedder(64), hype=False).close()
    result = run_cli("import", "--db", db, "--hype", sample_workspace)
    assert result.exit_code == 0, result.output
    assert "HyPE pending" in result.output
    status = run_cli("status", "--db", db, "--json")
    doctor = run_cli("doctor", "--db", db, "--json")
    for out in (result, status, doctor):
        assert "SECRET123" not in out.output + (out.stderr or "")


def test_make_docs_markers_round_trip() -> None:
    """The harness's half-written detector reads what the writers write."""
    doc = make_docs([5], "m3x42")[0]
    assert markers(doc.title) == markers(doc.body) == {"m3x42"}
    assert len(doc.body) < 150  # the whole body fits in a snippet
    vec = FakeEmbedder(64).embed_documents([doc.body])
    assert np.isclose(np.linalg.norm(vec), 1.0)
    assert make_document(doc.path, title=doc.title, body=doc.body).path == doc.path


# -- every write path, every race, every importer's bad input (CI-sized) ---------------


@slow
@posix_only
@pytest.mark.parametrize("name", paths.CRASH_PATHS)
def test_a_sigkill_in_any_write_path_leaves_the_old_or_new_state(tmp_path: Path,
                                                                  name: str) -> None:
    stats = paths.run_path_trials(name, tmp_path, trials=2, n=40, seed=11)
    print(f"\n{name}: {stats}")
    assert stats["trials"] == 2
    assert stats["killed_mid_way"] + stats["finished_before_kill"] == 2
    assert stats["failures"] == []
    assert (stats["corrupt"], stats["half_indexed"], stats["lost"]) == (0, 0, 0)
    assert stats["resumed"] == 2


@slow
@posix_only
@pytest.mark.parametrize("op", races.RACE_OPS)
def test_a_delete_racing_a_long_operation_sticks(tmp_path: Path, op: str) -> None:
    stats = races.run_race(op, tmp_path, rounds=1, n=60, extra=20, deletes=10, seed=3)
    print(f"\nrace {op}: {stats}")
    assert stats["errors"] == []
    assert stats["deletes"] == 10  # every planned delete found its document
    assert (stats["resurrected"], stats["lost"]) == (0, 0), stats["samples"]
    assert stats.get("unaccounted", 0) == 0, stats["samples"]
    assert stats["store_damage"] == []


@slow
@pytest.mark.parametrize("name", sorted(fuzz.FUZZERS))
def test_bad_input_costs_only_itself(tmp_path: Path, name: str) -> None:
    stats = fuzz.FUZZERS[name](tmp_path, 30 if name == "npz" else 60)
    print(f"\nfuzz {name}: {stats}")
    assert stats["crashes"] == 0, stats["samples"]
    assert stats["unaccounted"] == 0, stats["samples"]
    assert stats["good_lost"] == 0, stats["samples"]
    assert stats["store_damage"] == []
    assert stats["accepted"] > 0 and stats["skipped_with_reason"] > 0


def test_a_failed_markdown_export_leaves_no_half_tree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Formerly files were written straight into the target: a failure (or a
    kill) left a half tree, and the next export refused the non-empty folder."""
    from kbstore import exchange

    db, out = tmp_path / "kb.sqlite", tmp_path / "export"
    seed_store(db, 30)
    real, written = exchange.atomic_write, []

    def failing(path: Path, text: str, **options: Any) -> None:
        if len(written) == 12:
            raise OSError("disk full")
        written.append(path)
        real(path, text, **options)

    monkeypatch.setattr(exchange, "atomic_write", failing)
    with open_store(db, hype=False) as store:
        with pytest.raises(OSError, match="disk full"):
            exchange.export_markdown(store, out)
        assert not out.exists()
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
        monkeypatch.setattr(exchange, "atomic_write", real)
        assert exchange.export_markdown(store, out).written == 30
    assert len(list(out.rglob("*.md"))) == 30


def test_doctor_on_a_long_lived_store_is_not_fooled_by_another_writer(tmp_path: Path) -> None:
    """FTS5 caches an index's structure per connection and PRAGMA
    integrity_check trusted it: after another process wrote, doctor on an
    open store reported 'malformed inverted index' for a healthy file."""
    db = tmp_path / "kb.sqlite"
    seed_store(db, 50)
    with open_store(db, hype=False) as store, open_store(db, hype=False) as other:
        alarms = []
        for i in range(20):  # some of these writes restructure the FTS5 index (merges)
            other.upsert(doc_path(100 + i), title=f"new {i}", body="a new body")
            alarms += [c.name for c in diagnose(store).problems]
        assert alarms == []
    assert _clean(db) == {}


def test_documents_with_always_unusable_llm_answers_do_not_block_the_rest(
        tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    """They sort first on every run: a batch of only unusable answers used to
    stop the job as if the LLM were down, so the others never got questions."""
    from kbstore.hype_jobs import run_hype

    fake_llm.answer = lambda prompt: ("What is it?\nHow is it used?" if "doc 9" in prompt
                                      else "?!?\n...")
    db = tmp_path / "kb.sqlite"
    with open_store(db, hype=False) as store:
        store.upsert_many(_docs(90))  # doc 9, 90..99 would be last; 9x: the last batch
        store.hype.backoff = 0
        counts = run_hype(store, "pending", concurrency=2, batch_size=20)
        assert counts["aborted"] is False
        assert counts["generated"] == 1  # doc 9 only ("doc 9 " in its prompt)
        assert counts["failed"] == 89
    assert _clean(db) == {}


def test_unusable_answers_between_llm_errors_are_not_an_outage(
        tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    """The LLM answered in between, so its errors were not 'in a row': the
    breaker must not skip the documents after them."""
    from kbstore.hype_jobs import run_hype

    def answer(prompt: str) -> str:
        n = int(prompt.split("doc ", 1)[1].split()[0])
        if n in (0, 2, 4):
            raise ValueError("provider sent malformed JSON")
        return "What is it?" if n >= 5 else "..."

    fake_llm.answer = answer
    with open_store(tmp_path / "kb.sqlite", hype=False) as store:
        store.upsert_many(_docs(10))
        store.hype.backoff, store.hype.retries = 0, 0
        counts = run_hype(store, "pending", concurrency=1)
    assert counts["generated"] == 5  # docs 5..9
    assert counts["failed"] == 5

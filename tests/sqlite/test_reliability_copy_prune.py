"""The ``copy --prune`` write path of the SIGKILL harness
(benchmarks/reliability_prune_path.py): it is registered like every other
path, and its oracle is not blind -- it reports a document the source holds
going missing, a deletion nobody announced, and anything else a re-run
left besides exactly the source's documents."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from benchmarks import reliability_paths as paths
from benchmarks.reliability import _scenarios
from benchmarks.reliability_docs import doc_path, open_store
from benchmarks.reliability_paths import resume
from benchmarks.reliability_prune_path import CopyPrune

N = 20


def _path(tmp_path: Path) -> CopyPrune:
    path = CopyPrune("copy_prune", tmp_path, N, random.Random(0))
    path.setup()
    path.prepare(1)
    return path


def test_copy_prune_is_a_registered_write_path(tmp_path: Path) -> None:
    assert "copy_prune" in paths.CRASH_PATHS
    args = argparse.Namespace(trials=1, docs=N, deleters=None, ops=None, rounds=1,
                              fuzz_inputs=1, backend="sqlite", seconds=1.0, fuzz=1)
    assert "path:copy_prune" in [name for name, _ in _scenarios(args, tmp_path)]
    spec = _path(tmp_path).spec(1)
    assert spec["argv"][0] == "copy" and "--prune" in spec["argv"]


def test_each_generation_prunes_two_fifths_under_the_mass_delete_limit(
        tmp_path: Path) -> None:
    path = _path(tmp_path)  # the seeded store holds all N; source 1 lacks i % 5 in (3, 4)
    assert path.doomed() == [doc_path(i) for i in range(N) if i % 5 in (3, 4)]
    assert resume(path.spec(1)) == 0
    path.prepare(2)  # source 2 lacks i % 5 in (1, 2), held by source 1
    assert path.doomed() == [doc_path(i) for i in range(N) if i % 5 in (1, 2)]
    assert len(path.doomed()) == 2 * N // 5 < N // 2


def test_the_untouched_store_is_a_state_a_kill_may_leave(tmp_path: Path) -> None:
    path = _path(tmp_path)
    assert path.check_killed(1, 0) == (0, [], [])


def test_a_deleted_document_the_source_holds_is_lost(tmp_path: Path) -> None:
    path = _path(tmp_path)
    with open_store(path.db, hype=False) as store:
        store.delete(doc_path(0))  # generation 1's source holds document 0
    assert path.lost(1, 0) == [f"{doc_path(0)}: gone, the source holds it"]


def test_a_deletion_nobody_announced_is_counted(tmp_path: Path) -> None:
    path = _path(tmp_path)
    doomed = path.doomed()
    with open_store(path.db, hype=False) as store:
        store.delete(doomed[0])
    assert path.lost(1, 0) == [f"1 deleted, announced [] (of {len(doomed)} the source lacks)"]
    path.stderr(1).write_text(f"deleting {len(doomed)} document(s) the source does not have: "
                              f"{doomed[0]} ... and {len(doomed) - 1} more\n")
    assert path.lost(1, 0) == []


def test_after_a_rerun_only_the_source_s_documents_are_right(tmp_path: Path) -> None:
    path = _path(tmp_path)
    assert resume(path.spec(1)) == 0
    assert path.check_resumed(1) == []
    with open_store(path.db, hype=False) as store:
        store.upsert(doc_path(N + 1), title="not in the source", body="stray")
    assert path.check_resumed(1) == [f"{doc_path(N + 1)}: unexpected"]


def test_the_prune_race_oracle_counts_deletions_the_copy_did_not_report(
        tmp_path: Path) -> None:
    from benchmarks.reliability_races import _judge_prune, racer_path

    db = tmp_path / "kb.sqlite"
    racers = [racer_path(0, k) for k in range(3)]
    with open_store(db, hype=False) as store:
        store.upsert(racers[0], title="racer m9x1", body="raced in m9x1")
        store.upsert(racers[1], title="racer m3x3", body="someone else's m3x3")
    stats = {"lost": 0, "samples": [], "racers_kept": 0, "racers_pruned": 0, "pruned": 0,
             "unaccounted": 0}
    # 5 extra documents and racers[2] went: the copy must report 6.
    _judge_prune(db, 10, 5, racers, ['{"pruned": 6}'], stats)
    assert (stats["unaccounted"], stats["racers_kept"], stats["racers_pruned"]) == (0, 2, 1)
    assert stats["lost"] == 1 and "m3x3" in stats["samples"][0]  # racers[1] is not as written
    _judge_prune(db, 10, 5, racers, ['{"pruned": 4}'], stats)
    assert stats["unaccounted"] == 2


def test_the_copy_source_fuzzer_oracle_is_not_blind() -> None:
    from types import SimpleNamespace as Result

    from benchmarks.reliability_fuzz_copy import _judge

    before = {"a": ("old a",), "b": ("old b",)}
    held = {"a": ("new a",)}

    def judged(code: int, after: dict, stdout: str = "", stderr: str = "Error: bad file\n",
               exc: BaseException | None = None) -> str:
        return _judge(Result(exit_code=code, stdout=stdout, stderr=stderr,
                             exception=exc if exc is not None else SystemExit(code)),
                      held, before, after, Path("unused"))

    assert judged(1, before) == "skipped_with_reason"
    assert judged(1, {"a": ("new a",)}) == "refused, destination changed"
    assert judged(1, before, stderr="") == "refused without a reason"
    assert judged(0, {"a": ("new a",)}, stdout='{"skipped": []}') == "accepted"
    assert judged(0, {"a": ("new a",), "b": ("old b",)}, stdout='{"skipped": []}') \
        == "copied, destination not the source's"
    assert judged(1, before, exc=RuntimeError("boom")) == "crash"

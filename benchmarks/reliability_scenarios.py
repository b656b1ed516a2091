"""The process-level reliability scenarios: SIGKILL trials, concurrent
processes, a migration race and hostile queries against one kbstore file.

Each returns a dict of counts (benchmarks/reliability.py writes them to the
results); tests/sqlite/test_reliability.py runs them with CI-sized bounds.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.reliability_check import (
    check_store,
    damage,
    expected_markers,
    lost_writes,
    reading,
    titles,
)
from benchmarks.reliability_docs import fake_hype, make_docs, new_store, open_store, seed_store
from benchmarks.reliability_workers import spawn, start_together, worker_results
from kbstore import EmptyQueryError, KnowledgeStore


def run_crash_trials(workdir: Path, trials: int, n: int = 1000, seed: int = 0,
                     batch: int = 32) -> dict[str, Any]:
    """SIGKILL an importing child at a random moment, then check the file,
    run kbstore.doctor on it and re-import everything in this process.

    The next child starts (and opens the store) while this process checks,
    and begins importing only when its go-file appears.
    """
    from kbstore.doctor import diagnose

    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "crash.sqlite"
    rng = random.Random(seed)
    log = open(workdir / "crash-children.log", "a")  # noqa: SIM115 - closed below
    stats: dict[str, Any] = {"trials": 0, "documents": n, "killed_mid_import": 0,
                             "finished_before_kill": 0, "corrupt": 0, "half_indexed": 0,
                             "doctor_problems": 0, "reimports_completed": 0, "failures": []}

    def child(gen: int) -> subprocess.Popen[str]:
        proc = spawn("crash-child", "--db", db, "--n", n, "--gen", gen, "--batch",
                     rng.choice((8, 32, 64)) if gen else batch, "--seed", seed + gen,
                     "--go", workdir / f"go-{gen}", stderr=log)
        return proc

    def start(proc: subprocess.Popen[str], gen: int) -> None:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":  # the store is open
            raise RuntimeError(f"crash child {gen} did not start; see {log.name}")
        (workdir / f"go-{gen}").touch()

    try:
        seed_store(db, n)  # children only open the file, then update every document
        # Calibration run (not a trial): how long an update run takes after "go".
        proc = child(0)
        start(proc, 0)
        started = time.monotonic()
        proc.communicate(timeout=300)
        window = max(0.05, time.monotonic() - started)
        stats["window_seconds"] = round(window, 3)
        proc = child(1)
        for trial in range(1, trials + 1):
            start(proc, trial)
            time.sleep(rng.uniform(0, window * 1.05))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                stats["killed_mid_import"] += 1
            else:
                stats["finished_before_kill"] += 1
            proc.communicate(timeout=60)
            next_proc = child(trial + 1) if trial < trials else None
            _check_after_kill(db, trial, n, stats, diagnose, last=trial == trials)
            if next_proc is not None:
                proc = next_proc
        stats["trials"] = trials
    finally:
        log.close()
    return stats


def _check_after_kill(db: Path, trial: int, n: int, stats: dict[str, Any],
                      diagnose: Any, last: bool) -> None:
    counts = check_store(db)
    corrupt, half = damage(counts)
    with fake_hype(), open_store(db) as store:
        report = diagnose(store)
        # The re-import must complete. Its result is checked in full by the
        # next trial's check_store (and here after the last trial).
        store.upsert_many(make_docs(range(n), f"m0x{trial}"), batch_size=64)
        titles = [d.title for d in store.documents()]
    if corrupt or half or not report.ok:
        stats["failures"].append({"trial": trial, **{k: v for k, v in counts.items() if v},
                                  "doctor": [c.name for c in report.problems]})
    stats["corrupt"] += bool(corrupt)
    stats["half_indexed"] += bool(half)
    stats["doctor_problems"] += bool(report.problems)
    after = check_store(db) if last else {"integrity": 0, "fts_integrity": 0}
    if (len(titles) == n and all(t.endswith(f" m0x{trial}") for t in titles)
            and damage(after) == (0, 0)):
        stats["reimports_completed"] += 1
    else:
        stats["failures"].append({"trial": trial, "reimport": after, "documents": len(titles)})




def run_concurrency(workdir: Path, seconds: float, readers: int = 4, seed: int = 0,
                    seeded: int = 300) -> dict[str, Any]:
    """One writer (updates, inserts, deletes) and ``readers`` searching processes."""
    workdir.mkdir(parents=True, exist_ok=True)
    db, go = workdir / "concurrent.sqlite", workdir / "go-concurrency"
    seed_store(db, seeded)
    procs = [spawn("writer", "--db", db, "--seconds", seconds, "--seed", seed, "--wid", 1,
                   "--own", f"0:{seeded + 100}", "--go", go)]
    procs += [spawn("reader", "--db", db, "--seconds", seconds, "--seed", seed + 1 + r,
                    "--go", go) for r in range(readers)]
    start_together(procs, go)
    results = worker_results(procs, timeout=seconds + 120)
    wstats, rstats = results[0], results[1:]
    lost = lost_writes(titles(db), expected_markers([wstats.get("final", {})], seeded))
    counts = check_store(db)
    return {
        "seconds": seconds, "readers": readers,
        "writer_ops": wstats.get("ops", 0), "docs_written": wstats.get("docs_written", 0),
        "deletes": wstats.get("deletes", 0),
        "searches": sum(r.get("searches", 0) for r in rstats),
        "hits_checked": sum(r.get("hits_checked", 0) for r in rstats),
        "snapshots_checked": sum(r.get("snapshots", 0) for r in rstats),
        "errors": [e for r in results for e in r.get("errors", [])],
        "half_written": sum(r.get("half_written_count", 0) for r in rstats),
        "half_written_samples": [s for r in rstats for s in r.get("half_written", [])][:5],
        "lost_writes": lost[:20], "lost_write_count": len(lost),
        "store_damage": {k: v for k, v in counts.items() if v and k != "documents"},
    }


def run_two_writers(workdir: Path, seconds: float, seed: int = 0,
                    seeded: int = 200) -> dict[str, Any]:
    """Two writers (a daemon and a CLI) with their own documents and shared
    new ones they both create: they must serialize without an error."""
    workdir.mkdir(parents=True, exist_ok=True)
    db, go = workdir / "two-writers.sqlite", workdir / "go-two-writers"
    seed_store(db, seeded)
    half = seeded // 2
    shared = f"{seeded}:{seeded + 20}"  # not seeded: both writers race to insert them
    procs = [spawn("writer", "--db", db, "--seconds", seconds, "--seed", seed + w, "--wid", w,
                   "--own", own, "--shared", shared, "--go", go)
             for w, own in ((1, f"0:{half}"), (2, f"{half}:{seeded}"))]
    start_together(procs, go)
    results = worker_results(procs, timeout=seconds + 120)
    lost = lost_writes(titles(db), expected_markers([r.get("final", {}) for r in results],
                                                   seeded))
    counts = check_store(db)
    return {
        "seconds": seconds,
        "writer_ops": sum(r.get("ops", 0) for r in results),
        "docs_written": sum(r.get("docs_written", 0) for r in results),
        "errors": [e for r in results for e in r.get("errors", [])],
        "lost_writes": lost[:20], "lost_write_count": len(lost),
        "store_damage": {k: v for k, v in counts.items() if v and k != "documents"},
    }


def run_migration_race(workdir: Path, procs: int = 6, rounds: int = 3) -> dict[str, Any]:
    """``procs`` processes create the same brand-new file at once, ``rounds`` times."""
    workdir.mkdir(parents=True, exist_ok=True)
    stats: dict[str, Any] = {"rounds": rounds, "processes": procs, "errors": [],
                             "bad_schema": []}
    for r in range(rounds):
        db, go = workdir / f"race-{r}.sqlite", workdir / f"go-race-{r}"
        workers = [spawn("open-child", "--db", db, "--k", k, "--go", go) for k in range(procs)]
        start_together(workers, go)
        for result in worker_results(workers, timeout=120):
            stats["errors"] += result.get("errors", [])
        with reading(db) as conn:
            migrations = conn.execute("SELECT migration_set, name, count(*) FROM "
                                      "_sqlite_migrations GROUP BY 1, 2").fetchall()
            vec = conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'vectors'"
                               ).fetchone()[0]
            docs = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        from kbstore.migrations import steps

        ok = (sorted((m[1], m[2]) for m in migrations) == sorted((name, 1) for name, _ in
                                                                 steps("sqlite"))
              and vec == 1 and docs == procs and damage(check_store(db)) == (0, 0))
        if not ok:
            stats["bad_schema"].append({"round": r, "migrations": migrations,
                                        "vectors_table": vec, "documents": docs})
    return stats


# -- hostile queries ----------------------------------------------------------

HOSTILE_PIECES = (
    'AND', 'OR', 'NOT', 'NEAR(', 'NEAR/3', '(', ')', '"', "'", '""', '*', '^', ':', '-', '+',
    'title:', 'body : x', '{title tags}:', 'rank', 'bm25(', ';', '--', '/*', 'DROP TABLE',
    '\x00', '\\', '%', '_', '\u202e', '\u200b', '\u200f', 'שלום', 'مرحبا', '日本語', 'ñandú',
    'e\u0301', '🙂', '👩‍👩‍👧', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', '\ufeff', '\t', '\n', ' ', 'ǅ', 'ﷺ', 'sqlite', 'deploy',
)


def hostile_query(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.05:
        return rng.choice(HOSTILE_PIECES) * rng.randint(1_000, 100_000 // 2)  # ~100 KB
    if kind < 0.1:
        # Any code point; lone surrogates cannot come from UTF-8 input, so '?' them.
        text = "".join(chr(rng.randint(1, 0x10FFFF)) for _ in range(rng.randint(1, 50)))
        return text.encode("utf-8", "replace").decode("utf-8")
    return " ".join(rng.choice(HOSTILE_PIECES) for _ in range(rng.randint(1, 12)))


def search_never_raises(store: KnowledgeStore, query: str) -> str | None:
    """None when the query behaved; else what went wrong."""
    try:
        hits = store.search(query, limit=5)
    except EmptyQueryError:
        return None if not query.replace("\x00", " ").strip() else "EmptyQueryError on " \
            f"non-blank {query[:40]!r}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc} for {query[:40]!r}"
    if not query.strip():
        return f"blank query {query[:40]!r} returned {len(hits)} hit(s)"
    return None


def run_query_fuzz(workdir: Path, cases: int, seed: int = 0) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    db = new_store(workdir, "fuzz")
    seed_store(db, 200)
    rng = random.Random(seed)
    failures = []
    with open_store(db, hype=False) as store:
        for _ in range(cases):
            problem = search_never_raises(store, hostile_query(rng))
            if problem:
                failures.append(problem)
    return {"cases": cases, "crashes": len(failures), "samples": failures[:10]}

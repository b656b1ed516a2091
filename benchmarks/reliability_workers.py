"""The reliability harness's child processes and how they start together.

Each worker is a sub-command of benchmarks/reliability.py (crash-child,
writer, reader, open-child) using kbstore's public API only; each prints
"ready", waits for a go-file so the processes start together, and prints
one JSON line of counts at the end.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.reliability_check import consistency, reading
from benchmarks.reliability_docs import VOCAB, doc_path, fake_hype, make_docs, markers, open_store

CLI = Path(__file__).resolve().with_name("reliability.py")  # it runs the workers


def ready_and_wait(go: str | None, timeout: float = 300) -> None:
    print("ready", flush=True)
    deadline = time.monotonic() + timeout
    while go and not os.path.exists(go):
        if time.monotonic() > deadline:  # the harness died: do not linger
            sys.exit("no go-file; giving up")
        time.sleep(0.001)


def spawn(command: str, *args: Any, stderr: Any = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(CLI), command, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=stderr, text=True)


def start_together(procs: list[subprocess.Popen[str]], go: Path) -> None:
    try:
        for proc in procs:
            line = proc.stdout.readline() if proc.stdout else ""
            if line.strip() != "ready":
                raise RuntimeError(f"worker did not start: {line!r}")
        go.touch()
    except BaseException:
        for proc in procs:
            proc.kill()
            proc.wait()
        raise


def worker_results(procs: list[subprocess.Popen[str]], timeout: float) -> list[dict[str, Any]]:
    out = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=timeout)
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        out.append(json.loads(lines[-1]) if lines else
                   {"errors": [f"worker exited {proc.returncode} without a report"]})
    return out


def crash_child(db: str, n: int, gen: int, batch: int, seed: int, go: str | None) -> None:
    """Import n documents (version ``gen``; 0 is the calibration run) with
    HyPE, then delete 5% of them."""
    with fake_hype(), open_store(db) as store:
        ready_and_wait(go)
        store.upsert_many(make_docs(range(n), f"m0x{gen or 99999}"), batch_size=batch)
        for i in random.Random(seed).sample(range(n), n // 20):
            store.delete(doc_path(i))
        print("done", flush=True)


def writer(db: str, seconds: float, seed: int, wid: int, own: range, shared: range,
           go: str | None) -> dict[str, Any]:
    """Upsert random batches (new versions of own and shared documents, new
    documents), delete some own ones; report the last version written per path."""
    rng = random.Random(seed)
    final: dict[str, str | None] = {}
    live: set[int] = set()  # own documents this writer has written and not deleted
    stats: dict[str, Any] = {"ops": 0, "docs_written": 0, "deletes": 0, "errors": []}
    with fake_hype(), open_store(db) as store:
        ready_and_wait(go)
        deadline = time.monotonic() + seconds
        version = 0
        while time.monotonic() < deadline:
            try:
                if live and rng.random() < 0.1:
                    victim = rng.choice(sorted(live))
                    store.delete(doc_path(victim))
                    final[doc_path(victim)] = None
                    live.discard(victim)
                    stats["deletes"] += 1
                else:
                    version += 1
                    marker = f"m{wid}x{version}"
                    ids = rng.sample(own, rng.randint(1, 12))
                    if shared and rng.random() < 0.5:
                        ids += rng.sample(shared, rng.randint(1, min(4, len(shared))))
                    store.upsert_many(make_docs(ids, marker), batch_size=rng.choice((4, 64)))
                    final.update((doc_path(i), marker) for i in ids)
                    live.update(i for i in ids if i in own)
                    stats["docs_written"] += len(ids)
                stats["ops"] += 1
            except Exception as exc:  # an error that reached the caller
                stats["errors"].append(f"{type(exc).__name__}: {exc}")
    stats["final"] = final
    return stats


def reader(db: str, seconds: float, seed: int, go: str | None) -> dict[str, Any]:
    """Search and read while others write, through the public API: every hit's
    title and snippet, and every document read, come from one version. In
    between, the checker's own read snapshot of the whole file must show no
    half-indexed document (no document without its vector or hash row, no
    vector without its document)."""
    rng = random.Random(seed)
    stats: dict[str, Any] = {"searches": 0, "gets": 0, "hits_checked": 0, "snapshots": 0,
                             "half_written": [], "errors": []}

    def bad(what: str) -> None:
        if len(stats["half_written"]) < 20:
            stats["half_written"].append(what)
        stats.setdefault("half_written_count", 0)
        stats["half_written_count"] += 1

    with open_store(db, hype=False) as store, reading(db) as checker:
        ready_and_wait(go)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                check_reads(store, rng, stats, bad)
                counts = consistency(checker)
                stats["snapshots"] += 1
                damaged = {k: v for k, v in counts.items() if v and k != "documents"}
                if damaged:
                    bad(f"snapshot {stats['snapshots']}: {damaged}")
            except Exception as exc:
                stats["errors"].append(f"{type(exc).__name__}: {exc}")
    stats["half_written_count"] = stats.get("half_written_count", 0)
    return stats


def check_reads(store: Any, rng: random.Random, stats: dict[str, Any], bad: Any) -> None:
    """One random search and a few gets, each hit and document checked for a
    torn read (markers of two generations in one document); ``bad`` hears of
    each. Shared by the SQLite and PostgreSQL concurrency readers."""
    query = " ".join(rng.sample(VOCAB, rng.randint(1, 3)))
    hits = store.search(query, limit=10)
    stats["searches"] += 1
    for hit in hits:
        stats["hits_checked"] += 1
        if len(markers(hit.title) | markers(hit.snippet)) > 1:
            bad(f"hit {hit.path}: title {hit.title!r} / snippet {hit.snippet!r}")
    for path in [h.path for h in hits[:3]] + [doc_path(rng.randrange(400))]:
        doc = store.get(path)
        stats["gets"] += 1
        if doc is not None and len(markers(doc.title) | markers(doc.body)) > 1:
            bad(f"get {path}: title {doc.title!r}, body {doc.body[-12:]!r}")


def open_child(db: str, k: int, go: str | None) -> dict[str, Any]:
    """Open (create) the store at the same moment as others, then write one document."""
    import sqlite_utils  # noqa: F401 - imported before the race, not during it

    ready_and_wait(go)
    try:
        with open_store(db, hype=False) as store:
            store.upsert(f"projects/racer-{k}.md", title=f"racer {k}", body=f"opened by {k}")
        return {"errors": []}
    except Exception as exc:
        return {"errors": [f"{type(exc).__name__}: {exc}"]}

"""Concurrency on ONE PostgreSQL knowledge base: writer and reader processes
(and optionally a reembed and a ``doctor --fix`` process) at the same time.

    python benchmarks/pg_concurrency.py --seconds 60     # 4 writers + 4 readers, 60 s

starts a bundled server (tests/pg_server.py; or KBSTORE_TEST_PG_URL) and
writes benchmarks/results/pg_concurrency.json and .md.
tests/postgres/test_concurrency.py runs the same scenario with CI bounds.

The writers are the SQLite reliability harness's (benchmarks/reliability_workers.py:
own and shared documents, new versions, deletes, HyPE questions from a
stand-in for the LLM): every document carries its writer's marker
``m<writer>x<version>`` in its title and body. The oracle here is
independent of kbstore's code: it reads the schema with plain SQL in ONE
repeatable-read snapshot and checks every document has its vector, hash
rows, questions, tags and text-search postings for its CURRENT content --
the stored vector is compared with the fake embedder's vector of the
current text, so a stale vector swapped in by a reembed would show.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import reliability as rel  # noqa: E402
from benchmarks import reliability_workers as workers  # noqa: E402
from benchmarks.reliability_check import expected_markers, lost_writes  # noqa: E402
from benchmarks.reliability_check_pg import checker, consistency, damaged  # noqa: E402, F401
from benchmarks.reliability_docs import (  # noqa: E402
    DIM,
    fake_hype,
    make_docs,
    open_store,
)
from kbstore import FakeEmbedder  # noqa: E402

THIS = Path(__file__).resolve()
RESULTS = THIS.parent / "results" / "pg_concurrency.json"


# -- the oracle: benchmarks/reliability_check_pg.py (checker, damaged, consistency) --


# -- child processes ------------------------------------------------------------------


def reader(url: str, seconds: float, seed: int, go: str | None) -> dict[str, Any]:
    """Search and read through the public API while others write; between
    reads, the oracle's snapshot of the whole knowledge base."""
    rng = random.Random(seed)
    stats: dict[str, Any] = {"searches": 0, "gets": 0, "hits_checked": 0, "snapshots": 0,
                             "half_written": [], "half_written_count": 0, "errors": []}

    def bad(what: str) -> None:
        stats["half_written_count"] += 1
        if len(stats["half_written"]) < 20:
            stats["half_written"].append(what)

    with open_store(url, hype=False) as store, contextlib.closing(checker(url)) as conn:
        workers.ready_and_wait(go)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                workers.check_reads(store, rng, stats, bad)
                if stats["searches"] % 5 == 0:
                    found = {k: v for k, v in consistency(conn).items() if v}
                    stats["snapshots"] += 1
                    if found:
                        bad(f"snapshot {stats['snapshots']}: {found}")
            except Exception as exc:
                stats["errors"].append(f"{type(exc).__name__}: {exc}")
    return stats


def maintainer(url: str, seconds: float, action: str, go: str | None) -> dict[str, Any]:
    """``reembed`` (every vector rebuilt and swapped in, same embedder) or
    ``doctor`` (diagnose + fix) in a loop while others write."""
    from kbstore.doctor import diagnose, fix

    stats: dict[str, Any] = {"runs": 0, "reembedded": 0, "problems": [], "fixed": [],
                             "errors": []}
    with fake_hype(), open_store(url) as store:
        workers.ready_and_wait(go)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if action == "reembed":
                    stats["reembedded"] += store.reembed(FakeEmbedder(DIM), batch_size=32)
                else:
                    report = diagnose(store)
                    stats["problems"] += [f"{c.name}: {c.detail}" for c in report.problems]
                    after = fix(store)
                    stats["fixed"] += after.fixed
                stats["runs"] += 1
            except Exception as exc:
                stats["errors"].append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.05)
    return stats


# -- the scenario ------------------------------------------------------------------


def spawn(command: str, *args: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(THIS), command, *map(str, args)],
                            stdout=subprocess.PIPE, text=True)


def _lost_writes(url: str, allowed: dict[str, set[str | None]]) -> list[str]:
    with contextlib.closing(checker(url)) as conn:
        stored = dict(conn.execute("SELECT path, title FROM documents").fetchall())
    return lost_writes(stored, allowed)


def run(url: str, workdir: Path, seconds: float, writers: int = 4, readers: int = 4,
        seeded: int = 200, maintenance: bool = False, seed: int = 0) -> dict[str, Any]:
    """``writers`` writers (own documents each, plus shared ones all of them
    update), ``readers`` readers, and with ``maintenance`` a reembed loop and
    a doctor --fix loop, for ``seconds``; then the oracle on the final state."""
    from kbstore.doctor import diagnose

    workdir.mkdir(parents=True, exist_ok=True)
    go = workdir / f"go-{random.Random().getrandbits(32):x}"
    with fake_hype(), open_store(url) as store:
        store.upsert_many(make_docs(range(seeded), "m0x0"))
    per = (seeded + 100 * writers) // writers
    shared = f"{seeded + 100 * writers}:{seeded + 100 * writers + 20}"
    procs = [spawn("writer", "--db", url, "--seconds", seconds, "--seed", seed + w, "--wid", w,
                   "--own", f"{(w - 1) * per}:{w * per}", "--shared", shared, "--go", go)
             for w in range(1, writers + 1)]
    procs += [spawn("reader", "--db", url, "--seconds", seconds, "--seed", seed + 100 + r,
                    "--go", go) for r in range(readers)]
    kinds = ["writer"] * writers + ["reader"] * readers
    if maintenance:
        procs += [spawn("maintain", "--db", url, "--seconds", seconds, "--action", a,
                        "--go", go) for a in ("reembed", "doctor")]
        kinds += ["reembed", "doctor"]
    workers.start_together(procs, go)
    results = workers.worker_results(procs, timeout=seconds + 180)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for kind, result in zip(kinds, results, strict=True):
        by_kind.setdefault(kind, []).append(result)
    wstats, rstats = by_kind["writer"], by_kind["reader"]
    # Seeded documents no writer owns keep the seed's version.
    allowed = expected_markers([r.get("final", {}) for r in wstats], seeded)
    lost = _lost_writes(url, allowed)
    with contextlib.closing(checker(url)) as conn:
        final = consistency(conn)
    with open_store(url, hype=False) as store:
        doctor_after = [c.name for c in diagnose(store).problems]
        documents = len(store)
    out: dict[str, Any] = {
        "seconds": seconds, "writers": writers, "readers": readers, "documents": documents,
        "writer_ops": sum(r.get("ops", 0) for r in wstats),
        "docs_written": sum(r.get("docs_written", 0) for r in wstats),
        "deletes": sum(r.get("deletes", 0) for r in wstats),
        "searches": sum(r.get("searches", 0) for r in rstats),
        "gets": sum(r.get("gets", 0) for r in rstats),
        "hits_checked": sum(r.get("hits_checked", 0) for r in rstats),
        "snapshots_checked": sum(r.get("snapshots", 0) for r in rstats),
        "errors": [e for r in results for e in r.get("errors", [])][:20],
        "error_count": sum(len(r.get("errors", [])) for r in results),
        "half_written": sum(r.get("half_written_count", 0) for r in rstats),
        "half_written_samples": [s for r in rstats for s in r.get("half_written", [])][:5],
        "lost_writes": lost[:20], "lost_write_count": len(lost),
        "final_damage": {k: v for k, v in final.items() if v},
        "doctor_problems_after": doctor_after,
    }
    if maintenance:
        re_stats, doc_stats = by_kind["reembed"][0], by_kind["doctor"][0]
        out["reembed_runs"] = re_stats.get("runs", 0)
        out["reembedded_documents"] = re_stats.get("reembedded", 0)
        out["doctor_runs"] = doc_stats.get("runs", 0)
        out["doctor_problems_seen"] = doc_stats.get("problems", [])[:10]
        out["doctor_fixed"] = doc_stats.get("fixed", [])[:10]
    return out


# -- report and command line --------------------------------------------------------


def write_report(results: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    lines = ["# PostgreSQL concurrency", "",
             "One knowledge base on one server, every process its own connection "
             "(`python benchmarks/pg_concurrency.py`). Writers: new versions of their own "
             "documents and of shared ones, new documents, deletes, HyPE questions "
             "(stand-in LLM); readers: hybrid search + get through the public API, and the "
             "oracle's repeatable-read snapshot of the whole knowledge base.", ""]
    for name, r in results["scenarios"].items():
        lines += [f"## {name}", "",
                  "| figure | value |", "|---|---|"]
        for key in ("seconds", "writers", "readers", "documents", "writer_ops",
                    "docs_written", "deletes", "searches", "gets", "hits_checked",
                    "snapshots_checked", "error_count", "half_written", "lost_write_count",
                    "final_damage", "doctor_problems_after", "reembed_runs",
                    "reembedded_documents", "doctor_runs", "doctor_problems_seen"):
            if key in r:
                lines.append(f"| {key} | {r[key]} |")
        lines.append("")
    out.with_suffix(".md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    run_p = sub.add_parser("run")
    for p in (parser, run_p):
        p.add_argument("--seconds", type=float, default=60.0)
        p.add_argument("--out", default=str(RESULTS))
    w = sub.add_parser("writer")
    r = sub.add_parser("reader")
    m = sub.add_parser("maintain")
    for p in (w, r, m):
        p.add_argument("--db", required=True)
        p.add_argument("--seconds", type=float, default=10.0)
        p.add_argument("--go", default=None)
    for p in (w, r):
        p.add_argument("--seed", type=int, default=0)
    w.add_argument("--wid", type=int, default=1)
    w.add_argument("--own", default="0:100")
    w.add_argument("--shared", default="")
    m.add_argument("--action", choices=("reembed", "doctor"), required=True)
    args = parser.parse_args(argv)
    if args.command == "writer":
        stats = workers.writer(args.db, args.seconds, args.seed, args.wid, rel._range(args.own),
                           rel._range(args.shared), args.go)
    elif args.command == "reader":
        stats = reader(args.db, args.seconds, args.seed, args.go)
    elif args.command == "maintain":
        stats = maintainer(args.db, args.seconds, args.action, args.go)
    else:
        _run_all(args.seconds, Path(args.out))
        return
    print(json.dumps(stats, default=str), flush=True)


def _run_all(seconds: float, out: Path) -> None:
    import tempfile

    from tests import pg_server

    server = pg_server.start()
    try:
        url = pg_server.create_database(server.url)
        results: dict[str, Any] = {"scenarios": {}}
        with tempfile.TemporaryDirectory() as tmp:
            for name, maintenance in (("4 writers + 4 readers", False),
                                      ("4 writers + 4 readers + reembed + doctor --fix", True)):
                kb = pg_server.kb_url(url, f"conc_{int(maintenance)}")
                results["scenarios"][name] = run(kb, Path(tmp), seconds,
                                                 maintenance=maintenance)
                print(name, json.dumps(results["scenarios"][name])[:400], file=sys.stderr)
        write_report(results, out)
    finally:
        server.stop()


if __name__ == "__main__":
    main()

"""Reliability harness: SIGKILL trials, concurrent processes, a migration race
and hostile queries against one kbstore file.

    python benchmarks/reliability.py                  # 100 trials, 60 s of concurrency
    python benchmarks/reliability.py --trials 20 --seconds 10 --fuzz 500
    python benchmarks/reliability.py --backend postgres   # the same on PostgreSQL

writes benchmarks/results/reliability.json and .md. The scenarios:
benchmarks/reliability_scenarios.py; every write path under SIGKILL:
benchmarks/reliability_paths.py, and under a racing delete:
benchmarks/reliability_races.py; bad input for every importer:
benchmarks/reliability_fuzz.py. tests/sqlite/test_reliability.py runs the
same functions with CI-sized bounds.

``--backend postgres`` runs the write paths, the delete races, the input
fuzzers and the query fuzzer against a real PostgreSQL server started from
the installed package (tests/pg_server.py; or the one in
KBSTORE_TEST_PG_URL): every store is a knowledge base in a database of its
own, checked by benchmarks/reliability_check_pg.py. Results go to
benchmarks/results/reliability_postgres.json and .md;
tests/postgres/test_reliability_pg.py runs a small version. The worker sub-commands (crash-child,
writer, reader, open-child; benchmarks/reliability_workers.py) are the child
processes the scenarios start; each prints "ready", waits for a go-file so
the processes start together, and prints one JSON line of counts at the end.

Every document carries a *marker* (``m<writer>x<version>``) in its title AND
at the end of its body (benchmarks/reliability_docs.py). The workers use
kbstore's public API only; the checker (benchmarks/reliability_check.py)
reads the SQLite file with plain SQL, independently of kbstore's own code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.reliability_scenarios import (  # noqa: E402
    run_concurrency,
    run_crash_trials,
    run_migration_race,
    run_query_fuzz,
    run_two_writers,
)
from benchmarks.reliability_workers import (  # noqa: E402
    crash_child,
    open_child,
    reader,
    writer,
)

RESULTS = Path(__file__).resolve().parent / "results" / "reliability.json"
PG_RESULTS = RESULTS.with_name("reliability_postgres.json")
# What runs on PostgreSQL (the others read or race the SQLite file itself;
# benchmarks/pg_concurrency.py is PostgreSQL's writers-and-readers scenario).
PG_SCENARIOS = ("query_fuzz", "path", "race", "fuzz")
# Scenarios written for SQLite files only (they open the file with sqlite3,
# make a v3 file, watch a folder or run picobot's file store): not run with
# --backend postgres.
SQLITE_ONLY = frozenset({"path:import_removals", "path:watch", "path:picobot_store",
                         "path:delete_many", "path:init", "path:restamp", "path:migrate",
                         "race:delete_many", "race:restamp", "fuzz:delete_many",
                         "fuzz:copy_source"})


# -- command line -------------------------------------------------------------


def _range(text: str) -> range:
    start, _, stop = text.partition(":")
    return range(int(start), int(stop)) if text else range(0)


# Counters and lists that must be zero / empty in a clean run.
BAD_COUNTS = ("corrupt", "half_indexed", "lost", "crashes", "resurrected", "good_lost",
              "half_written", "lost_write_count", "unaccounted", "doctor_problems")
BAD_LISTS = ("failures", "errors", "store_damage", "bad_schema", "lost_writes")


def summary(name: str, result: dict[str, Any]) -> tuple[str, int]:
    """One line per scenario: its counts, and any non-empty problem list's
    length with its first entries (never hidden); plus how many problems."""
    shown = {k: v for k, v in result.items() if not isinstance(v, (list, dict)) or not v}
    problems = sum(int(result.get(k) or 0) for k in BAD_COUNTS
                   if isinstance(result.get(k), int))
    for key in BAD_LISTS:
        value = result.get(key)
        if value:
            items = list(value.items() if isinstance(value, dict) else value)
            shown[key] = f"{len(items)}: " + "; ".join(str(i)[:200] for i in items[:3])
            problems += len(items)
    return f"{name}: {'BAD ' if problems else ''}" + json.dumps(shown, default=str), problems


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="all scenarios (default)")
    for p in (parser, run):
        p.add_argument("--trials", type=int, default=100)
        p.add_argument("--seconds", type=float, default=60.0)
        p.add_argument("--fuzz", type=int, default=2000)
        p.add_argument("--workdir", default=None)
        p.add_argument("--out", default=None,
                       help=f"default {RESULTS.name} ({PG_RESULTS.name} on PostgreSQL)")
        p.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
        p.add_argument("--only", default=None,
                       help="comma-separated scenarios to run (merged into --out): crash, "
                            "concurrency, ..., path:NAME, race:NAME, fuzz:NAME, or paths, "
                            "races, fuzzers for a whole group")
        p.add_argument("--docs", type=int, default=200, help="documents per write path")
        p.add_argument("--rounds", type=int, default=10, help="rounds per race")
        p.add_argument("--deleters", type=int, default=None,
                       help="deleting processes per race (default 1; 3 on PostgreSQL)")
        p.add_argument("--ops", type=int, default=None,
                       help="processes running the raced operation at once (default 1; "
                            "2 on PostgreSQL: the same command on two machines)")
        p.add_argument("--fuzz-inputs", type=int, default=300, help="inputs per fuzzer")
    crash = sub.add_parser("crash-child")
    crash.add_argument("--n", type=int, default=1000)
    crash.add_argument("--gen", type=int, default=1)
    crash.add_argument("--batch", type=int, default=32)
    w = sub.add_parser("writer")
    r = sub.add_parser("reader")
    o = sub.add_parser("open-child")
    for p in (crash, w, r, o):
        p.add_argument("--db", required=True)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--go", default=None)
    for p in (w, r):
        p.add_argument("--seconds", type=float, default=10.0)
    w.add_argument("--wid", type=int, default=1)
    w.add_argument("--own", default="0:300")
    w.add_argument("--shared", default="")
    o.add_argument("--k", type=int, default=0)
    args = parser.parse_args(argv)

    if args.command == "crash-child":
        crash_child(args.db, args.n, args.gen, args.batch, args.seed, args.go)
    elif args.command == "writer":
        print(json.dumps(writer(args.db, args.seconds, args.seed, args.wid, _range(args.own),
                                _range(args.shared), args.go)), flush=True)
    elif args.command == "reader":
        print(json.dumps(reader(args.db, args.seconds, args.seed, args.go)), flush=True)
    elif args.command == "open-child":
        print(json.dumps(open_child(args.db, args.k, args.go)), flush=True)
    else:
        _run_all(args)


def _scenarios(args: argparse.Namespace, work: Path) -> list[tuple[str, Any]]:
    """(name, thunk) of every scenario; write paths as ``path:NAME``, races as
    ``race:NAME``, input fuzzers as ``fuzz:NAME``."""
    from benchmarks import reliability_fuzz as fuzz
    from benchmarks import reliability_paths as paths
    from benchmarks import reliability_races as races

    out: list[tuple[str, Any]] = [
        ("crash", lambda: run_crash_trials(work / "crash", args.trials)),
        ("concurrency", lambda: run_concurrency(work / "conc", args.seconds)),
        ("two_writers", lambda: run_two_writers(work / "two", min(args.seconds, 20))),
        ("migration_race", lambda: run_migration_race(work / "race", procs=8, rounds=5)),
        ("query_fuzz", lambda: run_query_fuzz(work / "fuzz", args.fuzz)),
    ]
    for name in paths.CRASH_PATHS:
        out.append((f"path:{name}", lambda name=name: paths.run_path_trials(
            name, work / f"path-{name}", args.trials, n=args.docs)))
    deleters = args.deleters or (3 if args.backend == "postgres" else 1)
    ops = args.ops or (2 if args.backend == "postgres" else 1)
    for name in races.RACE_OPS:
        out.append((f"race:{name}", lambda name=name: races.run_race(
            name, work / f"race-{name}", rounds=args.rounds, n=args.docs,
            deleters=deleters, ops=ops)))
    for name, fn in fuzz.FUZZERS.items():
        out.append((f"fuzz:{name}", lambda fn=fn, name=name: fn(work / f"fuzz-{name}",
                                                                 args.fuzz_inputs)))
    if args.backend == "postgres":
        out = [(n, fn) for n, fn in out
               if n.split(":")[0] in PG_SCENARIOS and n not in SQLITE_ONLY]
    return out


GROUPS = {"path": "paths", "race": "races", "fuzz": "fuzzers"}


def _selected(name: str, only: set[str] | None) -> bool:
    return only is None or name in only or GROUPS.get(name.split(":")[0]) in only


def _run_all(args: argparse.Namespace) -> None:
    if args.backend == "sqlite":
        _run_scenarios(args, Path(args.out or RESULTS))
        return
    from benchmarks.reliability_docs import use_postgres
    from tests import pg_server

    server = pg_server.start()
    try:
        use_postgres(server.url)
        _run_scenarios(args, Path(args.out or PG_RESULTS))
    finally:
        server.stop()


def _run_scenarios(args: argparse.Namespace, out: Path) -> None:
    import tempfile

    from benchmarks.reliability_report import write_markdown

    only = set(args.only.split(",")) if args.only else None
    results: dict[str, Any] = json.loads(out.read_text()) if only and out.exists() else {}
    bad = 0
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        for name, fn in _scenarios(args, work):
            if not _selected(name, only):
                continue
            started, load = time.perf_counter(), os.getloadavg()[0]
            result = fn()
            result["elapsed_seconds"] = round(time.perf_counter() - started, 1)
            if args.backend == "postgres":
                result["load"] = f"{load:.1f}-{os.getloadavg()[0]:.1f}"
            group, _, key = name.partition(":")
            if key:
                results.setdefault(GROUPS[group], {})[key] = result
            else:
                results[name] = result
            line, problems = summary(name, result)
            print(line, flush=True)
            bad += problems
            # Written after every scenario: a long run that is stopped keeps its figures.
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n",
                           encoding="utf-8")
            write_markdown(results, out.with_suffix(".md"), backend=args.backend)
    print(f"wrote {out} and {out.with_suffix('.md')}")
    if bad:
        print(f"FAILED: {bad} problem count(s) above are not zero", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()

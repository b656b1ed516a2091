"""Instructions per search.sql run, counted by valgrind (callgrind): a figure
that does not move with the machine's load, for comparing statement versions.

    python -m benchmarks.search_instructions --sizes 1000,10000 \\
        --sql OLD/search.sql --sql kbstore/backends/sqlite/search.sql [--min-similarity 0.25]

For each corpus (the cached real-vector ones of benchmarks/speed.py, which
must have been built) and statement: the process runs --queries pinned
queries once, and once more; the difference in instructions / --queries is
the statement's cost per search (parameters, the in-memory sign-bit ranking
and the compile are paid before both, so they cancel). Needs valgrind on
PATH; each count takes ~30 s at 1k documents, ~90 s at 10k.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def _child(n: int, sql_file: Path, runs: int, queries: int, floor: float | None,
           cache: Path) -> None:
    import benchmarks.one_blas_thread  # noqa: F401  (sets the BLAS threads numpy reads)
    import kbstore.backends.sqlite.search as sqlite_search
    from benchmarks.latency import build_params, query_texts
    from benchmarks.latency_data import DATASETS, paths_for
    from benchmarks.precomputed import PrecomputedEmbedder
    from benchmarks.speed import real_queries
    from benchmarks.speed_ab import use
    from kbstore import KnowledgeStore

    store = KnowledgeStore.open(paths_for(n, 384, cache, "real")["db"],
                                PrecomputedEmbedder(384), hype=False)
    backend: Any = store.backend  # a SQLite file: its connection and bits copy
    conn = backend.conn
    use(sql_file.read_text(encoding="utf-8"))  # what store.search would run, unguarded
    sql = sqlite_search.statement(True, guarded=False)
    settings = {} if floor is None else {"min_similarity": floor}
    params = []
    for q, v in zip(query_texts(DATASETS, queries), real_queries(queries, cache_dir=cache),
                    strict=True):
        p = build_params(store, q, v, **settings)
        for _ in range(2):  # the second call ranks the bits from the copy
            sqlite_search.ranked_bits(backend.bits_scan, conn, p, 384)
        params.append(p)
    conn.execute(sql, params[0]).fetchall()  # compiled before counting starts
    for _ in range(runs):
        for p in params:
            conn.execute(sql, p).fetchall()


def count(n: int, sql_file: Path, runs: int, args: argparse.Namespace) -> int:
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
           "-m", "benchmarks.search_instructions", "--child", str(n), str(sql_file), str(runs),
           "--queries", str(args.queries), "--cache-dir", str(args.cache_dir)]
    if args.min_similarity is not None:
        cmd += ["--min-similarity", str(args.min_similarity)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stderr
    found = re.search(r"Collected : (\d+)", out)
    if not found:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{out[-2000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> None:
    from benchmarks.latency_data import CACHE

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--sql", type=Path, action="append", help="a search.sql (repeat)")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--min-similarity", type=float, default=None)
    ap.add_argument("--cache-dir", type=Path, default=CACHE)
    ap.add_argument("--child", nargs=3, metavar=("N", "SQL", "RUNS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        n, sql, runs = args.child
        _child(int(n), Path(sql), int(runs), args.queries, args.min_similarity, args.cache_dir)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on PATH")
    files = args.sql or [Path("kbstore/backends/sqlite/search.sql")]
    for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
        for sql in files:
            per = (count(n, sql, 1, args) - count(n, sql, 0, args)) / args.queries
            print(f"{n:,} docs  {sql}: {per / 1e6:.2f}M instructions per search"
                  f" (floor {args.min_similarity})", flush=True)


if __name__ == "__main__":
    main()

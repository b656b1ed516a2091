"""What the text and frontmatter lists cost: this tree's search.sql against
another revision's (default ``main``) on the same latency corpus, one run.

    python -m benchmarks.fts_cost --sizes 1000,10000,100000
    python -m benchmarks.fts_cost --corpus /path/to/latency --before main
    python -m benchmarks.fts_cost --sizes 10000 --prune-rows 0   # prune below the bound too
    python -m benchmarks.fts_cost --before HEAD --prune-rows 0 --before-prune-rows 1000000000 \\
        --repeat 4        # the same statement, pruning on vs off at every size

Per size, in ONE process on ONE read-only open of the file: the whole
statement and the statement with the FTS lists (documents_fts, questions_fts)
or the frontmatter lists switched off, for both SQL texts, interleaved query
by query (a part's cost = whole - whole without it), and the documents_fts
list's CTEs alone (the least noisy figure); rows BM25 scored per
query (documents_fts; a count that does not depend on load); and whether
both texts return the same FTS list (ids, order) and the same top 10.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.latency import NOW, query_texts
from benchmarks.latency_data import CACHE, DATASETS, paths_for, sqlite_conn
from benchmarks.precomputed import PrecomputedEmbedder
from benchmarks.speed import real_queries

REPO = Path(__file__).resolve().parents[1]
SQL_PATH = "kbstore/backends/sqlite/search.sql"
OFF: dict[str, dict[str, Any]] = {
    "whole statement": {},
    "FTS lists off": {"fts_query": None},
    "frontmatter lists off": {"title_query": None, "tag_terms": "[]"},
}


def other_sql(ref: str) -> str:
    return subprocess.run(["git", "show", f"{ref}:{SQL_PATH}"], cwd=REPO, check=True,
                          capture_output=True, text=True).stdout


def head(sql: str) -> str:
    """The statement's CTEs up to the fusion (the lists alone)."""
    return sql.split("\nfused AS (")[0].rstrip().rstrip(",") + "\n"


def rows_scored(conn: Any, sql: str, params: dict[str, Any]) -> tuple[int, bool]:
    """documents_fts rows BM25 scores: every matched row, or with the pruning
    and a decided list only the rows holding a rarer term; and whether the
    pruning decided the list."""
    if not params["fts_query"]:
        return 0, False
    full = conn.execute("SELECT count(*) FROM documents_fts WHERE documents_fts MATCH ?",
                        (params["fts_query"],)).fetchone()[0]
    if "fts_rare_top" not in sql:
        return int(full), False
    pruned, rare, decided = conn.execute(head(sql) + """
        SELECT (SELECT pruned FROM fts_split), (SELECT count(*) FROM fts_rare),
               (SELECT decided FROM fts_gate)""", params).fetchone()
    return (int(rare), True) if pruned and decided else (int(full), False)


def fts_list(conn: Any, sql: str, params: dict[str, Any]) -> list[tuple[int, float]]:
    return [(r[0], r[1]) for r in conn.execute(
        head(sql) + "SELECT doc_id, score FROM fts_ranked ORDER BY rank", params)]


def run_size(n: int, args: argparse.Namespace, before: str, after: str) -> dict[str, Any]:
    from kbstore import KnowledgeStore
    from kbstore.backends.sqlite.search import compile_params

    where = paths_for(n, args.dim, args.corpus, "real")
    store = KnowledgeStore.open(where["db"], PrecomputedEmbedder(args.dim), read_only=True,
                                hype=False)
    try:
        conn = sqlite_conn(store)
        texts = query_texts(args.data_dir, args.queries)
        vectors = real_queries(args.queries)
        params = []
        for q, v in zip(texts, vectors, strict=True):
            request, _ = store._request(q, None, 10, False, v, NOW, {})
            p = compile_params(request, args.dim)
            if args.prune_rows is not None:  # main's statement ignores the key
                p["fts_prune_rows"] = args.prune_rows
            params.append(p)
        # the before arm's own pruning threshold, if given (its other parameters are the same)
        extra = {"before": ({} if args.before_prune_rows is None
                            else {"fts_prune_rows": args.before_prune_rows}), "after": {}}
        arms = {(sql_name, part): (sql, off | extra[sql_name])
                for sql_name, sql in (("before", before), ("after", after))
                for part, off in OFF.items()}
        for sql_name, sql in (("before", before), ("after", after)):
            # the documents_fts list alone (its CTEs, nothing else): the least noisy figure
            arms[(sql_name, "FTS list alone")] = (
                head(sql) + "SELECT count(*) FROM fts_ranked", extra[sql_name])
        names = list(arms)
        for p in params[:2]:  # warm: statement cache, pages
            for name in names:
                conn.execute(arms[name][0], p | arms[name][1]).fetchall()
        times: dict[tuple[str, str], list[float]] = {name: [] for name in names}
        same_fts = same_top10 = 0
        scored: dict[str, list[int]] = {"before": [], "after": []}
        decided = 0
        for i, p in enumerate(params):
            for name in names[i % len(names):] + names[:i % len(names)]:
                sql, off = arms[name]
                best = float("inf")
                for _ in range(args.repeat):  # the fastest of --repeat runs: least disturbed
                    t = time.perf_counter()
                    conn.execute(sql, p | off).fetchall()
                    best = min(best, time.perf_counter() - t)
                times[name].append(best)
            pb = p | extra["before"]
            same_fts += fts_list(conn, before, pb) == fts_list(conn, after, p)
            top = [[r[0] for r in conn.execute(sql, q)] for sql, q in ((before, pb), (after, p))]
            same_top10 += top[0] == top[1]
            for sql_name, sql in (("before", before), ("after", after)):
                rows, pruned = rows_scored(conn, sql, p | extra[sql_name])
                scored[sql_name].append(rows)
                decided += sql_name == "after" and pruned
    finally:
        store.close()
    med = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
    out: dict[str, Any] = {"n": n, "queries": len(params), "same_fts_list": same_fts,
                           "same_top10": same_top10, "decided_by_pruning": decided,
                           "rows_scored_mean": {k: statistics.mean(v) for k, v in scored.items()}}
    for sql_name in ("before", "after"):
        whole = med[(sql_name, "whole statement")]
        out[sql_name] = {"whole statement": whole,
                         "FTS lists": whole - med[(sql_name, "FTS lists off")],
                         "frontmatter lists": whole - med[(sql_name, "frontmatter lists off")],
                         "documents_fts list alone": med[(sql_name, "FTS list alone")]}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--before", default="main", help="git revision to compare against")
    ap.add_argument("--corpus", type=Path, default=CACHE,
                    help="folder holding the latency corpora (opened read-only)")
    ap.add_argument("--data-dir", type=Path, default=DATASETS)
    ap.add_argument("--before-prune-rows", type=int,
                    help="the before arm's threshold (default: the same as --prune-rows)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="time each query this many times and keep the fastest")
    ap.add_argument("--prune-rows", type=int,
                    help="prune from this many documents on (default: search.py's FTS_PRUNE_ROWS)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from kbstore.backends.sqlite.search import search_sql

    before, after = other_sql(args.before), search_sql()
    results = []
    for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
        r = run_size(n, args, before, after)
        results.append(r)
        print(f"== {n:,} docs, {r['queries']} queries: FTS list identical "
              f"{r['same_fts_list']}/{r['queries']}, top 10 identical "
              f"{r['same_top10']}/{r['queries']}, decided by the pruning "
              f"{r['decided_by_pruning']}/{r['queries']}; documents_fts rows scored "
              f"{r['rows_scored_mean']['before']:,.0f} -> {r['rows_scored_mean']['after']:,.0f}",
              flush=True)
        for part in r["before"]:
            b, a = r["before"][part], r["after"][part]
            print(f"   {part:20s} p50 {b:8.1f} -> {a:8.1f} ms", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(sys.argv[1:]),
                                         "results": results}, indent=1))


if __name__ == "__main__":
    main()

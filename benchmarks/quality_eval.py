"""Running queries through KnowledgeStore.search and scoring them with
pytrec_eval; the plain-script reference; the settings every method row of
benchmarks/quality.py measures."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from benchmarks.quality_data import DEPTH, Collection

# -- running and scoring -----------------------------------------------------


Run = dict[str, dict[str, float]]


def ranked_run(ranked: dict[str, list[str]], depth: int = DEPTH) -> Run:
    """Rank-derived scores, so trec_eval's tie-breaking never reorders a list."""
    return {q: {d: float(depth - i) for i, d in enumerate(docs[:depth])}
            for q, docs in ranked.items()}


def per_query_ndcg(qrels: dict[str, dict[str, int]],
                   ranked: dict[str, list[str]]) -> dict[str, float]:
    """nDCG@10 of every judged query (0 for a query with no results)."""
    import pytrec_eval

    per_q = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(ranked_run(ranked))
    return {q: per_q[q]["ndcg_cut_10"] if q in per_q else 0.0 for q in qrels}


def evaluate(qrels: dict[str, dict[str, int]], ranked: dict[str, list[str]]) -> dict[str, float]:
    import pytrec_eval

    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"})
    top10 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"})
    per_q = full.evaluate(ranked_run(ranked))
    rr = top10.evaluate(ranked_run(ranked, 10))
    n = len(qrels)  # a query with no results scores 0, not "missing"
    return {
        "ndcg@10": sum(v["ndcg_cut_10"] for v in per_q.values()) / n,
        "recall@100": sum(v["recall_100"] for v in per_q.values()) / n,
        "mrr@10": sum(v["recip_rank"] for v in rr.values()) / n,
    }


def paired_difference(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Mean of the per-query differences a - b over the queries of ``b``, and
    its standard error (sample standard deviation / sqrt(n)): on 76 CISI
    queries a 0.004 change of the mean is ~0.2-0.4 standard errors."""
    diffs = [a.get(q, 0.0) - v for q, v in b.items()]
    n = len(diffs)
    if n == 0:
        return {"mean": 0.0, "se": 0.0, "n": 0}
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1) if n > 1 else 0.0
    return {"mean": mean, "se": (var / n) ** 0.5, "n": n}


def kbstore_ranked(col: Collection, settings: dict[str, Any],
                   limit: int = DEPTH) -> dict[str, list[str]]:
    """Every judged query through KnowledgeStore.search (the one SQL statement)."""
    out = {}
    for qid, text in col.queries.items():
        hits = col.store.search(text, limit=limit, **settings)
        out[qid] = [h.path[len("domains/"):-len(".md")] for h in hits]
    return out


class PlainReference:
    """The GUIDE's plain script, for reproducing its numbers: one FTS5 table
    (title, text; porter) queried with an OR of every quoted term, exact cosine
    over MiniLM vectors of "title. text", fusion in Python."""

    def __init__(self, col: Collection, doc_vecs: np.ndarray | None = None) -> None:
        import sqlean

        self.col = col
        self.ids = [r["_id"] for r in col.corpus]
        self.conn = sqlean.connect(":memory:")
        self.conn.execute("CREATE VIRTUAL TABLE t USING fts5(title, text, "
                          "tokenize='porter unicode61 remove_diacritics 2')")
        self.conn.executemany("INSERT INTO t (rowid, title, text) VALUES (?, ?, ?)",
                              [(i, r["title"], r["text"]) for i, r in enumerate(col.corpus)])
        # Default: the vectors kbstore stored ("title. Tags: . text"), so no second
        # embedding pass; pass "title. text" vectors for the GUIDE's exact input.
        self.doc_vecs = (col.embedder.embed_documents(col.store_texts) if doc_vecs is None
                         else doc_vecs)

    def bm25(self, text: str) -> list[tuple[str, float]]:
        import re

        terms = re.findall(r"[^\W_]+", text.lower())
        if not terms:
            return []
        expr = " OR ".join('"' + t + '"' for t in terms)
        rows = self.conn.execute("SELECT rowid, -bm25(t) FROM t WHERE t MATCH ? "
                                 "ORDER BY bm25(t) LIMIT ?", (expr, DEPTH)).fetchall()
        return [(self.ids[r], s) for r, s in rows]

    def dense(self, text: str, doc_vecs: np.ndarray | None = None) -> list[tuple[str, float]]:
        vecs = self.doc_vecs if doc_vecs is None else doc_vecs
        sims = vecs @ self.col.embedder.embed_queries([text])[0]
        top = np.argsort(-sims, kind="stable")[:DEPTH]
        return [(self.ids[i], float(sims[i])) for i in top]

    @staticmethod
    def rrf(lists: list[list[tuple[str, float]]], weights: list[float],
            k: float = 60.0) -> list[str]:
        score: dict[str, float] = {}
        for hits, w in zip(lists, weights, strict=True):
            for rank, (d, _) in enumerate(hits, start=1):
                score[d] = score.get(d, 0.0) + w / (k + rank)
        return sorted(score, key=lambda d: -score[d])

    @staticmethod
    def convex(lists: list[list[tuple[str, float]]], weights: list[float]) -> list[str]:
        score: dict[str, float] = {}
        for hits, w in zip(lists, weights, strict=True):
            if not hits:
                continue
            vals = [s for _, s in hits]
            lo, hi = min(vals), max(vals)
            for d, s in hits:
                score[d] = score.get(d, 0.0) + w * ((s - lo) / (hi - lo) if hi > lo else 1.0)
        return sorted(score, key=lambda d: -score[d])

    def methods(self) -> dict[str, dict[str, list[str]]]:
        out: dict[str, dict[str, list[str]]] = {
            m: {} for m in ("BM25", "dense", "RRF 1:1", "RRF dense 1.5", "convex 0.5")}
        for qid, text in self.col.queries.items():
            b, v = self.bm25(text), self.dense(text)
            out["BM25"][qid] = [d for d, _ in b]
            out["dense"][qid] = [d for d, _ in v]
            out["RRF 1:1"][qid] = self.rrf([b, v], [1, 1])
            out["RRF dense 1.5"][qid] = self.rrf([b, v], [1, 1.5])
            out["convex 0.5"][qid] = self.convex([b, v], [0.5, 0.5])
        return out


def vector_recall(col: Collection, settings: dict[str, Any], k: int = 10) -> float:
    """recall@k of kbstore's vector retriever (sign-bit prefilter + exact rescoring)
    against exact numpy cosine over the very vectors stored in the file."""
    ids = [r["_id"] for r in col.corpus]
    vecs = col.embedder.embed_documents(col.store_texts)
    got = kbstore_ranked(col, {**VEC_ONLY, **NO_CHUNKS, **settings}, limit=k)
    total = 0.0
    for qid, text in col.queries.items():
        sims = vecs @ col.embedder.embed_queries([text])[0]
        exact = {ids[i] for i in np.argsort(-sims, kind="stable")[:k]}
        total += len(exact & set(got[qid])) / k
    return total / len(col.queries)



# -- what is measured --------------------------------------------------------

# A list "alone": every other list weighs 0 (these collections have no
# tags, no dates and one document type, so boosts and recency never apply).
LISTS = ("w_fm", "w_fts", "w_vec", "w_hype", "w_hype_fts", "w_date")


def alone(weight: str) -> dict[str, Any]:
    return {w: (1.0 if w == weight else 0) for w in LISTS}


FTS_ONLY = alone("w_fts")
VEC_ONLY = alone("w_vec")            # document + chunk vectors
HYPE_ONLY = alone("w_hype")          # question vectors
NO_CHUNKS = {"vec_k_chunk": 0}
# The GUIDE's plain BM25: every query word kept, one weight for all columns.
PLAIN_BM25 = {"drop_stopwords": False, "w_title": 1.0, "w_tags": 1.0, "w_body": 1.0}

# name -> settings passed to KnowledgeStore.search (DEFAULTS for the rest)
SEED_RRF = {"k_rrf": 60}  # the GUIDE's plain script and the seed fuse with k=60
BASE_METHODS: dict[str, dict[str, Any]] = {
    "FTS5 alone": FTS_ONLY,
    "vectors alone (document + chunks)": VEC_ONLY,
    "vectors alone, no chunks": {**VEC_ONLY, **NO_CHUNKS},
    "hybrid default (shipped DEFAULTS)": {},
    "default without chunk vectors": NO_CHUNKS,
    "seed RRF k=60, fm+fts+vec equal weights": {**SEED_RRF, "w_fm": 1.0, "w_fm_title": 1.0},
    "RRF k=60 fts+vec 1:1": {**SEED_RRF, "w_fm": 0},
    "weighted RRF k=60 (dense 1.5)": {**SEED_RRF, "w_fm": 0, "w_vec": 1.5},
    "convex 0.5": {"fusion": "convex", "w_fm": 0, "w_fts": 0.5, "w_vec": 0.5},
}
HYPE_METHODS: dict[str, dict[str, Any]] = {
    "HyPE question vectors alone (hype list)": HYPE_ONLY,
    "HyPE question text alone (hype_fts list)": alone("w_hype_fts"),
    "hybrid default, HyPE lists off (w_hype=0, w_hype_fts=0)": {"w_hype": 0.0, "w_hype_fts": 0.0},
    "hybrid default, question vectors only (w_hype_fts=0)": {"w_hype_fts": 0.0},
    "hybrid default, best question instead of top-3 mean (hype_top=1)": {"hype_top": 1},
    "hybrid default (shipped DEFAULTS), HyPE on": {},
}


def timed(label: str, fn: Any, *a: Any, **kw: Any) -> Any:
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    print(f"    {label}: {time.perf_counter() - t0:.1f}s", flush=True)
    return out


def measure(col: Collection, methods: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every method through the real path; each row also carries its nDCG@10
    difference to the shipped default's row (the first row with no settings)
    per query: mean and standard error ("vs_default")."""
    out: dict[str, dict[str, Any]] = {}
    per_query: dict[str, dict[str, float]] = {}
    for name, settings in methods.items():
        ranked = kbstore_ranked(col, settings)
        scores = evaluate(col.qrels, ranked)
        per_query[name] = per_query_ndcg(col.qrels, ranked)
        out[name] = {**scores, "settings": settings}
        print(f"  {name:48s} nDCG@10 {scores['ndcg@10']:.3f}  R@100 "
              f"{scores['recall@100']:.3f}  MRR@10 {scores['mrr@10']:.3f}", flush=True)
    default = next((n for n, s in methods.items() if not s), None)
    if default is not None:
        for name in out:
            out[name]["vs_default"] = paired_difference(per_query[name], per_query[default])
    return out

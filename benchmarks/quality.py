"""Retrieval quality of kbstore on three public test collections.

    python -m benchmarks.quality                       # all three, writes benchmarks/results/
    python -m benchmarks.quality --datasets cranfield  # one collection
    python -m benchmarks.quality --embed-only          # only fill the vector cache

Every kbstore number goes through the product's real query path
(``KnowledgeStore.search`` -> ``kbstore/sql/search.sql``) with per-call
settings; nothing is re-ranked in Python. A small "plain script" reference
(one FTS5 table over title+text, exact numpy cosine, RRF in Python) is
computed in the same run to reproduce the numbers in shared/GUIDE.md.
Metrics come from pytrec_eval (trec_eval): nDCG@10, Recall@100, MRR@10.

Embeddings are cached in ``--cache-dir`` keyed by the embedder fingerprint
and the corpus file hash, so only the first run embeds (SciFact: ~8 min on 2
cores with the offline MiniLM model). HyPE is off by default (no LLM).
``--hype-questions`` replays the LLM-written questions shipped with Cranfield
and CISI (``shared/datasets/<name>/hype_questions.jsonl.gz``) in place of
``litellm.completion``: each HyPE prompt is answered with the questions of
the document it quotes, so HyPE goes through kbstore's real write path
(prompt, parsing, question vectors, its own ranked list) without a network.
``--hype`` instead asks the configured LLM.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# shared/datasets beside the checkout (main) or one level up (a worktree in wt/)
DEFAULT_DATA = next((p / "shared" / "datasets" for p in (REPO.parent, REPO.parent.parent)
                     if (p / "shared" / "datasets").is_dir()), REPO.parent / "shared" / "datasets")
DEFAULT_CACHE = REPO / "benchmarks" / "cache"
RESULTS = REPO / "benchmarks" / "results"
DEPTH = 100  # every run is evaluated on its top 100


# -- data --------------------------------------------------------------------


def load_dataset(root: Path) -> tuple[list[dict[str, str]], dict[str, str],
                                      dict[str, dict[str, int]]]:
    """corpus rows, queries that have >= 1 relevant document, qrels {qid: {doc: gain}}.
    Cranfield's gain 0 means "not relevant" (see its SOURCE.md): kept in the
    qrels for trec_eval, which only counts gain >= 1 as relevant."""
    with gzip.open(root / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        corpus = [json.loads(line) for line in fh if line.strip()]
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels.tsv", encoding="utf-8") as fh:
        next(fh)  # header
        for line in fh:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    qrels = {q: d for q, d in qrels.items() if any(g > 0 for g in d.values())}
    queries = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                if row["_id"] in qrels:
                    queries[row["_id"]] = row["text"]
    qrels = {q: d for q, d in qrels.items() if q in queries}
    return corpus, queries, qrels


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- embedding cache ---------------------------------------------------------


class VectorCache:
    """text -> vector on disk (.npy matrix + .json keys), for one model and corpus."""

    def __init__(self, path: Path, dim: int) -> None:
        self.path, self.dim = path, dim
        self.keys: dict[str, int] = {}
        self.matrix = np.zeros((0, dim), np.float32)
        keys_file, vecs_file = path.with_suffix(".json"), path.with_suffix(".npy")
        if keys_file.exists() and vecs_file.exists():
            keys = json.loads(keys_file.read_text())
            matrix = np.load(vecs_file)
            if len(keys) == len(matrix):
                self.keys = {k: i for i, k in enumerate(keys)}
                self.matrix = matrix.astype(np.float32)
        self._pending: list[tuple[str, np.ndarray]] = []

    @staticmethod
    def key(kind: str, text: str) -> str:
        return hashlib.sha256(f"{kind}\x1f{text}".encode()).hexdigest()[:32]

    def get(self, key: str) -> np.ndarray | None:
        i = self.keys.get(key)
        return None if i is None else self.matrix[i]

    def put(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        new = [(k, v) for k, v in items if k not in self.keys]
        if not new:
            return
        start = len(self.matrix)
        self.matrix = np.vstack([self.matrix, np.stack([v for _, v in new]).astype(np.float32)])
        for i, (k, _) in enumerate(new):
            self.keys[k] = start + i

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        order = sorted(self.keys, key=self.keys.__getitem__)
        tmp = self.path.with_suffix(".tmp.npy")
        np.save(tmp, self.matrix)
        tmp.replace(self.path.with_suffix(".npy"))
        self.path.with_suffix(".json").write_text(json.dumps(order))


class CachingEmbedder:
    """Wraps the real embedder with the same fingerprint: known texts come
    from the cache, unknown ones are embedded (and remembered)."""

    def __init__(self, inner: Any, cache: VectorCache) -> None:
        self.inner, self.cache = inner, cache
        self.name, self.dim = inner.name, inner.dim
        self.max_tokens = getattr(inner, "max_tokens", None)
        # the model's confidence floor: a new database stores it as its default
        self.min_similarity = getattr(inner, "min_similarity", None)
        self.embedded = 0

    def fingerprint(self) -> dict[str, Any]:
        return self.inner.fingerprint()

    def _embed(self, kind: str, texts: Sequence[str], chunk: int = 512,
               progress: bool = False) -> np.ndarray:
        keys = [self.cache.key(kind, t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if self.cache.get(k) is None))
        if missing:
            text_of = {k: t for k, t in zip(keys, texts, strict=True)}
            t0 = time.perf_counter()
            for start in range(0, len(missing), chunk):
                part = missing[start:start + chunk]
                fn = self.inner.embed_documents if kind == "d" else self.inner.embed_queries
                vecs = fn([text_of[k] for k in part])
                self.cache.put(list(zip(part, vecs, strict=True)))
                self.embedded += len(part)
                if len(missing) > chunk:  # long job: keep what is done
                    self.cache.save()
                if progress:
                    done = start + len(part)
                    print(f"  embedded {done}/{len(missing)} "
                          f"({done / (time.perf_counter() - t0):.1f}/s)", flush=True)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self.cache.get(k) for k in keys])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("d", texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("q", texts)


# -- HyPE questions replayed from the shipped files ---------------------------

HYPE_FILE = "hype_questions.jsonl.gz"
REPLAY_MODEL = "replay/shipped-hype-questions"


class ReplayLLM:
    """Stands in for ``litellm.completion``: answers kbstore's HyPE prompt
    with the shipped questions of the document the prompt quotes (matched by
    title and the quoted body, which kbstore cuts at hype.BODY_CHARS)."""

    def __init__(self, corpus: list[dict[str, str]], path: Path) -> None:
        from kbstore.hype import BODY_CHARS

        with gzip.open(path, "rt", encoding="utf-8") as fh:
            by_id = {row["_id"]: row["questions"] for row in map(json.loads, fh) if row}
        self.by_text: dict[tuple[str, str], list[str]] = {}
        self.by_body: dict[str, list[str]] = {}
        for row in corpus:
            questions = by_id.get(row["_id"])
            if questions:
                body = row["text"][:BODY_CHARS]
                self.by_text[(row["title"].strip(), body.strip())] = questions
                self.by_body.setdefault(body.strip(), questions)
        self.calls = self.misses = 0

    def __call__(self, **kwargs: Any) -> Any:
        from types import SimpleNamespace

        self.calls += 1
        prompt = kwargs["messages"][0]["content"]
        title = prompt.split("Title: ", 1)[1].split("\nContent: ", 1)[0].strip()
        body = prompt.split("\nContent: ", 1)[1].rsplit("\n\nReturn only", 1)[0].strip()
        questions = self.by_text.get((title, body)) or self.by_body.get(body)
        if not questions:
            self.misses += 1
            questions = []
        message = SimpleNamespace(content="\n".join(questions))
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


# -- indexing ----------------------------------------------------------------


def doc_path(doc_id: str) -> str:
    return f"domains/{doc_id}.md"


def plain_text(row: dict[str, str]) -> str:
    """What the GUIDE's plain script embedded."""
    return f"{row['title']}. {row['text']}"


class Collection:
    """One dataset indexed in a kbstore file, with its cached vectors."""

    def __init__(self, name: str, data_dir: Path, cache_dir: Path, hype: bool = False,
                 hype_questions: bool = False) -> None:
        from kbstore.embed import embedding_text, fingerprint_id
        from kbstore.embed_minilm import MiniLMEmbedder

        self.name = name
        self.corpus, self.queries, self.qrels = load_dataset(data_dir / name)
        inner = MiniLMEmbedder()
        corpus_hash = file_hash(data_dir / name / "corpus.jsonl.gz")
        self.key = hashlib.sha256(
            f"{fingerprint_id(inner.fingerprint())}|{corpus_hash}".encode()).hexdigest()[:16]
        self.cache = VectorCache(cache_dir / f"{name}-{self.key}", inner.dim)
        self.embedder = CachingEmbedder(inner, self.cache)
        # A schema change (migrations) gets a fresh file; vectors stay cached.
        schema = hashlib.sha256(b"".join(
            p.read_bytes() for p in sorted((REPO / "migrations").glob("**/*.sql")))).hexdigest()[:8]
        suffix = "-hypeq" if hype_questions else "-hype" if hype else ""
        self.db_path = cache_dir / f"{name}-{self.key}-{schema}{suffix}.sqlite"
        self.hype = hype or hype_questions
        self.replay = ReplayLLM(self.corpus, data_dir / name / HYPE_FILE) \
            if hype_questions else None
        self.store_texts = [embedding_text(r["title"].strip() or r["_id"], [], r["text"])
                            for r in self.corpus]
        self.store: Any = None

    def embed_all(self, plain: bool = True) -> None:
        """Fill the cache: the texts kbstore embeds, the plain-script texts, the queries."""
        texts = self.store_texts + ([plain_text(r) for r in self.corpus] if plain else [])
        self.embedder._embed("d", texts, progress=True)
        self.embedder._embed("q", list(self.queries.values()), progress=True)
        self.cache.save()

    def open(self) -> Any:
        from kbstore import KnowledgeStore
        from kbstore.ingest import make_document

        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.store = KnowledgeStore.open(
            self.db_path, embedder=self.embedder, hype=self.hype,
            hype_model=REPLAY_MODEL if self.replay is not None else None)
        docs = (make_document(doc_path(r["_id"]), title=r["title"], body=r["text"])
                for r in self.corpus)
        if self.replay is not None:
            import litellm

            real, litellm.completion = litellm.completion, self.replay
        try:
            report = self.store.upsert_many(docs)  # unchanged documents cost nothing
        finally:
            if self.replay is not None:
                litellm.completion = real
        if self.replay is not None:
            print(f"  replayed HyPE questions: {self.replay.calls} prompts, "
                  f"{self.replay.misses} without a match", flush=True)
        if self.embedder.embedded:
            self.cache.save()
        print(f"{self.name}: {len(self.store)} docs (added {report.added}, unchanged "
              f"{report.unchanged}), {len(self.queries)} judged queries", flush=True)
        return self.store



# -- running and scoring -----------------------------------------------------


Run = dict[str, dict[str, float]]


def ranked_run(ranked: dict[str, list[str]], depth: int = DEPTH) -> Run:
    """Rank-derived scores, so trec_eval's tie-breaking never reorders a list."""
    return {q: {d: float(depth - i) for i, d in enumerate(docs[:depth])}
            for q, docs in ranked.items()}


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
    out = {}
    for name, settings in methods.items():
        scores = evaluate(col.qrels, kbstore_ranked(col, settings))
        out[name] = {**scores, "settings": settings}
        print(f"  {name:48s} nDCG@10 {scores['ndcg@10']:.3f}  R@100 "
              f"{scores['recall@100']:.3f}  MRR@10 {scores['mrr@10']:.3f}", flush=True)
    return out



# -- tuning ------------------------------------------------------------------
# Searching a grid of fusion settings through SQL would cost |grid| x |queries|
# statements. The statement's explain output already carries every
# retriever's rank and raw score, so one real search per query (per retriever
# setting) gives the inputs, the grid is fused here exactly as search.sql
# fuses, and only the chosen settings are re-run through the real path.

Components = dict[str, dict[str, tuple[Any, ...]]]  # qid -> doc -> ranks and raw scores


def components(col: Collection, settings: dict[str, Any]) -> Components:
    """Per query and document: (fm rank, fm weight, fts rank, bm25, vec rank,
    cosine, hype rank, question cosine, hype_fts rank) from the statement's
    explain output."""
    s = {**settings}
    limit = min(1000, sum(int(s.get(k, d)) for k, d in (
        ("fm_limit", 100), ("fts_limit", 100), ("vec_limit", 100), ("vec_limit", 100))))
    out: Components = {}
    for qid, text in col.queries.items():
        hits = col.store.search(text, limit=limit, explain=True, **s)
        out[qid] = {h.path[len("domains/"):-len(".md")]: (
            h.explain["ranks"]["frontmatter"], h.explain["frontmatter_weight"],
            h.explain["ranks"]["fts"], h.explain["raw"]["bm25"],
            h.explain["ranks"]["vector"], h.explain["raw"]["cosine"],
            h.explain["ranks"]["hype"], h.explain["raw"]["question_cosine"],
            h.explain["ranks"]["hype_fts"]) for h in hits}
    return out


def _minmax(docs: dict[str, tuple[Any, ...]], i: int) -> dict[str, float]:
    vals = {d: c[i] for d, c in docs.items() if c[i] is not None}
    lo, hi = min(vals.values(), default=0), max(vals.values(), default=0)
    return {d: (v - lo) / (hi - lo) if hi > lo else 1.0 for d, v in vals.items()}


def fuse(comp: Components, fusion: str, k_rrf: float = 20.0, w_fm: float = 1.0,
         w_fts: float = 1.0, w_vec: float = 1.0, w_hype: float = 1.0,
         w_hype_fts: float = 1.5) -> dict[str, list[str]]:
    """search.sql's fusion in Python (rrf, or convex without the fm and hype_fts lists)."""
    out = {}
    for qid, docs in comp.items():
        if fusion == "rrf":
            score = {d: (w_fm * c[1] / (k_rrf + c[0]) if c[0] else 0.0)
                     + (w_fts / (k_rrf + c[2]) if c[2] else 0.0)
                     + (w_vec / (k_rrf + c[4]) if c[4] else 0.0)
                     + (w_hype / (k_rrf + c[6]) if c[6] else 0.0)
                     + (w_hype_fts / (k_rrf + c[8]) if c[8] else 0.0)
                     for d, c in docs.items()}
        else:
            nf, nv, nh = _minmax(docs, 3), _minmax(docs, 5), _minmax(docs, 7)
            score = {d: w_fts * nf.get(d, 0.0) + w_vec * nv.get(d, 0.0)
                     + w_hype * nh.get(d, 0.0) for d in docs}
        out[qid] = sorted(score, key=lambda d: (-score[d], d))[:DEPTH]
    return out


RETRIEVER_GRID: dict[str, dict[str, Any]] = {
    "bm25 default": {},
    "bm25 plain": PLAIN_BM25,
    "bm25 keep stopwords": {"drop_stopwords": False},
    "bm25 title 1": {"w_title": 1.0},
    "bm25 title 3": {"w_title": 3.0},
    "depth 200": {"fts_limit": 200, "vec_limit": 200},
}


def fusion_grid(hype: bool = False) -> list[dict[str, Any]]:
    grid: list[dict[str, Any]] = []
    hype_weights = [(h, q) for h in (0.5, 1.0, 1.5) for q in (0.5, 1.0, 1.5)] if hype \
        else [(1.0, 1.5)]
    for k in (5, 10, 20, 40, 60, 100):
        for w_vec in (0.75, 1.0, 1.25, 1.5, 2.0):
            for w_fm in (0.0, 0.25, 0.5, 1.0):
                for w_hype, w_hype_fts in hype_weights:
                    grid.append({"fusion": "rrf", "k_rrf": float(k), "w_fm": w_fm,
                                 "w_fts": 1.0, "w_vec": w_vec, "w_hype": w_hype,
                                 "w_hype_fts": w_hype_fts})
    for w_vec in (0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8):
        for w_hype in ((0.2, 0.4, 0.6) if hype else (0.0,)):
            grid.append({"fusion": "convex", "w_fm": 0.0, "w_fts": round(1 - w_vec, 2),
                         "w_vec": w_vec, "w_hype": w_hype, "w_hype_fts": 0.0})
    return grid


def tune(col: Collection, hype: bool = False,
         retrievers: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every (retriever setting, fusion setting) pair scored on ``col``, best first."""
    rows = []
    for rname, rsettings in (retrievers or RETRIEVER_GRID).items():
        comp = timed(f"components {rname}", components, col, rsettings)
        for fsettings in fusion_grid(hype):
            scores = evaluate(col.qrels, fuse(comp, **fsettings))
            rows.append({"retrievers": rname, "settings": {**rsettings, **fsettings}, **scores})
    return sorted(rows, key=lambda r: -r["ndcg@10"])



# -- the whole run -----------------------------------------------------------

GUIDE = {  # shared/GUIDE.md, plain script, nDCG@10
    "scifact": {"BM25": 0.686, "dense": 0.649, "RRF 1:1": 0.715, "RRF dense 1.5": 0.709,
                "convex 0.5": 0.727},
    "cranfield": {"BM25": 0.354, "dense": 0.384, "RRF 1:1": 0.415, "RRF dense 1.5": 0.418,
                  "convex 0.5": 0.413},
    "cisi": {"BM25": 0.367, "dense": 0.425, "RRF 1:1": 0.441, "RRF dense 1.5": 0.444,
             "convex 0.5": 0.443},
}
ANCHORS = {"scifact": {"BM25 (BEIR paper)": 0.665, "txtai BM25": 0.663, "txtai dense": 0.651,
                       "txtai hybrid": 0.713}}
TARGETS = {"scifact": 0.73, "cranfield": 0.43, "cisi": 0.46}


def _changes(row: dict[str, Any]) -> int:
    from kbstore.query import DEFAULTS

    # the grid's w_fm is the effective title-only weight (no tags in these sets)
    shipped = {**DEFAULTS, "w_fm": DEFAULTS["w_fm"] * DEFAULTS["w_fm_title"]}
    return sum(1 for k, v in row["settings"].items() if shipped.get(k) != v)


def choose(rows: list[dict[str, Any]], tolerance: float = 0.002) -> dict[str, dict[str, Any]]:
    """From the tuning table, per family: the best RRF that keeps the
    frontmatter retriever (w_fm > 0; the default candidate) and the best convex.
    Rows within ``tolerance`` nDCG@10 of a family's best are a tie (the grid's
    surface is flat at that level); the tie goes to the fewest changed DEFAULTS."""
    families = {
        "default": lambda s: s["fusion"] == "rrf" and s["w_fm"] > 0,
        "convex": lambda s: s["fusion"] == "convex",
    }
    chosen = {}
    for family, member in families.items():
        members = [r for r in rows if member(r["settings"])]
        top = members[0]["ndcg@10"]
        near = [r for r in members if r["ndcg@10"] >= top - tolerance]
        chosen[family] = min(near, key=lambda r: (_changes(r), -r["ndcg@10"]))["settings"]
    return chosen


def git_state() -> str:
    import subprocess

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True).stdout
    dirty = git("status", "--porcelain", "--", "kbstore", "migrations").strip()
    return git("rev-parse", "--short", "HEAD").strip() + (" (+ uncommitted kbstore changes)"
                                                          if dirty else "")


def title_weight(settings: dict[str, Any]) -> dict[str, Any]:
    out = dict(settings)
    if "w_fm" in out:
        out["w_fm_title"], out["w_fm"] = out.pop("w_fm"), 1.0
    return out


def hype_replay(args: argparse.Namespace, name: str,
                hype_chosen: dict[str, Any]) -> dict[str, Any]:
    """The same collection with the shipped HyPE questions replayed: every
    retriever alone, the default with the HyPE lists off and on, and the
    fusion chosen with HyPE on the tuning collection."""
    col = Collection(name, args.data_dir, args.cache_dir, hype_questions=True)
    print(f"== {name} with the shipped HyPE questions", flush=True)
    col.open()
    methods = {"FTS5 alone": FTS_ONLY, "vectors alone (document + chunks)": VEC_ONLY,
               **HYPE_METHODS, **FLOOR_METHODS}
    if args.quick:
        methods = {m: v for m, v in methods.items()
                   if m in QUICK_METHODS or m in QUICK_HYPE or m in FLOOR_METHODS}
    if hype_chosen:
        methods[f"HyPE fusion tuned on {args.tune_on}"] = title_weight(hype_chosen)
    try:
        return {"methods": measure(col, methods), "replay_calls": col.replay.calls
                if col.replay else 0, "replay_misses": col.replay.misses if col.replay else 0}
    finally:
        col.store.close()


# "hybrid default" has the embedder's floor (a new MiniLM database stores it)
FLOOR_METHODS: dict[str, dict[str, Any]] = {
    "hybrid default, floor off (min_similarity=None)": {"min_similarity": None},
}


def add_floor_rows(args: argparse.Namespace, names: list[str]) -> int:
    """The shipped default with and without MiniLM's confidence floor, merged
    into an existing quality.json (and its markdown)."""
    from kbstore.embed_minilm import MiniLMEmbedder

    path = args.results_dir / "quality.json"
    results = json.loads(path.read_text())
    results["floor"] = MiniLMEmbedder.min_similarity
    for name in names:
        data = results["datasets"][name]
        col = Collection(name, args.data_dir, args.cache_dir)
        print(f"== {name}: floor", flush=True)
        col.open()
        try:
            data["methods"].update(measure(col, FLOOR_METHODS))
        finally:
            col.store.close()
        if "hype_replay" in data:
            col = Collection(name, args.data_dir, args.cache_dir, hype_questions=True)
            col.open()
            try:
                data["hype_replay"]["methods"].update(measure(col, FLOOR_METHODS))
            finally:
                col.store.close()
    path.write_text(json.dumps(results, indent=1))
    from benchmarks.quality_report import write_markdown

    write_markdown(results, args.results_dir / "quality.md")
    return 0


QUICK_METHODS = ("FTS5 alone", "vectors alone (document + chunks)",
                 "hybrid default (shipped DEFAULTS)", "default without chunk vectors")
QUICK_HYPE = ("HyPE question vectors alone (hype list)",
              "HyPE question text alone (hype_fts list)",
              "hybrid default, HyPE lists off (w_hype=0, w_hype_fts=0)",
              "hybrid default (shipped DEFAULTS), HyPE on")


def run_all(args: argparse.Namespace, names: list[str]) -> int:
    started = time.strftime("%Y-%m-%d %H:%M")
    if args.quick:  # the shipped defaults only: no grid, fewer rows
        rows: list[dict[str, Any]] = []
        chosen = {"default": {}, "convex": {"fusion": "convex", "w_fm": 0.0, "w_fts": 0.45,
                                            "w_vec": 0.55}}
    else:
        tune_col = Collection(args.tune_on, args.data_dir, args.cache_dir)
        tune_col.open()
        print(f"== tuning on {args.tune_on}", flush=True)
        rows = tune(tune_col)
        chosen = choose(rows)
        print(f"  chosen: {chosen}", flush=True)
        tune_col.store.close()
    hype_chosen: dict[str, Any] = {}
    if args.quick:
        results_hype_top: list[dict[str, Any]] = []
    elif args.hype_questions and (args.data_dir / args.tune_on / HYPE_FILE).exists():
        hype_col = Collection(args.tune_on, args.data_dir, args.cache_dir, hype_questions=True)
        hype_col.open()
        print(f"== tuning the HyPE lists on {args.tune_on}", flush=True)
        hype_rows = tune(hype_col, hype=True, retrievers={"default": {}})
        hype_chosen = choose(hype_rows)["default"]
        print(f"  chosen with HyPE: {hype_chosen}", flush=True)
        hype_col.store.close()
        results_hype_top = hype_rows[:10]
    else:
        results_hype_top = []
    base = {**BASE_METHODS, **FLOOR_METHODS}
    methods = {
        **base,
        "FTS5 alone, plain bm25 (GUIDE settings)": {**FTS_ONLY, **PLAIN_BM25},
        "RRF k=60 fts+vec 1:1, plain bm25 (GUIDE settings)": {**SEED_RRF, "w_fm": 0,
                                                              **PLAIN_BM25},
        # These collections have no tags: every frontmatter hit is a title-only
        # match, so the tuned frontmatter weight is search.sql's w_fm_title.
        f"proposed default RRF (tuned on {args.tune_on})": title_weight(chosen["default"]),
        f"convex (tuned on {args.tune_on})": chosen["convex"],
    }
    if args.quick:
        methods = {m: v for m, v in methods.items() if m in QUICK_METHODS or m in FLOOR_METHODS}
    results: dict[str, Any] = {
        "started": started, "quick": bool(args.quick), "commit": git_state(),
        "tuned_on": args.tune_on, "depth": DEPTH,
        "embedder": "minilm (all-MiniLM-L6-v2 int8, offline), 256-token truncation",
        "chosen": chosen,
        "tuning_top": rows[:15], "hype_chosen": hype_chosen, "hype_tuning_top": results_hype_top,
        "guide": GUIDE, "anchors": ANCHORS, "targets": TARGETS,
        "datasets": {},
    }
    for name in names:
        col = Collection(name, args.data_dir, args.cache_dir, hype=args.hype)
        print(f"== {name}", flush=True)
        col.open()
        measured = measure(col, methods)
        plain = {m: evaluate(col.qrels, r) for m, r in PlainReference(col).methods().items()}
        for m, sc in plain.items():
            print(f"  plain script {m:35s} nDCG@10 {sc['ndcg@10']:.3f}", flush=True)
        # auto = what search(limit=10) uses (max(256, 4 x limit)); 64/128 for comparison
        recall = {} if args.quick else {
            str(k or "auto (256 at limit 10)"): vector_recall(col, {"vec_k_doc": k})
            for k in (None, 64, 128, 4096)}
        print(f"  vector recall@10 vs exact: {recall}", flush=True)
        results["datasets"][name] = {
            "documents": len(col.corpus), "queries": len(col.queries),
            "methods": measured, "plain_script": plain, "vector_recall@10_vs_exact": recall,
        }
        col.store.close()
        if args.hype_questions and (args.data_dir / name / HYPE_FILE).exists():
            results["datasets"][name]["hype_replay"] = hype_replay(args, name, hype_chosen)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / "quality.json").write_text(json.dumps(results, indent=1))
    from benchmarks.quality_report import plot, write_markdown

    write_markdown(results, args.results_dir / "quality.md")
    plot(results, args.results_dir / "quality.png")
    print(f"wrote {args.results_dir}/quality.{{json,md,png}}")
    return 0



# -- command line ------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    p.add_argument("--datasets", default="scifact,cranfield,cisi")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results-dir", type=Path, default=RESULTS)
    p.add_argument("--embed-only", action="store_true", help="only fill the vector cache")
    p.add_argument("--no-plain", action="store_true",
                   help="skip the plain-script reference (and its extra embeddings)")
    p.add_argument("--tune-on", default="cranfield",
                   help="the ONE collection fusion settings are chosen on")
    p.add_argument("--quick", action="store_true",
                   help="the shipped defaults only: no tuning grid, fewer rows, no KNN recall")
    p.add_argument("--floor-rows", action="store_true",
                   help="only add the default with and without the embedder's floor to an "
                        "existing quality.json")
    p.add_argument("--hype-questions", action="store_true",
                   help="also measure HyPE on the collections that ship hype_questions.jsonl.gz, "
                        "replaying those questions in place of litellm.completion")
    p.add_argument("--hype", action="store_true",
                   help="generate HyPE questions with the configured LLM (see kbstore.hype)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    if args.embed_only:
        for name in names:
            print(f"== {name}", flush=True)
            Collection(name, args.data_dir, args.cache_dir).embed_all(plain=not args.no_plain)
        return 0
    if args.floor_rows:
        return add_floor_rows(args, names)
    return run_all(args, names)


if __name__ == "__main__":
    sys.exit(main())

"""Choosing fusion settings on ONE collection (benchmarks/quality.py
--tune-on): the grid is fused in Python from one explain run per retriever
setting, exactly as search.sql fuses; the published reference figures."""

from __future__ import annotations

from typing import Any

from benchmarks.quality_data import DEPTH, Collection
from benchmarks.quality_eval import PLAIN_BM25, evaluate, timed

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
    # Title-only hits at full weight: the grid's w_fm is the effective title
    # weight (re-run as w_fm_title, see title_weight), so the explain output
    # must not carry the default w_fm_title already (it did: the grid scored
    # w_fm x 0.25 and re-ran w_fm). The fm list's order does not depend on it.
    s = {**settings, "w_fm_title": 1.0}
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



# -- published reference figures, and the choice -----------------------------

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

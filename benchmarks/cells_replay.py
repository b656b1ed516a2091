"""Go/no-go replay of a coarse-cell candidate generator for the sign-bit plan.

    python -m benchmarks.cells_replay --sizes 10000,100000 --out benchmarks/results/cells_replay

numpy only, no schema change. On the cached real-vector corpora of
benchmarks/speed.py (seed.npz: the same unit vectors kbstore stores), each
vector kind (document vectors, question vectors) is clustered by spherical
k-means on a sample; every vector belongs to its nearest centroid's cell. A
query ranks the centroids by cosine and probes the best P cells: in each
probed cell the top ``k_probe`` vectors by hamming distance of sign bits
(one vec0 KNN per cell: sqlite-vec 0.1.9 takes only =, <, <=, >, >=, != on a
partition key, no IN), the union rescored exactly as search.sql does:

- documents: the candidates' exact cosine, best per document, top vec_limit;
- questions: the best vec_k_hype candidates by exact cosine, then every
  question of their documents, a document scoring the mean of its hype_top
  best questions (top vec_limit), its best question as its similarity;
- the two lists' documents by their best similarity, top 10,

against exact search (best vector per document over document and question
vectors; what benchmarks.speed.recall_at_10 compares with). Rows touched: the
vectors of the probed cells (vec0 compares every one) against today's one KNN
over the whole kind (k = 256 / 192), and the candidates rescored from floats
(today 448). ``--merge-to``: the probes' union cut to that many by hamming
distance before the rescoring.
"""

from __future__ import annotations

import benchmarks.one_blas_thread  # noqa: F401  (first: sets the BLAS threads numpy reads)

# isort: split
import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.latency_data import CACHE, paths_for
from benchmarks.speed import real_queries

K_DOC, K_HYPE_KNN, K_HYPE, VEC_LIMIT, HYPE_TOP = 256, 192, 128, 100, 3


def kmeans(x: np.ndarray, cells: int, sample: int, iters: int, seed: int = 3) -> np.ndarray:
    """Spherical k-means on a sample of unit rows: (cells, dim) unit centroids."""
    rng = np.random.default_rng(seed)
    pick = x[rng.choice(len(x), size=min(sample, len(x)), replace=False)]
    cent = pick[rng.choice(len(pick), size=cells, replace=False)].copy()
    for _ in range(iters):
        near = np.argmax(pick @ cent.T, axis=1)
        sums = np.zeros_like(cent)
        np.add.at(sums, near, pick)
        norms = np.linalg.norm(sums, axis=1)
        empty = norms == 0
        sums[empty] = pick[rng.choice(len(pick), size=int(empty.sum()), replace=False)]
        cent = sums / np.linalg.norm(sums, axis=1, keepdims=True)
    return cent.astype(np.float32)


def assign(x: np.ndarray, cent: np.ndarray, step: int = 50000) -> np.ndarray:
    return np.concatenate([np.argmax(x[i:i + step] @ cent.T, axis=1)
                           for i in range(0, len(x), step)])


def by_block(a: np.ndarray, b: np.ndarray, step: int = 50000) -> np.ndarray:
    return np.concatenate([a[i:i + step] @ b for i in range(0, len(a), step)])


class Kind:
    """One vector kind: exact cosines and hamming distances for every query."""

    def __init__(self, x: np.ndarray, q: np.ndarray) -> None:
        self.n = len(x)
        self.cos = by_block(x, q.T)                                    # (n, Q)
        sx = np.where(x > 0, 1, -1).astype(np.float32)
        sq = np.where(q > 0, 1, -1).astype(np.float32)
        self.ham = ((x.shape[1] - by_block(sx, sq.T)) / 2).astype(np.int32)  # (n, Q)
        self.x = x
        self.cell: np.ndarray | None = None

    def cluster(self, cells: int, sample: int, iters: int) -> None:
        self.cent = kmeans(self.x, cells, sample, iters)
        self.cell = assign(self.x, self.cent)
        self.order = np.argsort(self.cell, kind="stable")
        counts = np.bincount(self.cell, minlength=cells)
        self.sizes = counts
        self.starts = np.concatenate([[0], np.cumsum(counts)])

    def top_ham(self, qi: int, idx: np.ndarray, k: int) -> np.ndarray:
        """The k rows of idx with the smallest hamming distance (ties: lower index)."""
        if len(idx) <= k:
            return idx
        h = self.ham[idx, qi]
        part = np.argpartition(h, k - 1)[:k]
        # ties at the cut: vec0 keeps the lower rowid; near enough for a replay
        return idx[part]

    def candidates(self, qi: int, qv: np.ndarray, k: int, probes: int | None,
                   k_probe: int, merge: int = 0) -> tuple[np.ndarray, int]:
        """Candidate rows and the vectors compared (probes None: today's one KNN)."""
        if probes is None:
            return self.top_ham(qi, np.arange(self.n), k), self.n
        assert self.cell is not None
        best = np.argsort(-(self.cent @ qv))[:probes]
        out, touched = [], 0
        for c in best:
            members = self.order[self.starts[c]:self.starts[c + 1]]
            touched += len(members)
            out.append(self.top_ham(qi, members, k_probe))
        union = np.concatenate(out)
        # merge: the probes' candidates cut to the ``merge`` best by hamming
        # distance (vec0 returns it), so only that many are rescored from floats
        return (self.top_ham(qi, union, merge) if merge else union), touched


def run_size(n: int, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    z = np.load(paths_for(n, 384, args.cache_dir, "real")["npz"])
    docs = z["vectors"].astype(np.float32)
    hyv = z["hype_vectors"].astype(np.float32)
    ids = {d: i for i, d in enumerate(z["doc_ids"])}
    hype_doc = np.array([ids[d] for d in z["hype_doc_ids"]])
    q = real_queries(args.queries).astype(np.float32)
    kd, kh = Kind(docs, q), Kind(hyv, q)
    del docs, hyv
    # every question of a document: rows grouped by document
    h_order = np.argsort(hype_doc, kind="stable")
    h_start = np.concatenate([[0], np.cumsum(np.bincount(hype_doc, minlength=n))])
    best = kd.cos.copy()
    for qi in range(len(q)):
        np.maximum.at(best[:, qi], hype_doc, kh.cos[:, qi])
    exact = [set(np.argsort(-best[:, qi], kind="stable")[:10]) for qi in range(len(q))]
    print(f"{n:,}: loaded and scored in {time.perf_counter() - t0:.0f} s", flush=True)

    def recall(doc_setting: tuple, hype_setting: tuple) -> dict[str, float]:
        rec, touched_d, touched_h = [], [], []
        floats = []
        for qi in range(len(q)):
            qv = q[qi]
            cd, td = kd.candidates(qi, qv, K_DOC, *doc_setting)
            ch, th = kh.candidates(qi, qv, K_HYPE_KNN, *hype_setting)
            touched_d.append(td)
            touched_h.append(th)
            floats.append(len(cd) + len(ch))
            # document list: exact cosine, top vec_limit (one vector per document)
            vd = cd[np.argsort(-kd.cos[cd, qi], kind="stable")[:VEC_LIMIT]]
            score = {int(d): float(kd.cos[d, qi]) for d in vd}
            # question list
            keep = ch[np.argsort(-kh.cos[ch, qi], kind="stable")[:K_HYPE]]
            hdocs = np.unique(hype_doc[keep])
            means = []
            for d in hdocs:
                rows = h_order[h_start[d]:h_start[d + 1]]
                s = np.sort(kh.cos[rows, qi])[::-1]
                means.append((float(s[:HYPE_TOP].mean()), float(s[0]), int(d)))
            means.sort(key=lambda t: (-t[0], t[2]))
            for _, b, d in means[:VEC_LIMIT]:
                score[d] = max(score.get(d, -2.0), b)
            top = sorted(score, key=lambda d: (-score[d], d))[:10]
            rec.append(len(set(top) & exact[qi]) / 10)
        return {"recall_at_10": float(np.mean(rec)),
                "doc_touched": float(np.mean(touched_d)),
                "hype_touched": float(np.mean(touched_h)),
                "rescored": float(np.mean(floats))}

    base = recall((None, 0), (None, 0))
    base["doc_vectors"], base["hype_vectors"] = kd.n, kh.n
    print(f"  today: recall {base['recall_at_10']:.3f}", flush=True)
    rows: list[dict[str, Any]] = []
    for cell_size in args.cell_sizes:
        cells_d = max(2, round(kd.n / cell_size))
        cells_h = max(2, round(kh.n / cell_size))
        t = time.perf_counter()
        kd.cluster(cells_d, args.sample, args.iters)
        kh.cluster(cells_h, args.sample, args.iters)
        print(f"  cell size {cell_size}: {cells_d} / {cells_h} cells "
              f"(largest {kd.sizes.max()} / {kh.sizes.max()}), "
              f"k-means {time.perf_counter() - t:.0f} s", flush=True)
        for frac in args.fractions:
            pd, ph = max(1, round(cells_d * frac)), max(1, round(cells_h * frac))
            for (kp_d, kp_h), (m_d, m_h) in [(kp, m) for kp in args.k_probe
                                              for m in [(0, 0), *args.merge_to]]:
                r = recall((pd, kp_d, m_d), (ph, kp_h, m_h))
                # vec0 cost model: each probed cell's chunks at the new chunk size
                r.update(cell_size=cell_size, fraction=frac, cells_doc=cells_d,
                         cells_hype=cells_h, probes_doc=pd, probes_hype=ph,
                         k_probe_doc=kp_d, k_probe_hype=kp_h, merge_doc=m_d,
                         merge_hype=m_h,
                         reduction_doc=kd.n / r["doc_touched"],
                         reduction_hype=kh.n / r["hype_touched"],
                         reduction_all=(kd.n + kh.n) / (r["doc_touched"] + r["hype_touched"]))
                rows.append(r)
                print(f"    probe {frac:.2f} ({pd}/{ph} cells), k/probe {kp_d}/{kp_h}"
                      f"{f' merged to {m_d}/{m_h}' if m_d else ''}: recall "
                      f"{r['recall_at_10']:.3f}, touched {r['reduction_all']:.1f}x fewer "
                      f"(doc {r['reduction_doc']:.1f}x, hype {r['reduction_hype']:.1f}x), "
                      f"rescored {r['rescored']:.0f}", flush=True)
    return {"n": n, "queries": len(q), "today": base, "cells": rows}


def parse_pairs(text: str) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in p.split("/")) for p in text.split(",")]  # type: ignore[misc]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--cell-sizes", default="1000,2000",
                    type=lambda s: [int(v) for v in s.split(",")])
    ap.add_argument("--fractions", default="0.05,0.1,0.2,0.3",
                    type=lambda s: [float(v) for v in s.split(",")])
    ap.add_argument("--k-probe", default="256/192,64/48", type=parse_pairs,
                    help="per-probe k for documents/questions, comma-separated pairs")
    ap.add_argument("--merge-to", default="256/192,1024/768", type=parse_pairs,
                    help="also: the union cut to this many by hamming distance (doc/hype)")
    ap.add_argument("--sample", type=int, default=40000)
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--cache-dir", type=Path, default=CACHE)
    ap.add_argument("--out", type=Path, required=True, help="path stem (.json written)")
    args = ap.parse_args(argv)
    results = []
    for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
        results.append(run_size(n, args))
        args.out.with_suffix(".json").write_text(json.dumps(
            {"command": "python -m benchmarks.cells_replay " + " ".join(
                sys.argv[1:] if argv is None else argv),
             "results": results}, indent=1))


if __name__ == "__main__":
    main()

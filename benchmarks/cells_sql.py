"""The coarse-cell candidate generator measured in SQL, before any schema change.

    python -m benchmarks.cells_sql --sizes 10000,100000 --variants 0.1:128/96 \\
        --out benchmarks/results/cells_sql.json

A prototype, not kbstore's schema: for each cached real-vector corpus of
benchmarks/speed.py, a separate file (``--work-dir``, built once through a
temp name) holds a vec0 table partitioned by (kind, cell) -- the document and
question vectors' sign bits, each in the cell of its nearest k-means centroid
(benchmarks/cells_replay.py) -- and the centroids. It is ATTACHed to the
corpus's store, and search.sql's sign-bit KNN of the document and question
vectors (no topic) is replaced by one KNN per probed cell: the query's
``probes`` nearest centroids (a scan of the centroids, in SQL), each cell's
``k_probe`` nearest sign bits, the union rescored from vector_data as today.
Everything else is this tree's search.sql. In ONE process, interleaved query by
query (order rotated): this tree's statement, each cells variant, the seed
design; recall@10 of each statement's vector lists against exact search
(benchmarks.speed.recall_at_10, 100 queries).
"""

from __future__ import annotations

import benchmarks.one_blas_thread  # noqa: F401  (first: sets the BLAS threads numpy reads)

# isort: split
import argparse
import json
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import kbstore.backends.sqlite.search as sqlite_search
from benchmarks.cells_replay import assign, kmeans
from benchmarks.latency import NOW
from benchmarks.latency_data import CACHE, DATASETS, paths_for
from benchmarks.speed import (
    interleave,
    recall_at_10,
)
from benchmarks.speed_ab import open_corpus, use

CHUNK = 1024  # vec0 chunk size of the cells table (4096 would cost a full chunk per cell)

# search.sql's no-topic sign-bit KNN of each kind, as this tree writes it
_KNN = """(SELECT vector_id FROM vectors
          WHERE embedding_bits MATCH vec_quantize_binary(vec_f32(:qvec))
            AND k = CASE WHEN (SELECT {kind} OR plain FROM vec_plan) OR :topic IS NOT NULL
                           OR :bits_{kind} IS NOT NULL THEN 0
                         ELSE {k} END
            AND kind = '{kind}'"""
_CELLS = """(SELECT vector_id FROM (
          SELECT c.vector_id
          FROM (SELECT cell FROM cells.centroids WHERE kind = '{kind}'
                ORDER BY vec_distance_cosine(centroid, vec_f32(:qvec))
                LIMIT {probes}) AS p
          CROSS JOIN cells.vectors_cells AS c
          WHERE c.embedding_bits MATCH vec_quantize_binary(vec_f32(:qvec))
            AND c.k = CASE WHEN (SELECT {kind} FROM vec_plan) OR :topic IS NOT NULL THEN 0
                           ELSE {k_probe} END
            AND c.kind = '{kind}' AND c.cell = p.cell
          ORDER BY c.distance + 0.0, c.vector_id LIMIT {merge_to})"""
_K = {"doc": ":vec_k_doc",
      "hype": "CAST(min(4096, :vec_k_hype * (SELECT hype_oversample FROM vec_plan)) AS INTEGER)"}


def cells_statement(base: str, probes: dict[str, int], k_probe: dict[str, int],
                    merge_to: dict[str, int]) -> str:
    sql = base
    for kind in ("doc", "hype"):
        # the same tokens whatever the indentation
        old = r"\s+".join(re.escape(t) for t in _KNN.format(kind=kind, k=_K[kind]).split())
        new = _CELLS.format(kind=kind, probes=probes[kind], k_probe=k_probe[kind],
                              merge_to=merge_to[kind])
        sql, count = re.subn(old, new.replace("\\", r"\\"), sql)  # new, literally
        if count != 1:
            raise ValueError(f"search.sql's {kind} KNN is not where this prototype expects it")
    # the cells replace vec0's KNN: the scan of the bits indexes stays off, and
    # so do the ids ranked from the in-memory copy of the bits (bits_scan.py)
    sql = re.sub(r":bits_(doc|hype|chunk)\b", "NULL", sql)
    sql, count = re.subn(r"docs_n\.n <= :plain_docs AS plain", "0 AS plain", sql)
    if count != 1:
        raise ValueError("search.sql's plan for the bits indexes is not where this prototype "
                         "expects it")
    return sql


def build_cells(db: Path, out: Path, cell_size: int, sample: int, iters: int) -> dict[str, Any]:
    """The cells file for one corpus (read from its vector_data; db unchanged)."""
    from kbstore.backends.sqlite.connection import binding, vec_path

    if out.exists():
        return json.loads(out.with_suffix(".json").read_text())
    sqlite = binding()
    src = sqlite.connect(f"file:{db}?mode=ro", uri=True)
    tmp = out.with_name(out.name + f".tmp.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    dst = sqlite.connect(str(tmp))
    dst.enable_load_extension(True)
    dst.load_extension(vec_path())
    dst.execute("CREATE TABLE centroids (kind TEXT, cell INTEGER, centroid BLOB, "
                "PRIMARY KEY (kind, cell))")
    info: dict[str, Any] = {"cell_size": cell_size, "chunk_size": CHUNK}
    t0 = time.perf_counter()
    for kind, sql in (
            ("doc", "SELECT v.vector_id, v.embedding FROM documents AS d "
                    "JOIN vector_data AS v ON v.vector_id = d.id * 32"),
            ("hype", "SELECT v.vector_id, v.embedding FROM hype_questions AS q "
                     "JOIN vector_data AS v ON v.vector_id = q.doc_id * 32 + q.position")):
        rows = src.execute(sql).fetchall()
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        x = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        del rows
        if kind == "doc":  # dim: an integer read from the data
            dst.execute(f"""CREATE VIRTUAL TABLE vectors_cells USING vec0(
                vector_id INTEGER PRIMARY KEY, kind TEXT PARTITION KEY,
                cell INTEGER PARTITION KEY, embedding_bits bit[{int(x.shape[1])}],
                chunk_size={CHUNK})""")
        cells = max(1, round(len(x) / cell_size))
        cent = kmeans(x, cells, sample, iters)
        cell = assign(x, cent)
        used = np.bincount(cell, minlength=cells) > 0  # an empty cell is never probed
        dst.executemany("INSERT INTO centroids VALUES (?, ?, ?)",
                        ((kind, i, c.tobytes()) for i, c in enumerate(cent) if used[i]))
        order = np.argsort(cell, kind="stable")  # one cell's rows together
        dst.executemany("INSERT INTO vectors_cells (vector_id, kind, cell, embedding_bits) "
                        "VALUES (?, ?, ?, vec_quantize_binary(?))",
                        ((int(ids[i]), kind, int(cell[i]), x[i].tobytes()) for i in order))
        dst.commit()
        info[kind] = {"vectors": len(x), "cells": int(used.sum()),
                      "largest_cell": int(np.bincount(cell).max())}
    info["build_s"] = time.perf_counter() - t0
    dst.close()
    src.close()
    tmp.rename(out)
    out.with_suffix(".json").write_text(json.dumps(info, indent=1))
    return info


def run_size(n: int, args: argparse.Namespace) -> dict[str, Any]:
    where = paths_for(n, 384, args.cache_dir, "real")
    cells_file = args.work_dir / f"cells-n{n}-c{args.cell_size}.sqlite"
    info = build_cells(where["db"], cells_file, args.cell_size, args.sample, args.iters)
    queries, qvecs, index, store = open_corpus(n, args)
    store.backend.conn.execute("ATTACH DATABASE ? AS cells", (str(cells_file),))
    base = sqlite_search.search_sql()
    statements = {"main": base}
    for frac, kp_doc, kp_hype, m_doc, m_hype in args.variants:
        probes = {k: max(1, round(info[k]["cells"] * frac)) for k in ("doc", "hype")}
        merged = f" merged to {m_doc}/{m_hype}" if m_doc < 10**6 else ""
        statements[f"cells {frac:g} {kp_doc}/{kp_hype}{merged}"] = cells_statement(
            base, probes, {"doc": kp_doc, "hype": kp_hype}, {"doc": m_doc, "hype": m_hype})

    def arm(sql: str) -> Any:
        def search(q: str, v: Any) -> None:
            use(sql)
            store.search(q, query_vector=v, limit=10, now=NOW)
        return search

    arms = {name: arm(sql) for name, sql in statements.items()}
    arms["seed"] = lambda q, v: index.search(q, v, limit=10, now=NOW)
    try:
        times = interleave(arms, queries[:args.queries], qvecs[:args.queries])
        k = args.recall_queries
        recall = {}
        for name, sql in statements.items():
            use(sql)
            recall[name] = recall_at_10(store, index, queries[:k], qvecs[:k])["recall_at_10"]
    finally:
        use(base)
        store.close()
    p50 = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
    return {"n": n, "cells": info, "p50_ms": p50,
            "ratio_vs_seed": {name: p50[name] / p50["seed"] for name in statements},
            "recall_at_10": recall, "queries": args.queries, "recall_queries": k,
            "load": os.getloadavg()[0]}


def parse_variant(text: str) -> tuple[float, int, int, int, int]:
    """share:kd/kh[:md/mh] -- md/mh: the union cut to that many by hamming distance."""
    frac, ks, *merge = text.split(":")
    kd, kh = ks.split("/")
    md, mh = merge[0].split("/") if merge else (10**6, 10**6)
    return float(frac), int(kd), int(kh), int(md), int(mh)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--variants", default="0.1:128/96,0.3:256/192",
                    type=lambda s: [parse_variant(v) for v in s.split(",")],
                    help="share of cells probed : k per probe, documents/questions "
                         "[: the union cut to this many by hamming distance]")
    ap.add_argument("--cell-size", type=int, default=1000)
    ap.add_argument("--sample", type=int, default=40000)
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--recall-queries", type=int, default=100)
    ap.add_argument("--data-dir", type=Path, default=DATASETS)
    ap.add_argument("--cache-dir", type=Path, default=CACHE)
    ap.add_argument("--work-dir", type=Path, default=CACHE.parent / "cells-proto-v2")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
        r = run_size(n, args)
        results.append(r)
        for name in r["recall_at_10"]:
            print(f"{n:,} {name}: p50 {r['p50_ms'][name]:.1f} ms, "
                  f"{r['ratio_vs_seed'][name]:.2f}x seed, recall@10 "
                  f"{r['recall_at_10'][name]:.3f}", flush=True)
        print(f"{n:,} seed: p50 {r['p50_ms']['seed']:.1f} ms; load {r['load']:.1f}", flush=True)
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

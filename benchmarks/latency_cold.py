"""Cold start to the first result, in fresh processes, with peak RSS:
kbstore (KB_COLD below) and the seed baseline's own command line, run
alternately."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.latency_data import REPO, paths_for

PYTHON = sys.executable
TIME = "/usr/bin/time"  # GNU time, for a child's own peak RSS

KB_COLD = r"""
import time
t0 = time.perf_counter()
import json, sys
from kbstore import KnowledgeStore
from benchmarks.precomputed import PrecomputedEmbedder
db, qvec, query, now, dim = sys.argv[1:6]
store = KnowledgeStore.open(db, PrecomputedEmbedder(int(dim)), hype=False)
# Searching is all SQL: the query vector goes in as float32 bytes, no numpy.
with open(qvec, "rb") as f:
    hits = store.search(query, query_vector=f.read(), limit=10, now=now)
print(json.dumps({"first_result": hits[0].path if hits else None,
                  "seconds": time.perf_counter() - t0}))
"""


def _run_child(argv: list[str]) -> dict[str, Any]:
    """Run a process; wall time from spawn to exit, and its own peak RSS.

    Peak RSS comes from GNU time (%M): Linux carries the forking parent's
    high-water mark into a child's ru_maxrss across exec, so getrusage from
    this (large) benchmark process would report its own size instead."""
    t = time.perf_counter()
    proc = subprocess.run([TIME, "-f", "maxrss_kb=%M", *argv], cwd=REPO, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - t
    err = proc.stderr.decode()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed: {err[-2000:]}")
    data = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    rss_kb = int(err.strip().splitlines()[-1].split("=")[1])
    return {"wall_s": wall, "internal_s": data["seconds"], "first_result": data["first_result"],
            "peak_rss_mb": rss_kb / 1024}


def measure_cold(n: int, dim: int, cache: Path, query: str, qvec: np.ndarray, runs: int,
                 now: str) -> dict[str, Any]:
    where = paths_for(n, dim, cache)
    with tempfile.TemporaryDirectory() as tmp:
        qpath = Path(tmp) / "q.npy"
        np.save(qpath, qvec)
        qraw = Path(tmp) / "q.f32"
        qraw.write_bytes(np.asarray(qvec, np.float32).tobytes())
        kb_argv = [PYTHON, "-c", KB_COLD, str(where["db"]), str(qraw), query, now, str(dim)]
        base_argv = [PYTHON, "-m", "benchmarks.baselines.seed", "--docs", str(where["docs"]),
                     "--npz", str(where["npz"]), "--query", query, "--qvec", str(qpath),
                     "--now", now]
        kb: list[dict[str, Any]] = []
        base: list[dict[str, Any]] = []
        for i in range(runs):
            for argv, sink in (((kb_argv, kb), (base_argv, base)) if i % 2 == 0
                               else ((base_argv, base), (kb_argv, kb))):
                sink.append(_run_child(argv))

    def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {key: statistics.median(r[key] for r in rows)
                for key in ("wall_s", "internal_s", "peak_rss_mb")} | {
            "first_result": rows[0]["first_result"], "runs": len(rows)}

    out = {"kbstore": summary(kb), "baseline": summary(base)}
    out["speedup_wall"] = out["baseline"]["wall_s"] / out["kbstore"]["wall_s"]
    out["speedup_internal"] = out["baseline"]["internal_s"] / out["kbstore"]["internal_s"]
    return out

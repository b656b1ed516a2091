"""Did a change move any ranking? Every query of a test collection through
this kbstore and through another tree (e.g. ``git archive`` of the commit
before), on the same database file, compared hit by hit.

    python -m benchmarks.ranking_diff --other /tmp/old --datasets cranfield,scifact

Each tree runs in its own process (the other tree's package put first, this
checkout's editable-install hook dropped), opens the collection's file from
benchmarks/quality.py (vectors cached; built once), and writes the top 10 of
every query for each method below. Reported: queries whose top 10 differ
(paths or order) and nDCG@10 / Recall@100 of both, per method.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
METHODS: dict[str, dict[str, Any]] = {
    "hybrid default": {},
    "vectors alone (document + chunks)": {"w_fm": 0.0, "w_fts": 0.0, "w_hype": 0.0,
                                          "w_hype_fts": 0.0, "w_date": 0.0},
    "FTS5 alone": {"w_fm": 0.0, "w_vec": 0.0, "w_hype": 0.0, "w_hype_fts": 0.0,
                   "w_date": 0.0},
}

CHILD = r"""
import json, os, sys
tree = os.environ.get("KBSTORE_TREE")
if tree:
    sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f)]
    sys.path.insert(0, tree)
import kbstore
from benchmarks.quality_data import DEFAULT_CACHE, DEFAULT_DATA, Collection
from benchmarks.quality_eval import kbstore_ranked
from benchmarks.ranking_diff import METHODS
name, out = sys.argv[1], sys.argv[2]
col = Collection(name, DEFAULT_DATA, DEFAULT_CACHE)
col.open()
ranked = {m: kbstore_ranked(col, s) for m, s in METHODS.items()}
col.store.close()
with open(out, "w") as fh:
    json.dump({"kbstore": kbstore.__file__, "ranked": ranked}, fh)
"""


def run_tree(name: str, tree: Path | None, out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "KBSTORE_TREE": str(tree or "")}
    subprocess.run([sys.executable, "-c", CHILD, name, str(out)], cwd=REPO, check=True,
                   env=env)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def compare(name: str, other: Path) -> dict[str, Any]:
    from benchmarks.quality_data import DEFAULT_DATA, load_dataset
    from benchmarks.quality_eval import evaluate

    qrels = load_dataset(DEFAULT_DATA / name)[2]
    with tempfile.TemporaryDirectory() as tmp:
        before = run_tree(name, other, Path(tmp) / "before.json")
        after = run_tree(name, None, Path(tmp) / "after.json")
    out: dict[str, Any] = {"before": before["kbstore"], "after": after["kbstore"],
                           "methods": {}}
    for method in METHODS:
        b, a = before["ranked"][method], after["ranked"][method]
        differ = [q for q in b if b[q][:10] != a.get(q, [])[:10]]
        eb, ea = evaluate(qrels, b), evaluate(qrels, a)
        out["methods"][method] = {
            "queries": len(b), "top10_differ": len(differ),
            "ndcg@10": [eb["ndcg@10"], ea["ndcg@10"]],
            "recall@100": [eb["recall@100"], ea["recall@100"]]}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", type=Path, required=True,
                    help="a folder holding the other kbstore package")
    ap.add_argument("--datasets", default="cranfield")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    results = {name: compare(name, args.other) for name in args.datasets.split(",")}
    for name, r in results.items():
        print(f"== {name}: before {r['before']}, after {r['after']}")
        for method, m in r["methods"].items():
            print(f"  {method:36s} top-10 differ {m['top10_differ']}/{m['queries']}  "
                  f"nDCG@10 {m['ndcg@10'][0]:.4f} -> {m['ndcg@10'][1]:.4f}  "
                  f"R@100 {m['recall@100'][0]:.4f} -> {m['recall@100'][1]:.4f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

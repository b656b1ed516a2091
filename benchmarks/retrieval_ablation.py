"""Settings side by side on one agent-memory dataset, the stores built once.

    python -m benchmarks.retrieval_ablation benchmarks/agent_memory/sessions --split dev
    python -m benchmarks.retrieval_ablation DIR --split test --grid ablation --out FILE

Each row is kbstore's real search (``KnowledgeStore.search`` with the row's
settings over the shipped defaults) through the agent-memory harness's stores
and metrics (benchmarks/agent_memory: same data, same definitions), beside
plain BM25 and plain dense. ``--grid ablation`` switches each retrieval change
off on its own ("what each change bought"); ``--grid tune`` is the grid the
defaults were chosen from -- run it on ``--split dev`` only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.agent_memory import metrics
from benchmarks.agent_memory.data import Dataset, load, parse_date
from benchmarks.agent_memory.run import DEFAULT_CACHE, Runner
from benchmarks.agent_memory.systems import DEPTH, caching_minilm

# The first release's ranking, as far as settings reach: recency as a full
# multiplier (recency_weight 1 = exp decay), x1.2 / x0.8 type factors, no
# 'latest' ordering, no date, HyPE or chunk lists. (Its tag weight 1.0 and its
# floor exemption for tag matches are gone from the code.)
FIRST_RELEASE = {"recency_weight": 1.0, "boost_skill": 1.2, "boost_journal": 0.8,
                 "latest": False, "w_date": 0.0, "w_hype": 0.0, "vec_k_chunk": 0,
                 "min_similarity": None}
ABLATION: dict[str, dict[str, Any]] = {
    "shipped defaults": {},
    "first release's ranking (see FIRST_RELEASE)": FIRST_RELEASE,
    "without chunk vectors (vec_k_chunk=0)": {"vec_k_chunk": 0},
    "without the date list (w_date=0)": {"w_date": 0.0},
    "without 'latest' ordering (latest=False)": {"latest": False},
    "without recency (half_life_days=None)": {"half_life_days": None},
    "recency as the old multiplier (recency_weight=1)": {"recency_weight": 1.0},
    "old type factors (x1.2 skill, x0.8 journal)": {"boost_skill": 1.2, "boost_journal": 0.8},
    "without the confidence floor (min_similarity=None)": {"min_similarity": None},
    "FTS list alone": {"w_fm": 0.0, "w_vec": 0.0, "w_hype": 0.0, "w_date": 0.0,
                       "half_life_days": None, "latest": False, "boost_skill": 1.0,
                       "boost_journal": 1.0, "boost_entry": 1.0},
    "vector list alone (document + chunks)": {"w_fm": 0.0, "w_fts": 0.0, "w_hype": 0.0,
                                              "w_date": 0.0, "half_life_days": None,
                                              "latest": False, "boost_skill": 1.0,
                                              "boost_journal": 1.0, "boost_entry": 1.0},
}


def tune_grid() -> dict[str, dict[str, Any]]:
    """The dev-split grid for what only agent memory exercises: recency
    strength, the 'latest' threshold, the date list's weight, type factors
    and the floor. (k_rrf and the list weights are chosen on Cranfield, see
    benchmarks/results/quality.md.)"""
    grid: dict[str, dict[str, Any]] = {}
    for rw, ratio, w_date in itertools.product((0.0, 0.05, 0.1, 0.2), (0.6, 0.7, 0.8, 0.9),
                                               (1.0, 1.5, 2.0, 3.0)):
        grid[f"rw={rw} ratio={ratio} w_date={w_date}"] = {
            "recency_weight": rw, "latest_ratio": ratio, "w_date": w_date}
    for half_life in (7.0, 30.0, 90.0):
        grid[f"half_life={half_life}"] = {"half_life_days": half_life}
    for skill, journal in ((1.0, 1.0), (1.05, 0.95), (1.1, 0.9), (1.2, 0.8)):
        grid[f"boost skill={skill} journal={journal}"] = {"boost_skill": skill,
                                                          "boost_journal": journal}
    for floor in (None, 0.2, 0.25, 0.3, 0.35, 0.4):
        grid[f"floor={floor}"] = {"min_similarity": floor}
    return grid


def latest_grid() -> dict[str, dict[str, Any]]:
    """The 'latest' threshold around the tune grid's best, finer."""
    return {f"rw={rw} ratio={ratio} w_date={w_date}": {
        "recency_weight": rw, "latest_ratio": ratio, "w_date": w_date}
        for rw, ratio, w_date in itertools.product((0.0, 0.05), (0.7, 0.75, 0.8, 0.85),
                                                   (1.5, 2.0))}


def score(ds: Dataset, queries: Sequence[dict[str, Any]], ranked: dict[str, list[str]],
          context: dict[str, Any], by: str) -> dict[str, Any]:
    answerable = [q for q in queries if ds.answerable(q)]
    per_query = {q["id"]: metrics.score_query(ranked[q["id"]], ds.qrels[q["id"]])
                 for q in answerable}
    absent = [q for q in queries if q["type"] == "absent"]
    return {
        "overall": metrics.summarize(per_query, [q["id"] for q in answerable]),
        "by": metrics.by_field(answerable, per_query, by),
        "age": metrics.by_age(answerable, ranked, ds.qrels, context["dates"], context["now"]),
        "latest": metrics.latest_accuracy(answerable, ranked, ds.qrels, context["dates"]),
        "absent_empty": [sum(not ranked[q["id"]] for q in absent), len(absent)],
    }


def run(ds: Dataset, rows: dict[str, dict[str, Any]], split: str, by: str,
        log: Any = print) -> dict[str, Any]:
    queries = ds.split(split)
    dates = {kb: {p: d for (k, p), d in ds.updated.items() if k == kb} for kb in ds.docs}
    context = {"dates": dates, "now": {q["id"]: parse_date(q.get("now")) for q in queries}}
    embedder = caching_minilm(DEFAULT_CACHE, ds.name)
    out: dict[str, Any] = {"dataset": ds.name, "split": split, "rows": {}}
    with tempfile.TemporaryDirectory(prefix="ablation-") as tmp:
        runner = Runner(ds, embedder, Path(tmp), ["kbstore", "bm25", "dense"], {})
        try:
            for name in ("bm25", "dense"):
                ranked = runner.rank_all(name, queries)
                out["rows"][name] = {"settings": {}, **score(ds, queries, ranked, context, by)}
                _log(log, name, out["rows"][name])
            for name, settings in rows.items():
                ranked = {q["id"]: [h.path for h in runner.stores.stores[q["kb"]].search(
                    q["text"], limit=DEPTH, now=q.get("now"), topic=q.get("topic"),
                    **settings)] for q in queries}
                out["rows"][name] = {"settings": settings,
                                     **score(ds, queries, ranked, context, by)}
                _log(log, name, out["rows"][name])
        finally:
            runner.close()
    return out


def _log(log: Any, name: str, row: dict[str, Any]) -> None:
    o, age = row["overall"], row["age"]
    latest = " ".join(f"{k} {v['correct']}/{v['n']}" for k, v in row["latest"].items())
    old = age.get("> 90 d", {}).get("recall@5")
    log(f"  {name:52s} R@5 {o['recall@5']:.3f} nDCG {o['ndcg@10']:.3f}  >90d "
        f"{old if old is None else round(old, 3)}  latest@1 {latest}  absent-empty "
        f"{row['absent_empty'][0]}/{row['absent_empty'][1]}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", type=Path)
    p.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    p.add_argument("--grid", choices=("ablation", "tune", "latest"), default="ablation")
    p.add_argument("--by", default="type")
    p.add_argument("--out", type=Path, default=None, help="write the rows as JSON")
    args = p.parse_args(argv)
    rows = {"ablation": ABLATION, "tune": tune_grid(), "latest": latest_grid()}[args.grid]
    result = run(load(args.dataset), rows, args.split, args.by)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

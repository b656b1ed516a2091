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

Modules: quality_data (collections, vector cache, HyPE replay, the store),
quality_eval (search runs, scoring, the plain-script reference, the method
rows), quality_tuning (the fusion grid and the choice on one collection),
quality_report (markdown and plot); this file runs them and holds the CLI.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.quality_data import (
    DEFAULT_CACHE,
    DEFAULT_DATA,
    DEPTH,
    HYPE_FILE,
    REPO,
    RESULTS,
    Collection,
)
from benchmarks.quality_eval import (
    BASE_METHODS,
    FTS_ONLY,
    HYPE_METHODS,
    PLAIN_BM25,
    SEED_RRF,
    VEC_ONLY,
    PlainReference,
    evaluate,
    measure,
    vector_recall,
)
from benchmarks.quality_tuning import ANCHORS, GUIDE, TARGETS, choose, tune

# -- the whole run -----------------------------------------------------------


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
               **HYPE_METHODS, **EXTRA_METHODS}
    if args.quick:
        methods = {m: v for m, v in methods.items()
                   if m in QUICK_METHODS or m in QUICK_HYPE or m in EXTRA_METHODS}
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
# the text lists' query-adaptive weight (search.sql text_agreement) off
AGREEMENT_METHODS: dict[str, dict[str, Any]] = {
    "hybrid default, text agreement weight off (agreement_ratio=0)": {"agreement_ratio": 0.0},
}
# the vector rank 1's standout (search.sql vec_gap) off
STANDOUT_METHODS: dict[str, dict[str, Any]] = {
    "hybrid default, vector standout off (vec_standout=0)": {"vec_standout": 0.0},
}
EXTRA_METHODS = {**FLOOR_METHODS, **AGREEMENT_METHODS, **STANDOUT_METHODS}


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
    base = {**BASE_METHODS, **EXTRA_METHODS}
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
        methods = {m: v for m, v in methods.items() if m in QUICK_METHODS or m in EXTRA_METHODS}
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

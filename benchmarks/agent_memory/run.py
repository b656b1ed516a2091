"""Retrieval on agent memory: every system side by side on one dataset.

    python -m benchmarks.agent_memory.run benchmarks/agent_memory/sessions
    python -m benchmarks.agent_memory.run DIR --split dev --set k_rrf=40 --set w_vec=1.5
    python -m benchmarks.agent_memory.run DIR --systems kbstore,bm25 --by type,answer_position

One KnowledgeStore per `kb` is built in a temporary directory through the
public API (open + upsert), with the offline MiniLM embedder behind a disk
cache of vectors (benchmarks/cache/), HyPE off. Every kbstore search passes
the query's `now=` and `topic=`; `--set key=value` overrides any keyword
`KnowledgeStore.search` accepts, for every kbstore system (a system's own
settings, e.g. the zero weights that isolate one retriever, still win).
Dataset format and metric definitions: benchmarks/agent_memory/FORMAT.md.
Writes benchmarks/results/agent_memory_<dataset>.{md,json} (or --out).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.agent_memory import metrics as mt
from benchmarks.agent_memory.data import Dataset, load, parse_date
from benchmarks.agent_memory.stats import dataset_stats, minilm_tokenizer
from benchmarks.agent_memory.systems import (
    ALL_SYSTEMS,
    KBSTORE_SYSTEMS,
    PLAIN_SYSTEMS,
    IsolationCheck,
    PlainBM25,
    PlainDense,
    Stores,
    caching_minilm,
    kbstore_rank,
    save_cache,
)

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = REPO / "benchmarks" / "cache"
RESULTS = REPO / "benchmarks" / "results"
FLOORS = (0.2, 0.3, 0.4)
FLOOR_SYSTEMS = ("kbstore", "kbstore_nodecay", "dense")


def parse_value(text: str) -> Any:
    """'1e9' -> 1e9, 'true' -> True, 'null' -> None, anything else stays a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {"none": None, "True": True, "False": False}.get(text, text)


def parse_sets(items: Sequence[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set expects key=value, got {item!r}")
        out[key.strip()] = parse_value(value.strip())
    return out


class Runner:
    """Holds the stores and plain indexes for one dataset and ranks queries."""

    def __init__(self, ds: Dataset, embedder: Any, workdir: Path, systems: Sequence[str],
                 overrides: dict[str, Any]) -> None:
        self.ds, self.embedder, self.overrides = ds, embedder, overrides
        self.systems = list(systems)
        self.stores = Stores(ds.docs, workdir, embedder)
        meta = self.stores.meta
        self.bm25 = PlainBM25(ds.docs, meta) if "bm25" in systems else None
        self.dense = PlainDense(ds.docs, meta, embedder) if "dense" in systems else None
        self.checks: dict[str, IsolationCheck] = {}
        if hasattr(embedder, "cache"):  # so no system's timing pays for query embedding
            embedder.embed_queries([q["text"] for q in ds.queries])

    def rank(self, system: str, query: dict[str, Any], **extra: Any) -> list[str]:
        if system == "bm25":
            assert self.bm25 is not None
            return self.bm25.rank(query)
        if system == "dense":
            assert self.dense is not None
            return self.dense.rank(query, extra.get("min_similarity"))
        spec = KBSTORE_SYSTEMS[system]
        check = self.checks.setdefault(system, IsolationCheck()) if spec.only else None
        return kbstore_rank(self.stores.stores[query["kb"]], spec, query, self.overrides,
                            check, **extra)

    def rank_all(self, system: str, queries: Sequence[dict[str, Any]],
                 **extra: Any) -> dict[str, list[str]]:
        return {q["id"]: self.rank(system, q, **extra) for q in queries}

    def close(self) -> None:
        save_cache(self.embedder)
        self.stores.close()


def system_report(ds: Dataset, queries: Sequence[dict[str, Any]], ranked: dict[str, list[str]],
                  by: Sequence[str], context: dict[str, Any]) -> dict[str, Any]:
    answerable = [q for q in queries if ds.answerable(q)]
    per_query = {q["id"]: mt.score_query(ranked[q["id"]], ds.qrels[q["id"]]) for q in answerable}
    ids = [q["id"] for q in answerable]
    splits = sorted({str(q["split"]) for q in answerable if q.get("split")})
    return {
        "overall": mt.summarize(per_query, ids),
        "by": {f: mt.by_field(answerable, per_query, f) for f in by},
        "splits": {s: mt.summarize(per_query, [q["id"] for q in answerable if q.get("split") == s])
                   for s in splits},
        "age": mt.by_age(answerable, ranked, ds.qrels, context["dates"], context["now"]),
        "latest": mt.latest_accuracy(answerable, ranked, ds.qrels, context["dates"]),
        "newest5": mt.newest_five_share(answerable, ranked, context["newest"]),
        "per_query": {q: [round(v["recall@5"], 4), round(v["ndcg@10"], 4), round(v["mrr"], 4)]
                      for q, v in per_query.items()},
    }


def floor_report(ds: Dataset, runner: Runner, queries: Sequence[dict[str, Any]],
                 systems: Sequence[str], floors: Sequence[float]) -> dict[str, Any]:
    """Absent queries answered with nothing vs recall kept on answerable ones."""
    absent = [q for q in queries if q["type"] == "absent"]
    answerable = [q for q in queries if ds.answerable(q)]
    out: dict[str, Any] = {}
    for system in systems:
        rows = {}
        # "default": the database's own floor (the embedder's, for kbstore);
        # "none": the floor off
        for floor in ("default", None, *floors):
            extra = {} if floor == "default" else {"min_similarity": floor}
            ranked = runner.rank_all(system, absent + answerable, **extra)
            per_q = {q["id"]: mt.score_query(ranked[q["id"]], ds.qrels[q["id"]])
                     for q in answerable}
            rows["none" if floor is None else str(floor)] = {
                "absent_n": len(absent),
                "absent_empty": sum(not ranked[q["id"]] for q in absent),
                "absent_mean_hits": mt.mean(len(ranked[q["id"]]) for q in absent),
                "answerable_recall@5": mt.mean(v["recall@5"] for v in per_q.values()),
                "answerable_ndcg@10": mt.mean(v["ndcg@10"] for v in per_q.values()),
                "answerable_empty": sum(not ranked[q["id"]] for q in answerable),
            }
        out[system] = rows
    return out


FINDINGS = "\n## Findings"


def with_findings(new: str, old: str | None) -> str:
    """The new report, followed by the hand-written Findings section of the
    report it replaces (from its heading to the end): a re-run must not drop
    what was written by hand. The section is marked as written for that run."""
    if not old or FINDINGS not in old or FINDINGS in new:
        return new
    kept = old[old.index(FINDINGS):].strip("\n")
    return (new.rstrip("\n") + "\n\n" + kept + "\n\n_(Findings above were written for the "
            "previous run of this file; its figures may differ from the tables above.)_\n")


def output_path(out: Path, suffix: str) -> Path:
    """``out`` + suffix; a dot in the name (``pk_a0.6``) is kept, not taken
    for a suffix to replace."""
    return out.parent / (out.name + suffix)


def git_commit() -> str:
    from benchmarks.quality import git_state

    return git_state()


def evaluate(ds: Dataset, embedder: Any, *, split: str = "all",
             systems: Sequence[str] = ALL_SYSTEMS, overrides: dict[str, Any] | None = None,
             by: Sequence[str] = ("type",), floors: Sequence[float] = FLOORS,
             floor_systems: Sequence[str] = FLOOR_SYSTEMS, tokenizer: Any = None,
             log: Any = print) -> dict[str, Any]:
    """Every system on ``ds`` (queries of ``split``); the results dict that
    run.py writes as JSON and renders as markdown."""
    overrides = dict(overrides or {})
    unknown = [s for s in systems if s not in ALL_SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown system(s) {unknown}; choose from {list(ALL_SYSTEMS)}")
    queries = ds.split(split)
    if not queries:
        raise SystemExit(f"no queries in split {split!r}")
    dates = {kb: {p: d for (k, p), d in ds.updated.items() if k == kb} for kb in ds.docs}
    now = {q["id"]: parse_date(q.get("now")) for q in queries}
    context = {"dates": dates, "now": now,
               "newest": {q["id"]: ds.newest_first(q["kb"], now[q["id"]]) for q in queries}}
    results: dict[str, Any] = {
        "dataset": ds.name, "dataset_fingerprint": ds.fingerprint,
        "started": time.strftime("%Y-%m-%d %H:%M"), "split": split, "overrides": overrides,
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "by": list(by), "stats": dataset_stats(ds, tokenizer), "systems": {},
    }
    with tempfile.TemporaryDirectory(prefix="agent-memory-") as tmp:
        t0 = time.perf_counter()
        runner = Runner(ds, embedder, Path(tmp), systems, overrides)
        log(f"built {len(ds.docs)} stores ({sum(map(len, ds.docs.values()))} documents) in "
            f"{time.perf_counter() - t0:.1f}s")
        try:
            for system in systems:
                t0 = time.perf_counter()
                ranked = runner.rank_all(system, queries)
                report = system_report(ds, queries, ranked, by, context)
                spec = KBSTORE_SYSTEMS.get(system)
                report["about"] = spec.about if spec else PLAIN_SYSTEMS[system]
                report["settings"] = ({**overrides, **spec.settings} if spec else {})
                if system in runner.checks:
                    check = runner.checks[system]
                    report["isolation"] = {"queries": check.queries,
                                           "violations": check.violations,
                                           "examples": check.examples}
                report["ms_per_query"] = round(  # query vectors come from the cache
                    1000 * (time.perf_counter() - t0) / len(queries), 2)
                results["systems"][system] = report
                o = report["overall"]
                log(f"  {system:16s} R@5 {o['recall@5']:.3f}  nDCG@10 {o['ndcg@10']:.3f}  "
                    f"MRR {o['mrr']:.3f}")
            chosen = [s for s in floor_systems if s in systems]
            if any(q["type"] == "absent" for q in queries) and chosen:
                results["floors"] = floor_report(ds, runner, queries, chosen, floors)
        finally:
            runner.close()
    return results


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", type=Path, help="a dataset directory (see FORMAT.md)")
    p.add_argument("--split", choices=("dev", "test", "all"), default="all")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="kbstore search setting for every kbstore system (repeatable)")
    p.add_argument("--systems", default=",".join(ALL_SYSTEMS),
                   help=f"comma-separated, from {','.join(ALL_SYSTEMS)}")
    p.add_argument("--by", default="type", help="query fields to break results down by")
    p.add_argument("--floors", default=",".join(map(str, FLOORS)),
                   help="min_similarity floors measured on absent queries")
    p.add_argument("--out", type=Path, default=None,
                   help="output path without suffix (default benchmarks/results/"
                        "agent_memory_<dataset>)")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.agent_memory.report import markdown

    args = parse_args(argv)
    ds = load(args.dataset)
    embedder = caching_minilm(args.cache_dir, ds.name)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    by = [f.strip() for f in args.by.split(",") if f.strip()]
    floors = [float(f) for f in args.floors.split(",") if f.strip()]
    results = evaluate(ds, embedder, split=args.split, systems=systems,
                       overrides=parse_sets(args.sets), by=by, floors=floors,
                       tokenizer=minilm_tokenizer())
    results["commit"] = git_commit()
    results["embedder"] = "minilm (all-MiniLM-L6-v2 int8, offline), 256-token window"
    out = args.out or RESULTS / f"agent_memory_{ds.name}"
    out.parent.mkdir(parents=True, exist_ok=True)
    md = output_path(out, ".md")
    text = with_findings(markdown(results),
                         md.read_text(encoding="utf-8") if md.exists() else None)
    md.write_text(text, encoding="utf-8")
    output_path(out, ".json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(text)
    print(f"wrote {out}.md and {out}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

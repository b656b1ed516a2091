"""A user's first query and an import's memory, with the real MiniLM model.

    python -m benchmarks.first_query                  # before (main) vs after, one run
    python -m benchmarks.first_query --base-ref HEAD~3 --runs 9
    python -m benchmarks.first_query --report-only    # redraw the md from the json

BEFORE is the code of ``--base-ref`` (default: the commit where this branch
left main), exported with
``git archive`` to benchmarks/cache/first_query/ and run from there with this
venv; AFTER is this checkout. Both run side by side in one run, alternating,
each in fresh processes under GNU time (wall, peak RSS):

* ``kbstore import --embedder minilm --no-hype`` of the bundled sample KB
  into a new database (peak RSS while importing);
* ``kbstore search --db X "query"`` in a fresh process to printed hits:
  BEFORE; AFTER with a query text never embedded (the model loads); AFTER
  with a query text embedded before (query-vector cache);
* a breakdown of one search process into interpreter start, imports, model
  load (tokenizer + ONNX session), query embedding, SQL and printing, and
  the imports of the search path (``python -X importtime``);
* embedding throughput (docs/s, tokens/s, peak RSS) on realistic
  100-2000-word documents for session settings and batch shapes, with the
  largest vector difference against today's code.

Both trees are byte-compiled first (``compileall``), as ``pip install``
does: without .pyc files every process compiles kbstore's sources again
(PYTHONDONTWRITEBYTECODE=1 is set here), which once added ~0.4 s to every
``kbstore search``.

Absolute times vary with the load of this shared 2-core machine: compare
the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from benchmarks.first_query_probes import (
    PHASES,
    SESSION_CONFIGS,
    THROUGHPUT_CONFIGS,
    TOKENIZER_CONFIGS,
    import_breakdown,
)
from benchmarks.first_query_report import write_report

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "benchmarks" / "cache" / "first_query"
RESULTS = REPO / "benchmarks" / "results"
PYTHON = sys.executable
TIME = "/usr/bin/time"
QUERIES = (
    "how do I recover when a release breaks production?",
    "keeping API clients polite when the server says slow down",
    "what does my human do for fun on saturdays",
    "sourdough starter feeding schedule",
    "sqlite full text search ranking",
    "how does Lena like her answers?",
    "background coroutine crashed quietly",
    "which city does my boss live in",
    "docker image layers and caching",
    "rebase or merge a feature branch",
    "vector embeddings for retrieval",
    "kubernetes pod keeps restarting",
    "how often should I feed my bread culture",
    "deploying picobot on the home server",
    "retry with exponential backoff",
    "what time zone is the user in",
)
def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()


def base_tree(ref: str) -> tuple[Path, str]:
    """The code of ``ref`` as a directory importable with PYTHONPATH."""
    sha = git("rev-parse", ref)
    tree = CACHE / f"base-{sha[:12]}"
    if not (tree / "kbstore" / "__init__.py").is_file():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", "--format=tar", sha], cwd=REPO,
                                 capture_output=True, check=True).stdout
        tar = tree / "src.tar"
        tar.write_bytes(archive)
        with tarfile.open(tar) as t:
            t.extractall(tree, filter="data")
        tar.unlink()
        # pyproject maps kbstore.migrations to migrations/ (an installed package does this)
        (tree / "kbstore" / "migrations").symlink_to(tree / "migrations")
    return tree, sha


class Side:
    """One code version: where it runs from and its environment."""

    def __init__(self, name: str, tree: Path, cache_dir: Path) -> None:
        self.name, self.tree, self.cache_dir = name, tree, cache_dir
        self.env = {**os.environ, "PYTHONPATH": str(tree), "KBSTORE_CACHE_DIR": str(cache_dir),
                    "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        for name_ in ("KBSTORE_QUERY_CACHE", "KBSTORE_EMBED_THREADS", "KBSTORE_HYPE"):
            self.env.pop(name_, None)

    def check(self) -> None:
        where = self.run([PYTHON, "-c", "import kbstore; print(kbstore.__file__)"])["stdout"]
        # resolved: benchmarks/cache may be a symlink to a shared cache
        if not Path(where.strip()).resolve().is_relative_to(self.tree.resolve()):
            raise RuntimeError(f"{self.name} imports kbstore from {where.strip()}, "
                               f"not {self.tree}")

    def run(self, argv: list[str], timed: bool = False,
            env: dict[str, str] | None = None) -> dict[str, Any]:
        prefix = [TIME, "-f", "gnutime %e %M %U %S"] if timed else []
        t = time.perf_counter()
        proc = subprocess.run([*prefix, *argv], cwd=self.tree, env={**self.env, **(env or {})},
                              capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"{self.name}: {argv[:4]} failed:\n{proc.stderr[-3000:]}")
        out = {"wall_s": wall, "stdout": proc.stdout, "stderr": proc.stderr}
        if timed:
            last = [ln for ln in proc.stderr.splitlines() if ln.startswith("gnutime ")][-1]
            fields = last.split()
            out["peak_rss_mb"] = int(fields[2]) / 1024
            out["cpu_s"] = float(fields[3]) + float(fields[4])  # user + system
        return out


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def rows_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"wall_s": summary([r["wall_s"] for r in rows]),
            "cpu_s": summary([r["cpu_s"] for r in rows]),
            "peak_rss_mb": summary([r["peak_rss_mb"] for r in rows])}


def first_hit(stdout: str) -> str:
    lines = [ln for ln in stdout.splitlines() if ln.strip().startswith("1.")]
    return lines[0].split()[2] if lines else ""


def measure_imports(before: Side, after: Side, runs: int, workspace: Path) -> dict[str, Any]:
    """``kbstore import`` of the sample KB into a new database, alternating."""
    out: dict[str, list[dict[str, Any]]] = {"before": [], "after": [], "after_first_ever": []}
    shutil.rmtree(after.cache_dir, ignore_errors=True)
    for i in range(runs):
        for side in ((before, after) if i % 2 == 0 else (after, before)):
            db = CACHE / f"import-{side.name}.sqlite"
            db.unlink(missing_ok=True)
            r = side.run([PYTHON, "-m", "kbstore", "import", "--db", str(db), "--embedder",
                          "minilm", "--no-hype", str(workspace)], timed=True)
            key = side.name if (side.name == "before" or out["after_first_ever"]) \
                else "after_first_ever"
            out[key].append(r)
            log(f"  import {key}: {r['wall_s']:.2f} s, {r['peak_rss_mb']:.0f} MB")
    return {k: rows_summary(v) for k, v in out.items()} | {
        "report_line": out["after"][0]["stdout"].strip().splitlines()[-1] if out["after"] else ""}


def measure_searches(before: Side, after: Side, runs: int) -> dict[str, Any]:
    dbs = {s.name: CACHE / f"search-{s.name}.sqlite" for s in (before, after)}
    for side in (before, after):
        # no query vector cached by an earlier run of this benchmark (the same
        # texts): each timed new query loads the model on both sides
        shutil.rmtree(side.cache_dir, ignore_errors=True)
        dbs[side.name].unlink(missing_ok=True)
        side.run([PYTHON, "-m", "kbstore", "import", "--db", str(dbs[side.name]), "--embedder",
                  "minilm", "--no-hype", str(side.tree / "kbstore" / "sample_kb")])
    repeated = QUERIES[0]
    after.run([PYTHON, "-m", "kbstore", "search", "--db", str(dbs["after"]), repeated])
    before.run([PYTHON, "-m", "kbstore", "search", "--db", str(dbs["before"]), "warm up"])
    misses = iter(QUERIES[1:] * (runs // (len(QUERIES) - 1) + 1))
    cases = {
        "before": lambda q: before.run([PYTHON, "-m", "kbstore", "search", "--db",
                                        str(dbs["before"]), q], timed=True),
        "after_new_query": lambda q: after.run([PYTHON, "-m", "kbstore", "search", "--db",
                                                str(dbs["after"]), q], timed=True),
        "after_repeated_query": lambda q: after.run([PYTHON, "-m", "kbstore", "search", "--db",
                                                     str(dbs["after"]), repeated], timed=True),
    }
    rows: dict[str, list[dict[str, Any]]] = {k: [] for k in cases}
    names = list(cases)
    for i in range(runs):
        query = next(misses)
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            # before and after_new_query embed the same (new) text
            rows[name].append(cases[name](query))
        log(f"  search run {i + 1}/{runs}: " + ", ".join(
            f"{n} {rows[n][-1]['wall_s']:.2f}s/{rows[n][-1]['peak_rss_mb']:.0f}MB" for n in names))
    # The same query text gives the same top hit before and after.
    same = [first_hit(before.run([PYTHON, "-m", "kbstore", "search", "--db", str(dbs["before"]),
                                  q])["stdout"])
            == first_hit(after.run([PYTHON, "-m", "kbstore", "search", "--db",
                                    str(dbs["after"]), q])["stdout"]) for q in QUERIES[:6]]
    # First search on a machine with no cache directory: the model edit is written.
    shutil.rmtree(after.cache_dir, ignore_errors=True)
    first_ever = after.run([PYTHON, "-m", "kbstore", "search", "--db", str(dbs["after"]),
                            QUERIES[-1]], timed=True)
    return {k: rows_summary(v) for k, v in rows.items()} | {
        "after_first_ever": {"wall_s": first_ever["wall_s"],
                             "peak_rss_mb": first_ever["peak_rss_mb"]},
        "same_top_hit": f"{sum(same)}/{len(same)}",
        "dbs": {k: str(v) for k, v in dbs.items()}}


def measure_phases(before: Side, after: Side, runs: int, dbs: dict[str, str]) -> dict[str, Any]:
    """In-process breakdown of one search (a fresh process per run)."""
    out: dict[str, Any] = {}
    # the cached model file exists before the first timed run
    after.run([PYTHON, "-m", "kbstore", "search", "--db", dbs["after"], "warm up"])
    samples: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for i in range(runs):
        for side in ((before, after) if i % 2 == 0 else (after, before)):
            # the query-vector cache is off: this is the model's path
            r = side.run([PYTHON, "-c", PHASES, dbs[side.name], QUERIES[(i + 3) % len(QUERIES)]],
                         env={"KBSTORE_QUERY_CACHE": "0"})
            row = json.loads(r["stdout"].strip().splitlines()[-1])
            row["process_wall_ms"] = r["wall_s"] * 1000
            samples[side.name].append(row)
    bare = [before.run([PYTHON, "-c", "pass"])["wall_s"] for _ in range(runs)]
    for name, rows in samples.items():
        keys = [k for k in rows[0] if k.endswith("_ms")]
        out[name] = {k: statistics.median(r[k] for r in rows) for k in keys} | {
            "peak_rss_mb": {k: statistics.median(r["rss"][k] for r in rows)
                            for k in rows[0]["rss"]}}
    out["interpreter_ms"] = statistics.median(bare) * 1000
    out["paths"] = {name: ", ".join(sorted({r["path"] for r in rows}))
                    for name, rows in samples.items()}
    for side in (before, after):
        r = side.run([PYTHON, "-X", "importtime", "-m", "kbstore", "search", "--db",
                      dbs[side.name], QUERIES[5] + " importtime"],
                     env={"KBSTORE_QUERY_CACHE": "0"})
        out[f"{side.name}_imports"] = import_breakdown(r["stderr"])
    return out


def measure_throughput(before: Side, after: Side, docs: int, runs: int) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {}
    reference = CACHE / "throughput-reference.npy"
    configs = list(THROUGHPUT_CONFIGS.items())
    for i in range(runs):
        for name, cfg in (configs if i % 2 == 0 else configs[::-1]):
            side = before if cfg.get("side") == "before" else after
            arg = json.dumps({**cfg, "docs": docs, "reference": str(reference),
                              "save_reference": i == 0 and name == configs[0][0]})
            # run as a script: kbstore comes from the side's tree
            r = side.run([PYTHON, str(REPO / "benchmarks" / "first_query_probes.py"), arg],
                         timed=True)
            row = json.loads(r["stdout"].strip().splitlines()[-1])
            row["peak_rss_mb"] = r["peak_rss_mb"]
            results.setdefault(name, []).append(row)
            log(f"  embed {name}: {row['docs_per_s']:.1f} docs/s, {row['peak_rss_mb']:.0f} MB")
    out = {}
    for name, rows in results.items():
        out[name] = {"config": THROUGHPUT_CONFIGS[name],
                     "docs_per_s": summary([r["docs_per_s"] for r in rows]),
                     "tokens_per_s": summary([r["tokens_per_s"] for r in rows]),
                     "cpu_s_per_doc": summary([r["cpu_s_per_doc"] for r in rows]),
                     "peak_rss_mb": summary([r["peak_rss_mb"] for r in rows]),
                     "max_abs_diff": max(r["max_abs_diff"] for r in rows),
                     "min_cosine": min(r["min_cosine"] for r in rows),
                     "tokens": rows[0]["tokens"], "docs": rows[0]["n"]}
    return out


def measure_sessions(after: Side, runs: int) -> dict[str, Any]:
    """ONNX session settings for start-up and memory, one fresh process each."""
    probe = str(REPO / "benchmarks" / "first_query_probes.py")
    preoptimised = CACHE / "preoptimised.onnx"
    if not preoptimised.exists():
        after.run([PYTHON, probe, json.dumps({"probe": "save_preoptimised",
                                              "path": str(preoptimised)})])
    after.run([PYTHON, "-m", "kbstore", "search", "--db", str(CACHE / "search-after.sqlite"),
               "warm up"])  # the edited model file exists
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in SESSION_CONFIGS}
    for i in range(runs):
        configs = SESSION_CONFIGS if i % 2 == 0 else SESSION_CONFIGS[::-1]
        for name, cfg in configs:
            arg = json.dumps({**cfg, "probe": "session", "preoptimised_path": str(preoptimised)})
            r = after.run([PYTHON, probe, arg], timed=True)
            row = json.loads(r["stdout"].strip().splitlines()[-1])
            row["process_peak_rss_mb"] = r["peak_rss_mb"]
            rows[name].append(row)
        log(f"  sessions run {i + 1}/{runs}")
    return {name: {key: statistics.median(r[key] for r in rs) for key in rs[0]} | {
        "load_ms_min": min(r["load_ms"] for r in rs), "load_ms_max": max(r["load_ms"] for r in rs),
        "n": len(rs)} for name, rs in rows.items()}


def measure_tokenizers(after: Side, runs: int) -> dict[str, Any]:
    """Tokenizer load + one query, one fresh process each, interleaved."""
    probe = str(REPO / "benchmarks" / "first_query_probes.py")
    cache = str(CACHE / "vocab-probe.txt")
    after.run([PYTHON, probe, json.dumps({"probe": "tokenizer", "mode": "plain_build",
                                          "cache": cache})])
    after.run([PYTHON, probe, json.dumps({"probe": "tokenizer", "mode": "plain_cached",
                                          "cache": cache})])  # the cache file exists
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in TOKENIZER_CONFIGS}
    for i in range(runs):
        for name, mode in (TOKENIZER_CONFIGS if i % 2 == 0 else TOKENIZER_CONFIGS[::-1]):
            r = after.run([PYTHON, probe, json.dumps({"probe": "tokenizer", "mode": mode,
                                                      "cache": cache})], timed=True)
            row = json.loads(r["stdout"].strip().splitlines()[-1])
            row["process_peak_rss_mb"] = r["peak_rss_mb"]
            rows[name].append(row)
    return {name: {"load_ms": summary([r["load_ms"] for r in rs]),
                   "cpu_ms": summary([r["cpu_ms"] for r in rs]),
                   "peak_rss_mb": summary([r["process_peak_rss_mb"] for r in rs]),
                   "ids": rs[0]["ids"]} for name, rs in rows.items()}


def measure_warm(after: Side, rounds: int) -> dict[str, Any]:
    probe = str(REPO / "benchmarks" / "first_query_probes.py")
    r = after.run([PYTHON, probe, json.dumps({"probe": "warm", "rounds": rounds})])
    return dict(json.loads(r["stdout"].strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--base-ref", default=None,
                    help="default: where this branch left main (git merge-base HEAD main)")
    ap.add_argument("--runs", type=int, default=7, help="fresh processes per search case")
    ap.add_argument("--import-runs", type=int, default=3)
    ap.add_argument("--phase-runs", type=int, default=5)
    ap.add_argument("--throughput-runs", type=int, default=2)
    ap.add_argument("--docs", type=int, default=48, help="documents per throughput run")
    ap.add_argument("--session-runs", type=int, default=3)
    ap.add_argument("--warm-rounds", type=int, default=60)
    ap.add_argument("--steps",
                    default="import,search,phases,sessions,tokenizers,warm,throughput")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    out_json = RESULTS / "first_query.json"
    if args.report_only:
        write_report(json.loads(out_json.read_text()), RESULTS / "first_query.md")
        return
    if not Path(TIME).exists():
        sys.exit(f"{TIME} (GNU time) is needed for peak RSS")
    CACHE.mkdir(parents=True, exist_ok=True)
    base_ref = args.base_ref or git("merge-base", "HEAD", "main")
    tree, sha = base_tree(base_ref)
    before = Side("before", tree, CACHE / "user-cache-before")
    after = Side("after", REPO, CACHE / "user-cache-after")
    for side in (before, after):
        side.check()
        # What an installed package has: bytecode for every module.
        subprocess.run([PYTHON, "-m", "compileall", "-q", str(side.tree / "kbstore")],
                       check=True, capture_output=True)
    steps = set(args.steps.split(","))
    previous = json.loads(out_json.read_text()) if out_json.exists() else {}
    result: dict[str, Any] = {k: v for k, v in previous.items() if k in
                              ("imports", "search", "phases", "sessions", "tokenizers",
                               "throughput", "warm", "step_runs")}
    result.update({
        "base_ref": args.base_ref or "merge-base of HEAD and main", "base_sha": sha,
        "after_sha": git("rev-parse", "HEAD"),
        # results files do not count: the code is what is measured
        "after_dirty": any(not line[3:].startswith("benchmarks/results/") for line in
                           git("status", "--porcelain", "--untracked-files=no").splitlines()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_start": os.getloadavg()},
        "date": time.strftime("%Y-%m-%d %H:%M"),
    })
    RESULTS.mkdir(parents=True, exist_ok=True)

    started = {"date": time.strftime("%Y-%m-%d %H:%M"), "load": os.getloadavg()[0]}

    def save(step: str | None = None) -> None:
        """After every step: a failure later keeps what was measured."""
        result["machine"]["load_avg_end"] = os.getloadavg()
        if step:
            result.setdefault("step_runs", {})[step] = {
                **started, "load_end": os.getloadavg()[0], "after_sha": result["after_sha"],
                "after_dirty": result["after_dirty"]}
        out_json.write_text(json.dumps(result, indent=1, default=str) + "\n")

    workspace = REPO / "kbstore" / "sample_kb"
    if "import" in steps:
        log("import of the sample KB")
        result["imports"] = measure_imports(before, after, args.import_runs, workspace)
        save("imports")
    if "search" in steps or "phases" in steps:
        log("first query")
        result["search"] = measure_searches(before, after, args.runs) \
            if "search" in steps else result["search"]
        save("search" if "search" in steps else None)
    if "phases" in steps:
        log("breakdown")
        result["phases"] = measure_phases(before, after, args.phase_runs,
                                          result["search"]["dbs"])
        save("phases")
    if "sessions" in steps:
        log("session settings")
        result["sessions"] = measure_sessions(after, args.session_runs)
        save("sessions")
    if "tokenizers" in steps:
        log("tokenizer load")
        result["tokenizers"] = measure_tokenizers(after, args.session_runs + 2)
        save("tokenizers")
    if "warm" in steps:
        log("warm queries")
        result["warm"] = measure_warm(after, args.warm_rounds)
        save("warm")
    if "throughput" in steps:
        log("embedding throughput")
        result["throughput"] = measure_throughput(before, after, args.docs,
                                                  args.throughput_runs)
        save("throughput")
    save()
    write_report(result, RESULTS / "first_query.md")
    log(f"wrote {out_json} and first_query.md")


if __name__ == "__main__":
    main()

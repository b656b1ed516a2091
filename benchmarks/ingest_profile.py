"""Where ingest time goes, per document, with precomputed vectors.

    python -m benchmarks.ingest_profile --n 2000           # table on stdout
    python -m benchmarks.ingest_profile --n 10000 --json out.json
    python -m benchmarks.ingest_profile --n 5000 --compare OLD_DIR  # OLD_DIR/kbstore vs this
    python -m benchmarks.ingest_profile --n 10000 --compare OLD_DIR --profile --json out.json

Builds n documents of the latency corpus (benchmarks/latency_data.py: SciFact
text, 6 HyPE questions from a fake LLM, clustered vectors, 7 vectors per
document) into a temporary file through ``KnowledgeStore.upsert_many``, with
the SQLite connection wrapped so every ``execute``/``executemany`` is counted
and timed by statement. Reported per document: SQL calls, SQL time by
statement (the triggers a statement fires are inside its time), and the
Python around it by stage (planning with its hashing and chunking, the
embedder's lookups, the fake LLM's thread pool, checking and normalising
vectors, building rows in the backend). Each time is given as wall time and
as CPU time of the thread (the machine is shared: CPU time barely moves with
load, wall time does). ``--compare`` times another kbstore tree (e.g. ``git
archive`` of an older commit) against this one, each in fresh processes,
alternating, uncounted.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.latency_data import (
    DATASETS,
    QUESTIONS_PER_DOC,
    fake_completion,
    make_records,
    make_vectors,
    precomputed_corpus,
)


class CountingConnection:
    """Wraps a sqlite3 connection: time and count per statement text."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: dict[str, int] = defaultdict(int)
        self.rows: dict[str, int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)

    def _timed(self, sql: str, fn: Any, *args: Any) -> Any:
        key = " ".join(sql.split())[:90]
        t, c = time.perf_counter(), time.thread_time()
        try:
            return fn(sql, *args)
        finally:
            self.seconds[key] += time.perf_counter() - t
            self.cpu[key] += time.thread_time() - c
            self.calls[key] += 1

    def execute(self, sql: str, *args: Any) -> Any:
        key = " ".join(sql.split())[:90]
        self.rows[key] += 1
        return self._timed(sql, self._inner.execute, *args)

    def executemany(self, sql: str, seq: Any) -> Any:
        seq = list(seq)
        self.rows[" ".join(sql.split())[:90]] += len(seq)
        return self._timed(sql, self._inner.executemany, seq)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Stages:
    """Wall and thread CPU time of named Python stages (wrapped functions);
    a stage nested in another is subtracted from it (exclusive times)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self._stack: list[list[float]] = []
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, attr: str, stage: str) -> None:
        inner = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append([0.0, 0.0])
            t, c = time.perf_counter(), time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                wall, cpu = time.perf_counter() - t, time.thread_time() - c
                nested = self._stack.pop()
                self.seconds[stage] += wall - nested[0]
                self.cpu[stage] += cpu - nested[1]
                if self._stack:
                    self._stack[-1][0] += wall
                    self._stack[-1][1] += cpu

        self._undo.append((owner, attr, inner))
        setattr(owner, attr, timed)

    def undo(self) -> None:
        for owner, attr, inner in reversed(self._undo):
            setattr(owner, attr, inner)
        self._undo = []


def _wrap_stages(stages: Stages, store: Any, counting: CountingConnection) -> None:
    """The stages of one write batch (see the module docstring)."""
    import kbstore.writer as writer_module

    writer_cls = writer_module.Writer
    stages.wrap(writer_cls, "_content_round", "write path, other Python")
    stages.wrap(writer_cls, "_plan", "plan: hashes, chunk spans, questions")
    stages.wrap(writer_cls, "_produce", "produce: check + normalise vectors")
    stages.wrap(writer_module, "generate_many", "fake LLM + its thread pool")
    stages.wrap(store.embedder, "embed_documents", "embedder lookups")
    stages.wrap(store.embedder, "embed_queries", "embedder lookups")
    stages.wrap(type(store.backend), "apply", "backend: rows built in Python")
    stages.wrap(type(store.backend), "stored", "backend: rows built in Python")
    # SQL is its own stage (nested: subtracted from whichever stage ran it).
    stages.wrap(counting, "_timed", "SQL")


def run(n: int, batch_size: int | None = None, count_sql: bool = True) -> dict[str, Any]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
    import litellm

    from kbstore import KnowledgeStore

    dim = 384
    records = make_records(n, DATASETS)
    docs, embedder = precomputed_corpus(records, make_vectors(n, dim), dim)
    saved = litellm.completion
    litellm.completion = fake_completion(records)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            store = KnowledgeStore.open(Path(tmp) / "kb.sqlite", embedder, hype=True,
                                        hype_model="fake/benchmark")
            backend: Any = store.backend  # the SQLite backend: its connection is wrapped
            counting = CountingConnection(backend.conn)
            stages = Stages()
            if count_sql:
                backend.conn = counting
                _wrap_stages(stages, store, counting)
            t, cpu = time.perf_counter(), time.process_time()
            try:
                report = store.upsert_many(docs, batch_size=batch_size)
            finally:
                stages.undo()
            seconds, cpu_seconds = time.perf_counter() - t, time.process_time() - cpu
            backend.conn = counting._inner
            vecs = backend.conn.execute("SELECT count(*) FROM vector_data").fetchone()[0]
            store.close()
        finally:
            litellm.completion = saved
    if report.added != n or vecs != n * (1 + QUESTIONS_PER_DOC):
        raise RuntimeError(f"incomplete ingest: {report.to_dict()}, {vecs} vectors")
    sql_s = sum(counting.seconds.values())
    return {
        "n": n, "seconds": seconds, "docs_per_s": n / seconds, "vectors": vecs,
        # process CPU (all threads: the LLM pool's workers too) per document
        "cpu_seconds": cpu_seconds, "docs_per_cpu_s": n / cpu_seconds,
        "counted": count_sql,
        "stages": sorted(({"stage": k, "us_per_doc": stages.seconds[k] / n * 1e6,
                           "cpu_us_per_doc": stages.cpu[k] / n * 1e6} for k in stages.seconds),
                         key=lambda r: -r["cpu_us_per_doc"]),
        "sql_calls_per_doc": sum(counting.calls.values()) / n,
        "sql_rows_per_doc": sum(counting.rows.values()) / n,
        "sql_seconds": sql_s, "python_seconds": seconds - sql_s,
        "statements": sorted(
            ({"sql": k, "calls_per_doc": counting.calls[k] / n,
              "rows_per_doc": counting.rows[k] / n,
              "us_per_doc": counting.seconds[k] / n * 1e6,
              "cpu_us_per_doc": counting.cpu[k] / n * 1e6} for k in counting.seconds),
            key=lambda r: -r["cpu_us_per_doc"]),
    }


def table(result: dict[str, Any]) -> str:
    lines = [f"{result['n']} docs in {result['seconds']:.2f} s = {result['docs_per_s']:.0f} "
             f"docs/s, {result['docs_per_cpu_s']:.0f} docs per CPU-second "
             f"({result['vectors']} vectors); SQL calls per doc "
             f"{result['sql_calls_per_doc']:.2f} ({result['sql_rows_per_doc']:.1f} rows); "
             f"SQL {result['sql_seconds']:.2f} s, Python {result['python_seconds']:.2f} s",
             "", "| stage (exclusive) | wall us/doc | CPU us/doc |", "|---|---|---|"]
    for st in result.get("stages", []):
        lines.append(f"| {st['stage']} | {st['us_per_doc']:.0f} | {st['cpu_us_per_doc']:.0f} |")
    lines += ["", "| statement (fires its triggers) | calls/doc | rows/doc | wall us/doc "
              "| CPU us/doc |", "|---|---|---|---|---|"]
    for s in result["statements"][:20]:
        lines.append(f"| `{s['sql']}` | {s['calls_per_doc']:.2f} | {s['rows_per_doc']:.2f} "
                     f"| {s['us_per_doc']:.0f} | {s.get('cpu_us_per_doc', 0):.0f} |")
    return "\n".join(lines)


def _child(n: int, tree: Path | None, count_sql: bool,
           batch_size: int | None = None) -> dict[str, Any]:
    """run() in a fresh process, with ``tree``'s kbstore package (None: this one)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    # The other tree's kbstore must win over this checkout's editable install,
    # whose import hook comes before sys.path: drop that hook in the child.
    code = ("import json, os, sys\n"
            "tree = os.environ.get('KBSTORE_TREE')\n"
            "if tree:\n"
            "    sys.meta_path = [f for f in sys.meta_path if 'editable' not in repr(f)]\n"
            "    sys.path.insert(0, tree)\n"
            "import kbstore\n"
            # a `git archive` extract keeps the migrations at its root (the
            # install maps them to kbstore.migrations): find them there too;
            # the benchmark code and its datasets stay this checkout's
            "if tree:\n"
            "    if not os.path.isdir(os.path.join(tree, 'kbstore', 'migrations')):\n"
            "        kbstore.__path__.append(tree)\n"
            "    sys.path.remove(tree)\n"
            "from benchmarks.ingest_profile import run\n"
            f"r = run({n}, {batch_size!r}, count_sql={count_sql!r})\n"
            "r['kbstore'] = kbstore.__file__\n"
            "print(json.dumps(r))")
    env = {**os.environ, "PYTHONPATH": str(repo), "KBSTORE_TREE": str(tree) if tree else ""}
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, check=True,
                          capture_output=True, text=True, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def compare(n: int, other: Path, rounds: int, profile: bool = False,
            batch_size: int | None = None) -> dict[str, Any]:
    """docs/s and docs per CPU-second of OTHER/kbstore and of this tree,
    alternating uncounted runs (one process each); with ``profile``, then one
    counted run of each for the per-document tables."""
    import statistics

    out: dict[str, list[float]] = {"other": [], "this": []}
    cpu: dict[str, list[float]] = {"other": [], "this": []}
    for i in range(rounds):
        for who in (("other", "this") if i % 2 == 0 else ("this", "other")):
            r = _child(n, other if who == "other" else None, False, batch_size)
            out[who].append(r["docs_per_s"])
            cpu[who].append(r["docs_per_cpu_s"])
            print(f"{who} ({r['kbstore']}): {r['docs_per_s']:.0f} docs/s, "
                  f"{r['docs_per_cpu_s']:.0f} docs per CPU-second", flush=True)
    med = {k: statistics.median(v) for k, v in out.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    result: dict[str, Any] = {
        "n": n, "batch_size": batch_size, "runs": out, "cpu_runs": cpu,
        "median_docs_per_s": med, "speedup": med["this"] / med["other"],
        "median_docs_per_cpu_s": med_cpu, "cpu_speedup": med_cpu["this"] / med_cpu["other"]}
    if profile:
        result["profile"] = {"other": _child(n, other, True, batch_size),
                             "this": _child(n, None, True, batch_size)}
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-count", action="store_true", help="time without the SQL wrapper")
    ap.add_argument("--compare", type=Path, help="a folder holding another kbstore package")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", action="store_true",
                    help="with --compare: one counted run of each tree after the rounds")
    args = ap.parse_args(argv)
    if args.compare:
        result = compare(args.n, args.compare, args.rounds, args.profile, args.batch_size)
        for who, label in (("other", "other tree"), ("this", "this tree")):
            if who in result.get("profile", {}):
                print(f"\n## {label}\n\n" + table(result["profile"][who]))
        print(json.dumps({k: v for k, v in result.items() if k != "profile"}, indent=1))
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
        return
    result = run(args.n, args.batch_size, count_sql=not args.no_count)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

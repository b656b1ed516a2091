"""Memory and wall time of ``kbstore doctor`` on PostgreSQL, by store size.

    python -m benchmarks.pg_doctor_memory --sizes 2000,20000
    python -m benchmarks.pg_doctor_memory --sizes 2000 --baseline-src /tmp/kbstore-before

Per size, a knowledge base on a bundled server (or ``--url`` /
KBSTORE_TEST_PG_URL) is filled through kbstore's write path with synthetic
documents (two tags each), fake vectors (a deterministic random unit vector
per text, ``--dim`` dimensions) and three HyPE questions per document from a
stand-in LLM. Then a fresh Python process per measurement opens it and runs

- ``diagnose``: the backend's checks (what ``kbstore doctor`` runs);
- ``repair``: the backend's repairs that read every document
  (``fts_postings``, ``tag_rows``, ``stale_questions``, ``secrets_in_errors``)
  on the healthy store -- the postings and tag rows are written again,
  nothing else changes;

and reports the wall time, the tracemalloc peak of the call and the
process's ru_maxrss after it (and before it, after imports and the open).
``--baseline-src DIR`` runs the same measurements with the kbstore source
tree in DIR first (say, ``git archive`` of the commit before a change), on
the same stores. Writes ``benchmarks/results/pg_doctor_memory.json``/``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

THIS = Path(__file__).resolve()
REPO = THIS.parent.parent
RESULTS = THIS.parent / "results" / "pg_doctor_memory.json"
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu roof shed felt board layer canary deploy release rollback index vector "
         "postgres sqlite search ranking garden bread sourdough oven recipe").split()
REPAIRS = ["fts_postings", "tag_rows", "stale_questions", "secrets_in_errors"]


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def documents(n: int, seed: int = 5) -> list[Any]:
    import numpy as np

    from kbstore.documents import make_document

    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        words = [WORDS[k] for k in rng.integers(0, len(WORDS), size=int(rng.integers(150, 450)))]
        docs.append(make_document(f"projects/p{i // 500}/note-{i}.md", title=f"Note {i} "
                                  f"{words[0]} {words[1]}", body=" ".join(words),
                                  tags=[words[2], f"group-{i % 37}"]))
    return docs


def fake_completion(**kwargs: Any) -> Any:
    from types import SimpleNamespace

    prompt = kwargs["messages"][0]["content"]
    text = "\n".join(f"What about {w} in this note?" for w in prompt.split()[-3:])
    return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=text))])


def fill(location: str, n: int, dim: int) -> dict[str, Any]:
    import litellm

    from benchmarks.pg_bench import HashedEmbedder
    from kbstore import KnowledgeStore

    saved = litellm.completion
    litellm.completion = fake_completion
    try:
        with KnowledgeStore.open(location, HashedEmbedder(dim), hype=True,
                                 hype_model="fake/benchmark") as store:
            t0 = time.perf_counter()
            report = store.upsert_many(documents(n))
            seconds = time.perf_counter() - t0
            status = store.status()
    finally:
        litellm.completion = saved
    if report.added != n:
        raise RuntimeError(f"fill incomplete: {report.to_dict()}")
    return {"seconds": round(seconds, 1), "vectors": status["vectors"]}


def measure(location: str, what: str, dim: int) -> dict[str, Any]:
    """In this process (a fresh one): one diagnose or repair call."""
    import resource
    import tracemalloc

    from benchmarks.pg_bench import HashedEmbedder
    from kbstore import KnowledgeStore
    from kbstore.embed import fingerprint_id

    with KnowledgeStore.open(location, HashedEmbedder(dim), hype=False) as store:
        backend = store.backend
        fp = backend.fingerprint()
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        t0 = time.perf_counter()
        if what == "diagnose":
            checks = backend.diagnose(fingerprint_id(fp) if fp else None)
            problems = sorted(c.name for c in checks if not c.ok)
        else:
            backend.repair(set(REPAIRS), {})
            problems = []
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "tracemalloc_peak_mib": peak / 2 ** 20,
            "maxrss_before_mib": rss_before / 1024, "maxrss_after_mib": rss_after / 1024,
            "problems": problems, "code": str(Path(sys.modules[backend.__module__].__file__)
                                              .parent.parent.parent.parent)}


def run_measure(location: str, what: str, dim: int, src: Path | None) -> dict[str, Any]:
    # the source tree under test first (-m puts the working directory at the
    # front of sys.path: it is that tree too); the benchmarks package from here
    path = [str(src), str(REPO)] if src else [str(REPO)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-m", "benchmarks.pg_doctor_memory", "measure",
                          "--db", location, "--what", what, "--dim", str(dim)],
                         capture_output=True, text=True, env=env, cwd=src or REPO)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout)


def write_report(data: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    lines = ["# kbstore doctor on PostgreSQL: memory and time by size", "",
             f"Run {data['run_at']}, commit {data['commit']}, {data['environment']}. "
             f"`python -m benchmarks.pg_doctor_memory {data['argv']}`.", "",
             "One fresh process per measurement; tracemalloc peak of the call, ru_maxrss "
             "of the process after it (before it: imports and the open). Best of "
             f"{data['repeat']} runs by time (memory of that run).", "",
             "| docs | code | call | seconds | tracemalloc peak MiB | maxrss before MiB | "
             "maxrss after MiB |", "|---|---|---|---|---|---|---|"]
    for size in data["sizes"]:
        for code, calls in size["runs"].items():
            for call, r in calls.items():
                lines.append(f"| {size['documents']} | {code} | {call} | {r['seconds']:.2f} | "
                             f"{r['tracemalloc_peak_mib']:.1f} | {r['maxrss_before_mib']:.0f} |"
                             f" {r['maxrss_after_mib']:.0f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    m = sub.add_parser("measure")
    m.add_argument("--db", required=True)
    m.add_argument("--what", choices=("diagnose", "repair"), required=True)
    m.add_argument("--dim", type=int, required=True)
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--baseline-src", default=None,
                        help="a kbstore source tree to measure first (the code before)")
    parser.add_argument("--url", default=None)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    if args.command == "measure":
        print(json.dumps(measure(args.db, args.what, args.dim)), flush=True)
        return
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from tests import pg_server

    server = None
    url = args.url or os.environ.get(pg_server.ENV_URL)
    if not url:
        server = pg_server.start(durable=False)  # the fill's commits need no flush
        url = pg_server.create_database(server.url)
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    codes: dict[str, Path | None] = {"after": None}
    if args.baseline_src:
        codes = {"before": Path(args.baseline_src).resolve(), **codes}
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=REPO).stdout.strip()
        data: dict[str, Any] = {
            "run_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
            "argv": " ".join(argv if argv is not None else sys.argv[1:]),
            "environment": f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}",
            "repeat": args.repeat, "sizes": []}
        for n in (int(x) for x in args.sizes.split(",")):
            location = pg_server.kb_url(url, pg_server.unique_kb_name(f"doc{n}"))
            log(f"[{n}] fill")
            size: dict[str, Any] = {"documents": n, "fill": fill(location, n, args.dim),
                                    "runs": {}}
            log(f"[{n}]   {size['fill']}")
            for code, src in codes.items():
                size["runs"][code] = {}
                for what in ("diagnose", "repair"):
                    runs = [run_measure(location, what, args.dim, src)
                            for _ in range(args.repeat)]
                    best = min(runs, key=lambda r: r["seconds"])
                    size["runs"][code][what] = best
                    log(f"[{n}]   {code} {what}: {best['seconds']:.2f} s, "
                        f"{best['tracemalloc_peak_mib']:.1f} MiB traced, "
                        f"maxrss {best['maxrss_after_mib']:.0f} MiB, {best['problems']}, "
                        f"{best['code']}")
            data["sizes"].append(size)
            write_report(data, Path(args.out))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()

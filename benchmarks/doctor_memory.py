"""Memory and time of `kbstore doctor` on a SQLite file as the store grows.

    python -m benchmarks.doctor_memory --docs 2000,20000 [--baseline DIR] [--workdir DIR]

Builds (once, in --workdir) stores of N documents of ~300 words with the fake
embedder (no model; each document gets chunk vectors too), then runs the
diagnosis in a fresh process per measurement: wall time of a plain run, and
in a second run the Python heap's peak (tracemalloc) and the process's
anonymous memory (RssAnon; VmHWM also counts the file pages SQLite maps, so
it is printed but not compared). ``--baseline DIR`` runs a checkout of
another version side by side (its tree first on the path), alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

PROBE = """
import json, sys, time, tracemalloc
import kbstore
from kbstore import KnowledgeStore
from kbstore.doctor import diagnose
store = KnowledgeStore.open(sys.argv[1], read_only=True)
traced = sys.argv[2] == "1"
if traced:
    tracemalloc.start()
t = time.perf_counter()
report = diagnose(store)
wall = time.perf_counter() - t
status = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in
          open("/proc/self/status")) if k in ("VmHWM", "RssAnon", "RssFile")}
print(json.dumps({"wall_s": wall, "ok": report.ok, "code": kbstore.__file__,
                  "heap_peak_mib": tracemalloc.get_traced_memory()[1] / 2**20 if traced else None,
                  "rss_anon_kb": status["RssAnon"], "vm_hwm_kb": status["VmHWM"]}))
"""


def build(path: Path, n: int) -> None:
    from kbstore import Document, FakeEmbedder, KnowledgeStore

    rnd = random.Random(n)
    words = [f"w{i}" for i in range(5000)]
    docs = (Document(path=f"notes/d{i}.md", title=f"doc {i}",
                     body=" ".join(rnd.choice(words) for _ in range(300)),
                     tags=["a", f"t{i % 50}"]) for i in range(n))
    store = KnowledgeStore.open(path, FakeEmbedder(), hype=False)
    store.upsert_many(docs)
    store.close()


def probe(db: Path, tree: str | None, traced: bool) -> dict[str, object]:
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree
    # `python -c` puts the working directory first on the path: run in the tree
    out = subprocess.run([sys.executable, "-c", PROBE, str(db.resolve()), "1" if traced else "0"],
                         env=env, cwd=tree, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", default="2000,20000")
    parser.add_argument("--baseline", help="a checkout of another version, run side by side")
    parser.add_argument("--workdir", default="benchmarks/cache/doctor_memory")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    trees = [("this tree", None)] + ([("baseline", args.baseline)] if args.baseline else [])
    for n in (int(x) for x in args.docs.split(",")):
        db = work / f"docs{n}.sqlite"
        if not db.exists():
            t = time.perf_counter()
            build(db, n)
            print(f"built {n} documents in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        for _ in range(args.rounds):
            for name, tree in trees:
                plain, traced = probe(db, tree, False), probe(db, tree, True)
                print(f"{n:>7} {name:>9}: {plain['wall_s']:6.2f} s, heap peak "
                      f"{traced['heap_peak_mib']:6.1f} MiB, RssAnon "
                      f"{traced['rss_anon_kb'] / 1024:6.1f} MiB, VmHWM "
                      f"{traced['vm_hwm_kb'] / 1024:6.1f} MiB, ok={plain['ok']} ({plain['code']})")


if __name__ == "__main__":
    main()

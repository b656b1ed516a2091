"""List the pooled documents nobody has judged yet, per query.

    python -m benchmarks.agent_memory.pool benchmarks/agent_memory/picobot_kb
    python -m benchmarks.agent_memory.pool DIR --depth 5 --out pool.tsv

Pooling (as in TREC): run every system the harness offers, take each one's
top ``--depth`` for every query, and list the (query, document) pairs that have
no label yet: neither in qrels.tsv, nor in judged_nonrelevant.tsv, nor in
pooled_judgements.tsv. Somebody then reads each listed document and records a
grade 0-3 in ``pooled_judgements.tsv`` (query_id, path, grade, note);
build_kb_datasets.py merges those into qrels.tsv (grades 1-3) and
judged_nonrelevant.tsv (grade 0). Run again until nothing is listed.

Output columns: query_id, path, systems that returned it in their top depth
(with rank), query text, document title. Absent queries are pooled too: any
document judged relevant for one would mean the query is not absent.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.agent_memory.build_kb_datasets import read_pooled
from benchmarks.agent_memory.data import load
from benchmarks.agent_memory.run import DEFAULT_CACHE, Runner
from benchmarks.agent_memory.systems import ALL_SYSTEMS, caching_minilm, save_cache


def judged_pairs(root: Path) -> set[tuple[str, str]]:
    """(query id, path) pairs that already carry a grade, 0 included."""
    pairs: set[tuple[str, str]] = set()
    for name in ("qrels.tsv", "judged_nonrelevant.tsv"):
        file = root / name
        if not file.exists():
            continue
        for n, line in enumerate(file.read_text(encoding="utf-8").splitlines()):
            parts = line.split("\t")
            if n == 0 and parts[0] == "query_id" or len(parts) < 3:
                continue
            pairs.add((parts[0], parts[1]))
    pairs.update((q, p) for q, p, _ in read_pooled(root / "pooled_judgements.tsv"))
    return pairs


def pool(root: Path, *, systems: Sequence[str] = ALL_SYSTEMS, depth: int = 5,
         cache_dir: Path = DEFAULT_CACHE, embedder: object = None
         ) -> list[tuple[str, str, list[str]]]:
    """Unjudged (query id, path, ['system@rank', ...]) in query order."""
    ds = load(root)
    embedder = embedder or caching_minilm(cache_dir, ds.name)
    judged = judged_pairs(root)
    found: dict[tuple[str, str], list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="agent-memory-pool-") as tmp:
        runner = Runner(ds, embedder, Path(tmp), systems, {})
        try:
            for system in systems:
                for qid, paths in runner.rank_all(system, ds.queries).items():
                    for rank, path in enumerate(paths[:depth], start=1):
                        if (qid, path) not in judged:
                            found.setdefault((qid, path), []).append(f"{system}@{rank}")
        finally:
            runner.close()
            save_cache(embedder)
    order = {q["id"]: i for i, q in enumerate(ds.queries)}
    return [(q, p, found[(q, p)]) for q, p in sorted(found, key=lambda k: (order[k[0]], k[1]))]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", type=Path)
    p.add_argument("--depth", type=int, default=5)
    p.add_argument("--systems", default=",".join(ALL_SYSTEMS))
    p.add_argument("--out", type=Path, default=None, help="write the list here, not stdout")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    args = p.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    ds = load(args.dataset)
    texts = {q["id"]: q["text"] for q in ds.queries}
    titles = {d["path"]: d["title"] for rows in ds.docs.values() for d in rows}
    rows = pool(args.dataset, systems=systems, depth=args.depth, cache_dir=args.cache_dir)
    lines = [f"{q}\t{path}\t{','.join(hits)}\t{texts[q]}\t{titles[path]}\n"
             for q, path, hits in rows]
    text = "query_id\tpath\tfound_by\tquery\ttitle\n" + "".join(lines)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    queries = len({q for q, _, _ in rows})
    print(f"{len(rows)} unjudged pooled documents over {queries} queries "
          f"(depth {args.depth}, {len(systems)} systems)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

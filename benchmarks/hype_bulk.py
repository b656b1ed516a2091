"""Cost of HyPE on the bulk path: LLM calls and wall time, sequential vs parallel.

    python benchmarks/hype_bulk.py                     # 1,000 docs, 20 ms per call, c = 1 and 8
    python benchmarks/hype_bulk.py --docs 200 --sleep-ms 50 --concurrency 1 4 16

writes benchmarks/results/hype_bulk.json. The LLM is a stand-in for
``litellm.completion`` that sleeps (releasing the GIL, like a network call)
and counts calls; vectors come from FakeEmbedder, so the time measured is
the HyPE orchestration: parallel calls, batched question embedding, one
transaction per batch. Two paths are measured for each concurrency:

- ``import``: ``upsert_many`` of new documents with HyPE on (writer.py);
- ``job``: documents imported with HyPE off, then ``run_hype(store,
  'pending')`` -- what ``kbstore hype --pending`` does.

A re-import after reopening checks that unchanged content costs no call.
Not a test: no assertion on time.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.documents import make_document
from kbstore.hype_jobs import run_hype, select_targets
from kbstore.model import Document

RESULTS = Path(__file__).parent / "results" / "hype_bulk.json"
TOPICS = ("deploy", "sqlite", "sourdough", "kubernetes", "asyncio", "git", "sensors", "blog")


class SleepyLLM:
    """litellm.completion stand-in: sleeps per call, counts calls and peak parallelism."""

    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s
        self.calls = 0
        self.in_flight = 0
        self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, **kwargs: Any) -> SimpleNamespace:
        with self._lock:
            self.calls += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            time.sleep(self.sleep_s)
        finally:
            with self._lock:
                self.in_flight -= 1
        title = kwargs["messages"][0]["content"].split("Title: ", 1)[1].split("\n", 1)[0]
        content = "\n".join(f"{n}. {q} {title}?" for n, q in enumerate(
            ("How do I use", "What is", "When should I apply", "Where is the config for",
             "Should I automate"), start=1))
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=content))])


def make_docs(n: int) -> list[Document]:
    docs = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        docs.append(make_document(
            f"knowledge/domains/{topic}-{i:04d}.md", title=f"{topic.title()} note {i}",
            tags=[topic], body=f"# {topic} note {i}\n\nHow {topic} item {i} works, step by "
                               f"step, with the pitfalls seen in practice ({i * 7 % 13})."))
    return docs


class CountingEmbedder(FakeEmbedder):
    """FakeEmbedder that also counts embed_queries calls (batching check)."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.query_calls = 0

    def embed_queries(self, texts):  # type: ignore[no-untyped-def, override]
        self.query_calls += 1
        return super().embed_queries(texts)


def measure_import(docs: list[Document], llm: SleepyLLM, concurrency: int, workdir: Path
                   ) -> dict[str, Any]:
    path = workdir / f"import-c{concurrency}.sqlite"
    embedder = CountingEmbedder()
    with KnowledgeStore.open(path, embedder, hype=True) as store:
        store.hype.concurrency = concurrency
        calls0 = llm.calls
        t0 = time.perf_counter()
        report = store.upsert_many(docs)
        wall = time.perf_counter() - t0
        calls = llm.calls - calls0
        questions = store.status()["hype_questions"]
    # Reopen and import the same content again: no LLM call expected.
    with KnowledgeStore.open(path, CountingEmbedder(), hype=True) as store:
        calls1 = llm.calls
        again = store.upsert_many(docs)
        reimport_calls = llm.calls - calls1
    return {"path": "import", "concurrency": concurrency, "documents": len(docs),
            "llm_calls": calls, "hype_generated": report.hype_generated,
            "hype_pending": report.hype_pending, "questions": questions,
            "embed_query_calls": embedder.query_calls, "wall_s": round(wall, 3),
            "docs_per_s": round(len(docs) / wall, 1), "peak_in_flight": llm.peak,
            "reimport_llm_calls": reimport_calls, "reimport_unchanged": again.unchanged}


def measure_job(docs: list[Document], llm: SleepyLLM, concurrency: int, workdir: Path
                ) -> dict[str, Any]:
    path = workdir / f"job-c{concurrency}.sqlite"
    with KnowledgeStore.open(path, FakeEmbedder(), hype=False) as store:
        store.upsert_many(docs)
    embedder = CountingEmbedder()
    with KnowledgeStore.open(path, embedder, hype=True) as store:
        dry = run_hype(store, "pending", dry_run=True)
        calls0 = llm.calls
        t0 = time.perf_counter()
        counts = run_hype(store, "pending", concurrency=concurrency)
        wall = time.perf_counter() - t0
        pending_after = len(select_targets(store, "pending"))
    return {"path": "job", "concurrency": concurrency, "documents": len(docs),
            "dry_run_llm_calls": dry["llm_calls"], "llm_calls": llm.calls - calls0,
            "generated": counts["generated"], "failed": counts["failed"],
            "questions": counts["questions"], "embed_query_calls": embedder.query_calls,
            "wall_s": round(wall, 3), "docs_per_s": round(len(docs) / wall, 1),
            "peak_in_flight": llm.peak, "pending_after": pending_after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--sleep-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
    import litellm

    docs = make_docs(args.docs)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for concurrency in args.concurrency:
            for measure in (measure_import, measure_job):
                llm = SleepyLLM(args.sleep_ms / 1000)
                litellm.completion = llm
                row = measure(docs, llm, concurrency, Path(tmp))
                rows.append(row)
                print(json.dumps(row))
        # The same at 0 ms per call: what is not LLM latency (embedding, writes, threads).
        overhead = []
        (Path(tmp) / "zero").mkdir()
        for measure in (measure_import, measure_job):
            llm = SleepyLLM(0.0)
            litellm.completion = llm
            overhead.append(measure(docs, llm, max(args.concurrency), Path(tmp) / "zero"))
            print(json.dumps({"llm_sleep_ms": 0, **overhead[-1]}))
    result = {"benchmark": "hype_bulk", "documents": args.docs, "llm_sleep_ms": args.sleep_ms,
              "sequential_floor_s": round(args.docs * args.sleep_ms / 1000, 1),
              "embedder": "fake (hashing, dim 64)", "batch_size": 64, "runs": rows,
              "zero_latency_runs": overhead}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

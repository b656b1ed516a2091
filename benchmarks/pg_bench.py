"""SQLite vs PostgreSQL speed on the same data, side by side in one run.

    python -m benchmarks.pg_bench --data-dir ../shared/datasets              # 10k documents
    python -m benchmarks.pg_bench --data-dir ../shared/datasets --sizes 10000,100000

Per size, the latency benchmark's corpus (benchmarks/latency_data.py:
SciFact text over the picobot topics, clustered random vectors, 6 HyPE
questions per document from a stand-in LLM) is ingested through kbstore's
real write path (``KnowledgeStore.upsert_many``) into a new SQLite file and
a new PostgreSQL knowledge base on a bundled server (or ``--url`` /
KBSTORE_TEST_PG_URL), one after the other. Then, in this process:

- hybrid search latency (``KnowledgeStore.search`` with a query vector, so
  no model runs), the two backends alternating query by query;
- recall@10 of the PostgreSQL HNSW document index against exact search;
- throughput with 1, 4 and 8 client processes per backend: searches/s with
  every client searching, then writes/s with every client upserting its own
  new documents (batches of 8, one new vector each; HyPE off).

Both servers share this machine's cores with the benchmark itself: the
figures to compare are the ratios within a run, not absolute times.
Writes ``benchmarks/results/pg_bench.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.latency import ms, query_texts, query_vectors  # noqa: E402
from benchmarks.latency_data import (  # noqa: E402
    DATASETS,
    fake_completion,
    make_records,
    make_vectors,
    precomputed_corpus,
)
from benchmarks.precomputed import PrecomputedEmbedder  # noqa: E402

THIS = Path(__file__).resolve()
RESULTS = THIS.parent / "results" / "pg_bench.json"
NOW = "2025-07-01T00:00:00+00:00"


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


class HashedEmbedder(PrecomputedEmbedder):
    """The benchmark fingerprint, with a deterministic random unit vector per
    text: lets client processes write and search without the corpus."""

    def _lookup(self, texts: Any) -> np.ndarray:
        out = np.empty((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            row = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            out[i] = row / np.linalg.norm(row)
        self.calls += len(texts)
        return out


# -- ingest ------------------------------------------------------------------------


def corpus(n: int, dim: int, data_dir: Path) -> tuple[list[Any], list[dict[str, Any]],
                                                       np.ndarray, PrecomputedEmbedder]:
    records = make_records(n, data_dir)
    vectors = make_vectors(n, dim)
    docs, embedder = precomputed_corpus(records, vectors, dim)
    return docs, records, vectors, embedder


def ingest(location: str, docs: list[Any], records: list[dict[str, Any]],
           embedder: PrecomputedEmbedder) -> dict[str, Any]:
    import litellm

    from kbstore import KnowledgeStore

    saved = litellm.completion
    litellm.completion = fake_completion(records)
    try:
        with KnowledgeStore.open(location, embedder, hype=True,
                                 hype_model="fake/benchmark") as store:
            t0 = time.perf_counter()
            report = store.upsert_many(docs)
            seconds = time.perf_counter() - t0
            status = store.status()
    finally:
        litellm.completion = saved
    if report.added != len(docs):
        raise RuntimeError(f"ingest incomplete: {report.to_dict()}")
    return {"seconds": seconds, "docs_per_s": len(docs) / seconds,
            "vectors": status["vectors"], "vectors_per_s": status["vectors"] / seconds,
            "bytes": status["file_bytes"]}


# -- search ------------------------------------------------------------------------


def latency(locations: dict[str, str], dim: int, queries: list[str], qvecs: np.ndarray
            ) -> dict[str, Any]:
    """Both backends alternating per query (the order flipped every query)."""
    from kbstore import KnowledgeStore

    stores = {name: KnowledgeStore.open(loc, PrecomputedEmbedder(dim), read_only=True,
                                        hype=False) for name, loc in locations.items()}
    try:
        for store in stores.values():  # warm: prepared statements, caches, pages
            for q, v in zip(queries[:10], qvecs[:10], strict=True):
                store.search(q, query_vector=v, limit=10, now=NOW)
        times: dict[str, list[float]] = {name: [] for name in stores}
        tops: dict[str, list[list[str]]] = {name: [] for name in stores}
        names = list(stores)
        for i, (q, v) in enumerate(zip(queries, qvecs, strict=True)):
            for name in (names if i % 2 == 0 else names[::-1]):
                t0 = time.perf_counter()
                hits = stores[name].search(q, query_vector=v, limit=10, now=NOW)
                times[name].append(time.perf_counter() - t0)
                tops[name].append([h.path for h in hits])
    finally:
        for store in stores.values():
            store.close()
    out: dict[str, Any] = {name: ms(t) for name, t in times.items()}
    out["ratio_p50_postgres_over_sqlite"] = out["postgres"]["p50"] / out["sqlite"]["p50"]
    out["ratio_p95_postgres_over_sqlite"] = out["postgres"]["p95"] / out["sqlite"]["p95"]
    same = [len(set(a) & set(b)) / max(1, len(a)) for a, b in
            zip(tops["sqlite"], tops["postgres"], strict=True)]
    out["top10_overlap"] = float(np.mean(same))
    out["same_top1"] = float(np.mean([a[:1] == b[:1] for a, b in
                                      zip(tops["sqlite"], tops["postgres"], strict=True)]))
    return out


def hnsw_recall(url: str, doc_vectors: np.ndarray, qvecs: np.ndarray, paths: list[str]
                ) -> dict[str, Any]:
    """recall@10 of the HNSW document index (the statement's session
    settings) against exact cosine search over the document vectors."""
    from kbstore.backends.postgres import PostgresBackend

    backend = PostgresBackend.open(url, mode="read")
    try:
        recalls, times = [], []
        for v in qvecs:
            exact = {paths[i] for i in np.argsort(-(doc_vectors @ v))[:10]}
            t0 = time.perf_counter()
            rows = backend.conn.execute(
                "SELECT d.path FROM vectors AS v JOIN documents AS d ON d.id = v.doc_id "
                "WHERE v.slot = 0 ORDER BY v.embedding <=> %s LIMIT 10",
                (np.asarray(v, dtype=np.float32),)).fetchall()
            times.append(time.perf_counter() - t0)
            recalls.append(len({r[0] for r in rows} & exact) / 10)
        plan = "\n".join(r[0] for r in backend.conn.execute(
            "EXPLAIN SELECT v.doc_id FROM vectors AS v WHERE v.slot = 0 "
            "ORDER BY v.embedding <=> %s LIMIT 10", (np.asarray(qvecs[0], np.float32),)))
    finally:
        backend.close()
    return {"recall_at_10": float(np.mean(recalls)), "knn_ms": ms(times),
            "uses_hnsw": "hnsw" in plan}


# -- throughput with several client processes ----------------------------------------


def client(location: str, mode: str, seconds: float, dim: int, seed: int, go: str,
           data_dir: str) -> dict[str, Any]:
    from kbstore import KnowledgeStore
    from kbstore.documents import make_document

    embedder = HashedEmbedder(dim)
    queries = query_texts(Path(data_dir), 200)
    rng = np.random.default_rng(seed)
    done = errors = 0
    first_error = ""
    with KnowledgeStore.open(location, embedder, read_only=mode == "search",
                             hype=False) as store:
        print("ready", flush=True)
        while not os.path.exists(go):
            time.sleep(0.001)
        deadline = time.monotonic() + seconds
        batch = 0
        while time.monotonic() < deadline:
            try:
                if mode == "search":
                    q = queries[int(rng.integers(len(queries)))]
                    store.search(q, query_vector=embedder.embed_queries([q])[0], limit=10,
                                 now=NOW)
                    done += 1
                else:
                    docs = [make_document(f"projects/load/c{seed}-{batch}-{k}.md",
                                          title=f"load {seed} {batch} {k}",
                                          body=f"client {seed} batch {batch} document {k} "
                                               + queries[(batch + k) % len(queries)])
                            for k in range(8)]
                    store.upsert_many(docs)
                    batch += 1
                    done += len(docs)
            except Exception as exc:
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"
    return {"done": done, "errors": errors, "first_error": first_error}


def throughput(locations: dict[str, str], dim: int, clients: list[int], seconds: float,
               data_dir: Path, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("search", "write"):
        for n in clients:
            for name, location in locations.items():
                go = workdir / f"go-{mode}-{n}-{name}"
                procs = [subprocess.Popen(
                    [sys.executable, str(THIS), "client", "--db", location, "--mode", mode,
                     "--seconds", str(seconds), "--dim", str(dim), "--seed", str(1000 * n + k),
                     "--go", str(go), "--data-dir", str(data_dir)],
                    stdout=subprocess.PIPE, text=True) for k in range(n)]
                for proc in procs:
                    assert proc.stdout is not None
                    if proc.stdout.readline().strip() != "ready":
                        raise RuntimeError("a client did not start")
                go.touch()
                results = []
                for proc in procs:
                    stdout, _ = proc.communicate(timeout=seconds + 300)
                    results.append(json.loads(stdout.strip().splitlines()[-1]))
                done = sum(r["done"] for r in results)
                key = f"{mode}_{n}"
                out.setdefault(key, {})[name] = {
                    "per_s": done / seconds, "errors": sum(r["errors"] for r in results),
                    "first_error": next((r["first_error"] for r in results
                                         if r["first_error"]), "")}
                log(f"  {mode} x{n} {name}: {done / seconds:.1f}/s")
            row = out[f"{mode}_{n}"]
            row["ratio_postgres_over_sqlite"] = (row["postgres"]["per_s"]
                                                 / max(1e-9, row["sqlite"]["per_s"]))
    return out


# -- driver ------------------------------------------------------------------------


def run_size(n: int, args: argparse.Namespace, url: str, workdir: Path) -> dict[str, Any]:
    from tests import pg_server

    data_dir = Path(args.data_dir)
    log(f"[{n}] generating the corpus")
    docs, records, vectors, embedder = corpus(n, args.dim, data_dir)
    locations = {"sqlite": str(workdir / f"bench-{n}.sqlite"),
                 "postgres": pg_server.kb_url(url, f"bench_{n}")}
    result: dict[str, Any] = {"documents": n, "dim": args.dim, "ingest": {}}
    for name, location in locations.items():
        log(f"[{n}] ingest into {name}")
        result["ingest"][name] = ingest(location, docs, records, embedder)
        log(f"[{n}]   {result['ingest'][name]['docs_per_s']:.0f} docs/s")
    result["ingest"]["ratio_postgres_over_sqlite"] = (
        result["ingest"]["postgres"]["docs_per_s"] / result["ingest"]["sqlite"]["docs_per_s"])
    queries = query_texts(data_dir, args.queries)
    qvecs = query_vectors(vectors[:n], vectors[n:], args.queries)
    log(f"[{n}] search latency, {args.queries} queries per backend")
    result["search"] = latency(locations, args.dim, queries, qvecs)
    result["hnsw"] = hnsw_recall(locations["postgres"], vectors[:n], qvecs[:100],
                                 [d.path for d in docs])
    if args.clients:
        log(f"[{n}] throughput")
        result["throughput"] = throughput(locations, args.dim, args.clients, args.seconds,
                                          data_dir, workdir)
    return result


def write_report(data: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    env = data["environment"]
    lines = ["# SQLite vs PostgreSQL (benchmarks/pg_bench.py)", "",
             f"Run {data['run_at']} at commit {data['commit']}; {env['cpus']} CPUs shared with "
             f"the servers and other work; PostgreSQL {env['postgres']} (bundled server on a "
             "Unix socket, default settings) vs the SQLite file. Same documents, vectors and "
             "queries; vectors precomputed (no model runs), HyPE questions from a stand-in "
             "LLM. Ratios within one run are the figures to compare.", ""]
    for size in data["sizes"]:
        n, ing, s = size["documents"], size["ingest"], size["search"]
        lines += [f"## {n:,} documents, {size['dim']} dimensions", "",
                  "| figure | SQLite | PostgreSQL | PostgreSQL / SQLite |", "|---|---|---|---|",
                  f"| ingest docs/s (write path, 7 vectors per document) | "
                  f"{ing['sqlite']['docs_per_s']:.0f} | {ing['postgres']['docs_per_s']:.0f} | "
                  f"{ing['ratio_postgres_over_sqlite']:.2f} |",
                  f"| stored size (MB) | {ing['sqlite']['bytes'] / 1e6:.0f} | "
                  f"{ing['postgres']['bytes'] / 1e6:.0f} | "
                  f"{ing['postgres']['bytes'] / ing['sqlite']['bytes']:.2f} |",
                  f"| hybrid search p50 (ms) | {s['sqlite']['p50']:.2f} | "
                  f"{s['postgres']['p50']:.2f} | {s['ratio_p50_postgres_over_sqlite']:.2f} |",
                  f"| hybrid search p95 (ms) | {s['sqlite']['p95']:.2f} | "
                  f"{s['postgres']['p95']:.2f} | {s['ratio_p95_postgres_over_sqlite']:.2f} |",
                  "", f"Top-10 overlap between the backends: {s['top10_overlap']:.0%}; same "
                  f"first hit: {s['same_top1']:.0%} ({s['sqlite']['n']} queries).",
                  f"PostgreSQL HNSW document index alone: recall@10 vs exact "
                  f"{size['hnsw']['recall_at_10']:.3f}, p50 {size['hnsw']['knn_ms']['p50']:.2f} "
                  f"ms (plan uses HNSW: {size['hnsw']['uses_hnsw']}).", ""]
        if "throughput" in size:
            lines += ["| clients | searches/s SQLite | searches/s PostgreSQL | ratio | "
                      "writes/s SQLite (docs) | writes/s PostgreSQL (docs) | ratio | errors |",
                      "|---|---|---|---|---|---|---|---|"]
            tp = size["throughput"]
            for c in data["clients"]:
                s_row, w_row = tp[f"search_{c}"], tp[f"write_{c}"]
                errors = sum(r[b]["errors"] for r in (s_row, w_row)
                             for b in ("sqlite", "postgres"))
                lines.append(
                    f"| {c} | {s_row['sqlite']['per_s']:.1f} | {s_row['postgres']['per_s']:.1f} "
                    f"| {s_row['ratio_postgres_over_sqlite']:.2f} | "
                    f"{w_row['sqlite']['per_s']:.1f} | {w_row['postgres']['per_s']:.1f} | "
                    f"{w_row['ratio_postgres_over_sqlite']:.2f} | {errors} |")
            lines.append("")
    out.with_suffix(".md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    c = sub.add_parser("client")
    c.add_argument("--db", required=True)
    c.add_argument("--mode", choices=("search", "write"), required=True)
    c.add_argument("--seconds", type=float, default=10)
    c.add_argument("--dim", type=int, default=384)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--go", required=True)
    c.add_argument("--data-dir", default=str(DATASETS))
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--clients", default="1,4,8",
                        help="client process counts for throughput ('' skips it)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per throughput step")
    parser.add_argument("--data-dir", default=str(DATASETS))
    parser.add_argument("--url", default=None)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    if args.command == "client":
        print(json.dumps(client(args.db, args.mode, args.seconds, args.dim, args.seed, args.go,
                                args.data_dir)), flush=True)
        return
    args.clients = [int(x) for x in args.clients.split(",") if x.strip()]
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from tests import pg_server

    server = None
    url = args.url or os.environ.get(pg_server.ENV_URL)
    if not url:
        server = pg_server.start()
        url = pg_server.create_database(server.url)
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        import psycopg

        with psycopg.connect(url) as conn:
            version = conn.execute("SHOW server_version").fetchall()[0][0]
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=THIS.parent).stdout.strip()
        data: dict[str, Any] = {
            "run_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
            "environment": {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "postgres": version},
            "clients": args.clients, "sizes": []}
        with tempfile.TemporaryDirectory(prefix="kbstore-pg-bench-") as tmp:
            for n in (int(x) for x in args.sizes.split(",")):
                data["sizes"].append(run_size(n, args, url, Path(tmp)))
                write_report(data, Path(args.out))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()

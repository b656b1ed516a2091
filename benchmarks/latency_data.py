"""Synthetic corpora for the latency benchmark, built once and cached.

n documents with SciFact text cycled (title/text), spread over the picobot
topics (self/user/projects/domains/journal plus a few skills) with varied
paths, tags and dates. Vectors are random unit vectors drawn around cluster
centroids (~50 documents each, 2000 at 100k), so nearest neighbours are a
real question and recall is meaningful; each document has 6 HyPE questions
whose vectors lie near the document's own. The kbstore database is built through the real write path
(``KnowledgeStore.upsert_many`` with a precomputed-vector embedder and a fake
LLM standing in for ``litellm.completion``); the seed baseline gets the SAME
documents and vectors as its docs JSONL + npz sidecar.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.baselines.seed import write_sidecar
from benchmarks.precomputed import PrecomputedEmbedder

if TYPE_CHECKING:
    from kbstore.store import KnowledgeStore

REPO = Path(__file__).resolve().parents[1]
# shared/datasets beside the checkout (main) or one level up (a worktree in wt/)
DATASETS = next((p / "shared" / "datasets" for p in (REPO.parent, REPO.parent.parent)
                 if (p / "shared" / "datasets").is_dir()), REPO.parent / "shared" / "datasets")
CACHE = REPO / "benchmarks" / "cache" / "latency"
QUESTIONS_PER_DOC = 6
CACHE_VERSION = 1
TOPICS = ("self", "user", "projects", "domains", "journal", "skills")
TOPIC_WEIGHTS = (0.10, 0.10, 0.30, 0.30, 0.17, 0.03)
SUBFOLDERS = ("notes", "reference", "howto", "people", "decisions", "ideas")
QUESTION_TEMPLATES = (
    "What is known about {a} (entry {i})?",
    "How does {a} relate to {b} in entry {i}?",
    "When should I look up {b} (entry {i})?",
    "Why does {a} matter for {c}, according to entry {i}?",
    "Where is {c} described (entry {i})?",
    "Should I consider {b} when studying {a} (entry {i})?",
)
_WORD = re.compile(r"[a-z]{5,}")
_TITLE_INDEX = re.compile(r"^Title: .*\[(\d+)\]\s*$", re.MULTILINE)


VECTOR_SOURCES = ("clustered", "real")
# MiniLM vectors the quality benchmark cached (benchmarks/quality.py): the
# "real" corpus is built from them.
REAL_POOLS = ("scifact-*.npy", "cranfield-*.npy", "cisi-*.npy")


def sqlite_conn(store: KnowledgeStore) -> Any:
    """The connection of a store on a SQLite file (these benchmarks read its
    tables directly)."""
    from kbstore.backends.sqlite.backend import SQLiteBackend

    backend = store.backend
    if not isinstance(backend, SQLiteBackend):
        raise TypeError(f"{backend.location} is not a SQLite file")
    return backend.conn


def paths_for(n: int, dim: int, cache: Path = CACHE, source: str = "clustered"
              ) -> dict[str, Path]:
    root = cache / (f"v{CACHE_VERSION}-n{n}-d{dim}" + ("" if source == "clustered"
                                                       else f"-{source}"))
    return {"root": root, "db": root / "kb.sqlite", "npz": root / "seed.npz",
            "docs": root / "docs.jsonl", "build": root / "build.json"}


def _scifact_rows(data_dir: Path) -> list[dict[str, str]]:
    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def make_vectors(n: int, dim: int, seed: int = 7) -> np.ndarray:
    """(n * (1 + 6), dim) float32: rows 0..n-1 are document vectors, then
    document i's question vectors at n + 6 i .. n + 6 i + 5."""
    rng = np.random.default_rng(seed)
    # ~50 documents per cluster at every size (2000 clusters at 100k): the
    # exact top 10 then lies inside a cluster, well apart from the rest, so
    # recall measures the index rather than ties among unrelated vectors.
    n_centroids = min(2000, max(1, n // 50))
    centroids = _unit(rng.standard_normal((n_centroids, dim), dtype=np.float32))
    out = np.empty((n * (1 + QUESTIONS_PER_DOC), dim), np.float32)
    docs = out[:n]
    docs[:] = centroids[rng.integers(n_centroids, size=n)]
    docs += rng.standard_normal((n, dim), dtype=np.float32) * (0.8 / np.sqrt(dim))
    _unit(docs)
    step = 20000  # question vectors in chunks: bounded temporary memory
    for start in range(0, n, step):
        stop = min(n, start + step)
        block = out[n + start * QUESTIONS_PER_DOC:n + stop * QUESTIONS_PER_DOC]
        block[:] = np.repeat(docs[start:stop], QUESTIONS_PER_DOC, axis=0)
        block += rng.standard_normal(block.shape, dtype=np.float32) * (0.6 / np.sqrt(dim))
        _unit(block)
    return out


def real_pool(cache_root: Path = CACHE.parent) -> np.ndarray:
    """Every cached MiniLM vector of the three test collections (documents,
    queries and what quality runs added: chunks, HyPE questions), unit length.
    It grows as the caches do: benchmarks.speed pins the queries it draws."""
    files = sorted(p for pattern in REAL_POOLS for p in cache_root.glob(pattern)
                   if ".tmp." not in p.name)
    if not files:
        raise FileNotFoundError(f"no cached MiniLM vectors in {cache_root}: run "
                                "`python -m benchmarks.quality --embed-only` first")
    pool = np.concatenate([np.load(p).astype(np.float32) for p in files])
    return _unit(pool[np.linalg.norm(pool, axis=1) > 0])


def make_real_vectors(n: int, pool: np.ndarray, seed: int = 7) -> np.ndarray:
    """Like make_vectors, from real embeddings: document i is a mix of two
    pool vectors (weights 1 and 0.3..0.8), so n documents are distinct yet
    keep MiniLM's geometry (its anisotropy is what sign bits find hard);
    question j of document i mixes the document with a third pool vector
    (weight 0.3..0.6), as a question sits near, not on, its document."""
    rng = np.random.default_rng(seed)
    m, dim = pool.shape
    out = np.empty((n * (1 + QUESTIONS_PER_DOC), dim), np.float32)
    docs = out[:n]
    docs[:] = pool[rng.integers(m, size=n)]
    docs += pool[rng.integers(m, size=n)] * rng.uniform(0.3, 0.8, size=(n, 1)).astype(np.float32)
    _unit(docs)
    step = 20000
    for start in range(0, n, step):
        stop = min(n, start + step)
        block = out[n + start * QUESTIONS_PER_DOC:n + stop * QUESTIONS_PER_DOC]
        rows = len(block)
        block[:] = np.repeat(docs[start:stop], QUESTIONS_PER_DOC, axis=0)
        block += pool[rng.integers(m, size=rows)] * rng.uniform(
            0.3, 0.6, size=(rows, 1)).astype(np.float32)
        _unit(block)
    return out


def make_records(n: int, data_dir: Path, seed: int = 11) -> list[dict[str, Any]]:
    """Document fields (kbstore's make_document arguments) and 6 questions each."""
    rows = _scifact_rows(data_dir)
    rng = np.random.default_rng(seed)
    topics = rng.choice(len(TOPICS), size=n, p=TOPIC_WEIGHTS)
    days = rng.integers(0, 900, size=n)
    start = dt.date(2023, 1, 1)
    records = []
    for i in range(n):
        src = rows[i % len(rows)]
        title = " ".join(src["title"].split()) or f"Untitled {i}"
        words = list(dict.fromkeys(_WORD.findall(title.lower()))) or ["study"]
        a, b, c = (words * 3)[:3]
        slug = "-".join(words[:3])[:40] or "note"
        topic = TOPICS[topics[i]]
        day = (start + dt.timedelta(days=int(days[i]))).isoformat()
        if topic == "skills":
            path = f"skills/{slug}-{i}/SKILL.md"
        elif topic == "journal":
            path = f"journal/{day}-{slug}-{i}.md"
        else:
            path = f"{topic}/{SUBFOLDERS[i % len(SUBFOLDERS)]}/{slug}-{i}.md"
        records.append({
            "path": path, "title": f"{title} [{i}]", "body": src.get("text", ""),
            "tags": words[:2] + [SUBFOLDERS[i % len(SUBFOLDERS)]],
            "created": day, "updated": day,
            "questions": [t.format(a=a, b=b, c=c, i=i) for t in QUESTION_TEMPLATES],
        })
    return records


def fake_completion(records: list[dict[str, Any]]) -> Any:
    """litellm.completion stand-in: the title's '[i]' names the document."""
    def completion(**kwargs: Any) -> Any:
        prompt = kwargs["messages"][0]["content"]
        match = _TITLE_INDEX.search(prompt)
        if match is None:
            raise ValueError("benchmark fake LLM: no '[i]' in the title")
        text = "\n".join(records[int(match.group(1))]["questions"])
        message = SimpleNamespace(content=text)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])
    return completion



def precomputed_corpus(records: list[dict[str, Any]], vectors: Any,
                       dim: int) -> tuple[list[Any], PrecomputedEmbedder]:
    """The records as documents, and an embedder that answers each document's
    text and each question with its precomputed vector (document i is row i,
    its questions rows n + i * QUESTIONS_PER_DOC + j)."""
    from kbstore.documents import make_document
    from kbstore.embed import embedding_text

    n = len(records)
    docs = [make_document(r["path"], title=r["title"], body=r["body"], tags=r["tags"],
                          created=r["created"], updated=r["updated"]) for r in records]
    index: dict[str, int] = {}
    for i, (doc, rec) in enumerate(zip(docs, records, strict=True)):
        index[embedding_text(doc.title, doc.tags, doc.body)] = i
        for j, question in enumerate(rec["questions"]):
            index[question] = n + i * QUESTIONS_PER_DOC + j
    if len(index) != n * (1 + QUESTIONS_PER_DOC):
        raise RuntimeError("benchmark texts are not unique: vectors would be ambiguous")
    return docs, PrecomputedEmbedder(dim, index, vectors)

def build(n: int, dim: int, data_dir: Path = DATASETS, cache: Path = CACHE,
          log: Any = print, source: str = "clustered") -> dict[str, Any]:
    """Build (or reuse) the kbstore DB and the seed inputs for n documents;
    ``source``: clustered random vectors or mixes of real MiniLM vectors
    (dim 384 only)."""
    where = paths_for(n, dim, cache, source)
    if where["build"].exists():
        return json.loads(where["build"].read_text())
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
    import litellm  # imported before timing: a one-time cost, not per-document work

    from kbstore import KnowledgeStore

    where["root"].mkdir(parents=True, exist_ok=True)
    for stale in ("db", "npz", "docs"):
        where[stale].unlink(missing_ok=True)
    t0 = time.perf_counter()
    records = make_records(n, data_dir)
    if source == "real":
        pool = real_pool(cache.parent)
        if pool.shape[1] != dim:
            raise ValueError(f"the cached real vectors are {pool.shape[1]}-d, not {dim}-d")
        vectors = make_real_vectors(n, pool)
    else:
        vectors = make_vectors(n, dim)
    docs, embedder = precomputed_corpus(records, vectors, dim)
    log(f"[{n}] corpus + vectors generated in {time.perf_counter() - t0:.1f}s")

    saved = litellm.completion
    litellm.completion = fake_completion(records)
    try:
        store = KnowledgeStore.open(where["db"], embedder, hype=True, hype_model="fake/benchmark")
        done = [0]

        def progress(k: int) -> None:
            done[0] += k
            if done[0] % 10000 < k:
                log(f"[{n}] ingested {done[0]} docs ({time.perf_counter() - t1:.1f}s)")

        t1 = time.perf_counter()
        report = store.upsert_many(docs, progress=progress)
        ingest_s = time.perf_counter() - t1
        stored_vectors = sqlite_conn(store).execute(
            "SELECT count(*) FROM vector_data").fetchone()[0]
        store.backend.checkpoint()
        store.close()
    finally:
        litellm.completion = saved
    if report.added != n or report.hype_generated != n:
        raise RuntimeError(f"build incomplete: {report.to_dict()}")

    with where["docs"].open("w", encoding="utf-8") as fh:
        for doc in docs:
            fh.write(json.dumps({"doc_id": doc.path, "title": doc.title, "tags": doc.tags,
                                 "topic": doc.topic, "doc_type": doc.doc_type,
                                 "created": doc.created, "updated": doc.updated,
                                 "body": doc.body}, ensure_ascii=False) + "\n")
    paths = [d.path for d in docs]
    write_sidecar(where["npz"], paths, vectors[:n], [d.content_hash() for d in docs],
                  vectors[n:], np.repeat(paths, QUESTIONS_PER_DOC),
                  [q for r in records for q in r["questions"]])
    info = {"n": n, "dim": dim, "source": source, "vectors": int(stored_vectors),
            "ingest_seconds": ingest_s,
            "ingest_docs_per_s": n / ingest_s,
            "ingest_vectors_per_s": stored_vectors / ingest_s,
            "embedder_calls": embedder.calls, "report": report.to_dict()}
    where["build"].write_text(json.dumps(info, indent=1))
    log(f"[{n}] built: {n} docs, {stored_vectors} vectors in {ingest_s:.1f}s "
        f"({n / ingest_s:.0f} docs/s)")
    return info


def load_docs(n: int, dim: int, cache: Path = CACHE, source: str = "clustered"
              ) -> list[dict[str, Any]]:
    with paths_for(n, dim, cache, source)["docs"].open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]

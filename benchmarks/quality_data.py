"""The test collections of benchmarks/quality.py: loading a collection,
the on-disk vector cache, the replayed HyPE questions, and one KnowledgeStore
per collection built through the public API."""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# shared/datasets beside the checkout (main) or one level up (a worktree in wt/)
DEFAULT_DATA = next((p / "shared" / "datasets" for p in (REPO.parent, REPO.parent.parent)
                     if (p / "shared" / "datasets").is_dir()), REPO.parent / "shared" / "datasets")
DEFAULT_CACHE = REPO / "benchmarks" / "cache"
RESULTS = REPO / "benchmarks" / "results"
DEPTH = 100  # every run is evaluated on its top 100


# -- data --------------------------------------------------------------------


def load_dataset(root: Path) -> tuple[list[dict[str, str]], dict[str, str],
                                      dict[str, dict[str, int]]]:
    """corpus rows, queries that have >= 1 relevant document, qrels {qid: {doc: gain}}.
    Cranfield's gain 0 means "not relevant" (see its SOURCE.md): kept in the
    qrels for trec_eval, which only counts gain >= 1 as relevant."""
    with gzip.open(root / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        corpus = [json.loads(line) for line in fh if line.strip()]
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels.tsv", encoding="utf-8") as fh:
        next(fh)  # header
        for line in fh:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    qrels = {q: d for q, d in qrels.items() if any(g > 0 for g in d.values())}
    queries = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                if row["_id"] in qrels:
                    queries[row["_id"]] = row["text"]
    qrels = {q: d for q, d in qrels.items() if q in queries}
    return corpus, queries, qrels


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- embedding cache ---------------------------------------------------------


class VectorCache:
    """text -> vector on disk (.npy matrix + .json keys), for one model and corpus."""

    def __init__(self, path: Path, dim: int) -> None:
        self.path, self.dim = path, dim
        self.keys: dict[str, int] = {}
        self.matrix = np.zeros((0, dim), np.float32)
        keys_file, vecs_file = path.with_suffix(".json"), path.with_suffix(".npy")
        if keys_file.exists() and vecs_file.exists():
            keys = json.loads(keys_file.read_text())
            matrix = np.load(vecs_file)
            if len(keys) == len(matrix):
                self.keys = {k: i for i, k in enumerate(keys)}
                self.matrix = matrix.astype(np.float32)
        self._pending: list[tuple[str, np.ndarray]] = []

    @staticmethod
    def key(kind: str, text: str) -> str:
        return hashlib.sha256(f"{kind}\x1f{text}".encode()).hexdigest()[:32]

    def get(self, key: str) -> np.ndarray | None:
        i = self.keys.get(key)
        return None if i is None else self.matrix[i]

    def put(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        new = [(k, v) for k, v in items if k not in self.keys]
        if not new:
            return
        start = len(self.matrix)
        self.matrix = np.vstack([self.matrix, np.stack([v for _, v in new]).astype(np.float32)])
        for i, (k, _) in enumerate(new):
            self.keys[k] = start + i

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        order = sorted(self.keys, key=self.keys.__getitem__)
        tmp = self.path.with_suffix(".tmp.npy")
        np.save(tmp, self.matrix)
        tmp.replace(self.path.with_suffix(".npy"))
        self.path.with_suffix(".json").write_text(json.dumps(order))


class CachingEmbedder:
    """Wraps the real embedder with the same fingerprint: known texts come
    from the cache, unknown ones are embedded (and remembered)."""

    def __init__(self, inner: Any, cache: VectorCache) -> None:
        self.inner, self.cache = inner, cache
        self.name, self.dim = inner.name, inner.dim
        self.max_tokens = getattr(inner, "max_tokens", None)
        # the model's confidence floor: a new database stores it as its default
        self.min_similarity = getattr(inner, "min_similarity", None)
        self.embedded = 0

    def fingerprint(self) -> dict[str, Any]:
        return self.inner.fingerprint()

    def _embed(self, kind: str, texts: Sequence[str], chunk: int = 512,
               progress: bool = False) -> np.ndarray:
        keys = [self.cache.key(kind, t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if self.cache.get(k) is None))
        if missing:
            text_of = {k: t for k, t in zip(keys, texts, strict=True)}
            t0 = time.perf_counter()
            for start in range(0, len(missing), chunk):
                part = missing[start:start + chunk]
                fn = self.inner.embed_documents if kind == "d" else self.inner.embed_queries
                vecs = fn([text_of[k] for k in part])
                self.cache.put(list(zip(part, vecs, strict=True)))
                self.embedded += len(part)
                if len(missing) > chunk:  # long job: keep what is done
                    self.cache.save()
                if progress:
                    done = start + len(part)
                    print(f"  embedded {done}/{len(missing)} "
                          f"({done / (time.perf_counter() - t0):.1f}/s)", flush=True)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        # every key is in the cache now
        return self.cache.matrix[[self.cache.keys[k] for k in keys]]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("d", texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("q", texts)


# -- HyPE questions replayed from the shipped files ---------------------------

HYPE_FILE = "hype_questions.jsonl.gz"
REPLAY_MODEL = "replay/shipped-hype-questions"


class ReplayLLM:
    """Stands in for ``litellm.completion``: answers kbstore's HyPE prompt
    with the shipped questions of the document the prompt quotes (matched by
    title and the quoted body, which kbstore cuts at hype.BODY_CHARS)."""

    def __init__(self, corpus: list[dict[str, str]], path: Path) -> None:
        from kbstore.hype import BODY_CHARS

        with gzip.open(path, "rt", encoding="utf-8") as fh:
            by_id = {row["_id"]: row["questions"] for row in map(json.loads, fh) if row}
        self.by_text: dict[tuple[str, str], list[str]] = {}
        self.by_body: dict[str, list[str]] = {}
        for row in corpus:
            questions = by_id.get(row["_id"])
            if questions:
                body = row["text"][:BODY_CHARS]
                self.by_text[(row["title"].strip(), body.strip())] = questions
                self.by_body.setdefault(body.strip(), questions)
        self.calls = self.misses = 0

    def __call__(self, **kwargs: Any) -> Any:
        from types import SimpleNamespace

        self.calls += 1
        prompt = kwargs["messages"][0]["content"]
        title = prompt.split("Title: ", 1)[1].split("\nContent: ", 1)[0].strip()
        body = prompt.split("\nContent: ", 1)[1].rsplit("\n\nReturn only", 1)[0].strip()
        questions = self.by_text.get((title, body)) or self.by_body.get(body)
        if not questions:
            self.misses += 1
            questions = []
        message = SimpleNamespace(content="\n".join(questions))
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


# -- indexing ----------------------------------------------------------------


def doc_path(doc_id: str) -> str:
    return f"domains/{doc_id}.md"


def plain_text(row: dict[str, str]) -> str:
    """What the GUIDE's plain script embedded."""
    return f"{row['title']}. {row['text']}"


class Collection:
    """One dataset indexed in a kbstore file, with its cached vectors."""

    def __init__(self, name: str, data_dir: Path, cache_dir: Path, hype: bool = False,
                 hype_questions: bool = False) -> None:
        from kbstore.embed import embedding_text, fingerprint_id
        from kbstore.embed_minilm import MiniLMEmbedder

        self.name = name
        self.corpus, self.queries, self.qrels = load_dataset(data_dir / name)
        inner = MiniLMEmbedder()
        corpus_hash = file_hash(data_dir / name / "corpus.jsonl.gz")
        self.key = hashlib.sha256(
            f"{fingerprint_id(inner.fingerprint())}|{corpus_hash}".encode()).hexdigest()[:16]
        self.cache = VectorCache(cache_dir / f"{name}-{self.key}", inner.dim)
        self.embedder = CachingEmbedder(inner, self.cache)
        # A schema change (migrations) gets a fresh file; vectors stay cached.
        schema = hashlib.sha256(b"".join(
            p.read_bytes() for p in sorted((REPO / "migrations").glob("**/*.sql")))).hexdigest()[:8]
        suffix = "-hypeq" if hype_questions else "-hype" if hype else ""
        self.db_path = cache_dir / f"{name}-{self.key}-{schema}{suffix}.sqlite"
        self.hype = hype or hype_questions
        self.replay = ReplayLLM(self.corpus, data_dir / name / HYPE_FILE) \
            if hype_questions else None
        self.store_texts = [embedding_text(r["title"].strip() or r["_id"], [], r["text"])
                            for r in self.corpus]
        self.store: Any = None

    def embed_all(self, plain: bool = True) -> None:
        """Fill the cache: the texts kbstore embeds, the plain-script texts, the queries."""
        texts = self.store_texts + ([plain_text(r) for r in self.corpus] if plain else [])
        self.embedder._embed("d", texts, progress=True)
        self.embedder._embed("q", list(self.queries.values()), progress=True)
        self.cache.save()

    def open(self) -> Any:
        from kbstore import KnowledgeStore
        from kbstore.documents import make_document

        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.store = KnowledgeStore.open(
            self.db_path, embedder=self.embedder, hype=self.hype,
            hype_model=REPLAY_MODEL if self.replay is not None else None)
        docs = (make_document(doc_path(r["_id"]), title=r["title"], body=r["text"])
                for r in self.corpus)
        if self.replay is not None:
            import litellm

            real, litellm.completion = litellm.completion, self.replay
        try:
            report = self.store.upsert_many(docs)  # unchanged documents cost nothing
        finally:
            if self.replay is not None:
                litellm.completion = real
        if self.replay is not None:
            print(f"  replayed HyPE questions: {self.replay.calls} prompts, "
                  f"{self.replay.misses} without a match", flush=True)
        if self.embedder.embedded:
            self.cache.save()
        print(f"{self.name}: {len(self.store)} docs (added {report.added}, unchanged "
              f"{report.unchanged}), {len(self.queries)} judged queries", flush=True)
        return self.store

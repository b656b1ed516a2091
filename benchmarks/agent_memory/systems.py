"""The systems compared: kbstore through its public API (one store per kb),
and two plain references (FTS5 BM25, exact numpy cosine)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DEPTH = 100  # every system returns at most this many paths per query

# A retriever "alone" is measured pure: the other retrievers weigh 0, decay is
# off and every document type weighs 1, so the kept hits come in exactly the
# retriever's own rank order (checked per query with explain=True).
# The HyPE and date lists weigh 0, "latest" ordering and the confidence floor
# are off: what is left is the one retriever.
PURE = {"half_life_days": None, "boost_skill": 1.0, "boost_journal": 1.0, "boost_entry": 1.0,
        "w_hype": 0.0, "w_hype_fts": 0.0, "w_date": 0.0, "latest": False,
        "min_similarity": None}


@dataclass
class KbstoreSpec:
    name: str
    settings: dict[str, Any]
    only: str | None = None  # explain["ranks"] key of the one retriever that counts
    about: str = ""


KBSTORE_SYSTEMS = {
    "kbstore": KbstoreSpec("kbstore", {}, about="shipped defaults"),
    "kbstore_nodecay": KbstoreSpec("kbstore_nodecay", {"half_life_days": None},
                                   about="defaults, journal decay off (half_life_days=None)"),
    "kbstore_fts": KbstoreSpec("kbstore_fts", {"w_fm": 0.0, "w_vec": 0.0, **PURE}, "fts",
                               "kbstore's FTS5 retriever alone"),
    "kbstore_vec": KbstoreSpec("kbstore_vec", {"w_fm": 0.0, "w_fts": 0.0, **PURE}, "vector",
                               "kbstore's vector retriever alone"),
    "kbstore_fm": KbstoreSpec("kbstore_fm", {"w_fts": 0.0, "w_vec": 0.0, "w_fm": 1.0,
                                             "w_fm_title": 1.0, **PURE}, "frontmatter",
                              "kbstore's frontmatter retriever alone (tags + title words)"),
}
PLAIN_SYSTEMS = {"bm25": "plain FTS5 BM25 (porter) over title+tags+body, OR of quoted words",
                 "dense": "plain exact cosine over MiniLM vectors of 'title. body'"}
ALL_SYSTEMS = (*KBSTORE_SYSTEMS, *PLAIN_SYSTEMS)


def caching_minilm(cache_dir: Path, dataset_name: str) -> Any:
    """The offline MiniLM embedder behind benchmarks.quality_data's disk cache, one
    cache file per dataset and model fingerprint (keys are text hashes, so an
    edited dataset re-embeds only what changed)."""
    from benchmarks.quality_data import CachingEmbedder, VectorCache
    from kbstore.embed import fingerprint_id
    from kbstore.embed_minilm import MiniLMEmbedder

    inner = MiniLMEmbedder()
    key = hashlib.sha256(fingerprint_id(inner.fingerprint()).encode()).hexdigest()[:12]
    cache = VectorCache(cache_dir / f"agent_memory-{dataset_name}-{key}", inner.dim)
    return CachingEmbedder(inner, cache)


def save_cache(embedder: Any) -> None:
    cache = getattr(embedder, "cache", None)
    embedded: int = getattr(embedder, "embedded", 0)
    if cache is not None and embedded:
        cache.save()


class Stores:
    """One KnowledgeStore per kb under ``root``, built through the public API."""

    def __init__(self, docs: dict[str, list[dict[str, Any]]], root: Path, embedder: Any) -> None:
        from kbstore import KnowledgeStore

        self.embedder = embedder
        self.stores: dict[str, Any] = {}
        self.meta: dict[str, dict[str, tuple[str, str]]] = {}  # kb -> path -> (topic, type)
        self._prefill(docs)
        root.mkdir(parents=True, exist_ok=True)
        for i, (kb, rows) in enumerate(sorted(docs.items())):
            store = KnowledgeStore.open(root / f"kb{i:03d}.sqlite", embedder, hype=False)
            for r in rows:
                store.upsert(r["path"], title=r["title"], body=r["body"], tags=r.get("tags") or [],
                             topic=r.get("topic"), doc_type=r.get("doc_type"),
                             created=r.get("created"), updated=r.get("updated"))
            self.stores[kb] = store
            self.meta[kb] = {p: (d.topic, d.doc_type) for p in store.paths()
                             if (d := store.get(p)) is not None}
        save_cache(embedder)

    def _prefill(self, docs: dict[str, list[dict[str, Any]]]) -> None:
        # One batched embedding pass for what the stores will ask for (and the
        # plain dense input), instead of one model call per upsert.
        if not hasattr(self.embedder, "cache"):
            return
        from kbstore.embed import embedding_text

        texts = [t for rows in docs.values() for r in rows
                 for t in (embedding_text(r["title"], r.get("tags") or [], r["body"]),
                           plain_text(r))]
        self.embedder.embed_documents(texts)

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


def plain_text(row: dict[str, Any]) -> str:
    return f"{row['title']}. {row['body']}"


@dataclass
class IsolationCheck:
    queries: int = 0
    violations: int = 0
    examples: list[str] = field(default_factory=list)


def kbstore_rank(store: Any, spec: KbstoreSpec, query: dict[str, Any], overrides: dict[str, Any],
                 check: IsolationCheck | None = None, **extra: Any) -> list[str]:
    """One query through KnowledgeStore.search. ``overrides`` (from --set) go
    under the system's own settings, which win for the keys they name."""
    settings = {**overrides, **spec.settings, **extra}
    hits = store.search(query["text"], limit=DEPTH, now=query.get("now"),
                        topic=query.get("topic"), explain=spec.only is not None, **settings)
    if spec.only is None:
        return [h.path for h in hits]
    kept = [h for h in hits if h.explain["ranks"].get(spec.only) is not None]
    if check is not None:
        check.queries += 1
        problem = isolation_problem(hits, kept, spec.only)
        if problem:
            check.violations += 1
            if len(check.examples) < 3:
                check.examples.append(f"{query['id']}: {problem}")
    return [h.path for h in kept]


def isolation_problem(hits: Sequence[Any], kept: Sequence[Any], only: str) -> str:
    """Why the other retrievers still count, or '' when only ``only`` does:
    every other fusion contribution is 0, hits without the retriever score 0,
    and the kept hits follow the retriever's own ranks."""
    for h in hits:
        others = {k: v for k, v in (h.explain.get("rrf") or {}).items()
                  if k != only and v not in (None, 0, 0.0)}
        if others:
            return f"{h.path} gets {others} from other retrievers"
        if h.explain["ranks"].get(only) is None and h.score > 0:
            return f"{h.path} scores {h.score} without the {only} retriever"
    ranks = [h.explain["ranks"][only] for h in kept]
    if ranks != sorted(ranks):
        return f"kept hits are not in {only} rank order: {ranks[:10]}"
    return ""


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class PlainBM25:
    """An in-memory FTS5 table (porter) per kb over title, tags, body; the
    query is an OR of every quoted word (repeats and stopwords kept)."""

    def __init__(self, docs: dict[str, list[dict[str, Any]]],
                 meta: dict[str, dict[str, tuple[str, str]]]) -> None:
        import sqlean

        self.conn = sqlean.connect(":memory:")
        self.conn.execute("CREATE VIRTUAL TABLE t USING fts5(kb UNINDEXED, topic UNINDEXED, "
                          "title, tags, body, tokenize='porter unicode61 remove_diacritics 2')")
        self.paths: list[str] = []
        rows = []
        for kb, items in docs.items():
            for r in items:
                rows.append((len(self.paths), kb, meta[kb][r["path"]][0], r["title"],
                             " ".join(r.get("tags") or []), r["body"]))
                self.paths.append(r["path"])
        self.conn.executemany("INSERT INTO t (rowid, kb, topic, title, tags, body) "
                              "VALUES (?, ?, ?, ?, ?, ?)", rows)

    def rank(self, query: dict[str, Any]) -> list[str]:
        terms = _WORD.findall(query["text"].lower())
        if not terms:
            return []
        expr = " OR ".join('"' + t + '"' for t in terms)
        rows = self.conn.execute(
            "SELECT rowid FROM t WHERE t MATCH ? AND kb = ? AND (? IS NULL OR topic = ?) "
            "ORDER BY bm25(t), rowid LIMIT ?",
            (expr, query["kb"], query.get("topic"), query.get("topic"), DEPTH)).fetchall()
        return [self.paths[r[0]] for r in rows]


class PlainDense:
    """Exact cosine (numpy) over vectors of 'title. body', per kb."""

    def __init__(self, docs: dict[str, list[dict[str, Any]]],
                 meta: dict[str, dict[str, tuple[str, str]]], embedder: Any) -> None:
        self.embedder = embedder
        self.index: dict[str, tuple[list[str], list[str], np.ndarray]] = {}
        for kb, items in docs.items():
            vecs = np.asarray(embedder.embed_documents([plain_text(r) for r in items]),
                              np.float32)
            self.index[kb] = ([r["path"] for r in items],
                              [meta[kb][r["path"]][0] for r in items], vecs)

    def scored(self, query: dict[str, Any]) -> list[tuple[str, float]]:
        paths, topics, vecs = self.index[query["kb"]]
        qvec = np.asarray(self.embedder.embed_queries([query["text"]])[0], np.float32)
        sims = vecs @ qvec
        order = np.argsort(-sims, kind="stable")
        topic = query.get("topic")
        out = [(paths[i], float(sims[i])) for i in order if topic is None or topics[i] == topic]
        return out[:DEPTH]

    def rank(self, query: dict[str, Any], min_similarity: float | None = None) -> list[str]:
        return [p for p, s in self.scored(query) if min_similarity is None or s >= min_similarity]

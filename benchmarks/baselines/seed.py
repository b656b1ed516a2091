"""Seed design baseline: in-memory FTS5 + npz vectors + frontmatter dict, RRF in Python.

Implemented faithfully to the original plan so kbstore can be compared with it:
every process rebuilds a ``:memory:`` FTS5 index and a frontmatter dict from the
documents and loads the vectors (plus HyPE question vectors) from an ``.npz``
sidecar; a search runs three retrievers (top 20 each) and fuses them with RRF
(k=60), then applies type boosts and journal recency decay.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # before the heavy imports: cold start includes them

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import sqlite3  # noqa: E402
from datetime import datetime, timezone  # noqa: E402

import numpy as np  # noqa: E402

TOP_K = 20  # per retriever
RRF_K = 60
TYPE_BOOST = {"skill": 1.2, "journal": 0.8}
JOURNAL_HALF_LIFE_DAYS = 30  # exp(-0.693 * age / 30) halves every 30 days
Hits = list[tuple[str, float]]  # (doc_id, score), best first


def _terms(query: str) -> list[str]:
    return re.findall(r"\w+", query.lower())


def _parse_when(value: str | datetime) -> datetime:
    dt = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)  # naive dates mean UTC


def write_sidecar(
    path, doc_ids, vectors, content_hashes, hype_vectors, hype_doc_ids, hype_questions
) -> None:
    """Write the vector sidecar. Vectors must already be L2-normalised."""
    vectors = np.asarray(vectors, dtype=np.float32)
    dim = vectors.shape[1]
    # Uncompressed: float32 embeddings are high-entropy and barely compress, while
    # zlib inflation would be paid on every cold start. Strings are stored as
    # fixed-width unicode arrays so np.load never needs allow_pickle.
    np.savez(
        path,
        vectors=vectors,
        doc_ids=np.asarray(doc_ids, dtype=str),
        content_hashes=np.asarray(content_hashes, dtype=str),
        hype_vectors=np.asarray(hype_vectors, dtype=np.float32).reshape(-1, dim),
        hype_doc_ids=np.asarray(hype_doc_ids, dtype=str),
        hype_questions=np.asarray(hype_questions, dtype=str),
    )


def rrf_fuse(ranked_lists: list[list[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion; ranks are 0-based, hence the ``+ 1``."""
    scores: dict[str, float] = {}
    for ranked in ranked_lists:
        for rank, doc_id in enumerate(ranked):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank + 1)
    return scores


class SeedIndex:
    def __init__(self, conn: sqlite3.Connection, meta: dict[str, dict], npz) -> None:
        self.conn = conn
        self.meta = meta  # doc_id -> {title, tags, topic, doc_type, updated}
        self.vectors = npz["vectors"]
        self.content_hashes = npz["content_hashes"]  # unused by search; kept for parity
        self.hype_vectors = npz["hype_vectors"]
        self.hype_questions = npz["hype_questions"]
        doc_ids, hype_doc_ids = npz["doc_ids"], npz["hype_doc_ids"]
        # Map both id arrays onto one integer space so the per-doc max over the doc
        # vector and its HyPE vectors is a vectorised scatter-max, not a Python loop.
        self.ids, inverse = np.unique(np.concatenate([doc_ids, hype_doc_ids]), return_inverse=True)
        self._doc_idx = inverse[: len(doc_ids)]
        self._hype_idx = inverse[len(doc_ids) :]

    @classmethod
    def load(cls, docs: list[dict], npz_path) -> SeedIndex:
        """Cold-start work: build the in-memory FTS5 index and dict, load the npz."""
        conn = sqlite3.connect(":memory:")
        conn.execute(
            "CREATE VIRTUAL TABLE kb_fts USING fts5(doc_id, title, tags, body, tokenize='porter')"
        )
        conn.executemany(
            "INSERT INTO kb_fts (doc_id, title, tags, body) VALUES (?, ?, ?, ?)",
            ((d["doc_id"], d["title"], " ".join(d["tags"]), d["body"]) for d in docs),
        )
        meta = {
            d["doc_id"]: {
                "title": d["title"],
                "title_words": set(_terms(d["title"])),  # precomputed for the scorer
                "tags": {t.lower() for t in d["tags"]},
                "topic": d["topic"],
                "doc_type": d["doc_type"],
                "updated": _parse_when(d["updated"]),
            }
            for d in docs
        }
        with np.load(npz_path) as npz:  # NpzFile is lazy: read every array now
            arrays = {name: npz[name] for name in npz.files}
        return cls(conn, meta, arrays)

    def vector_search(self, query_vec: np.ndarray, top_k: int = TOP_K) -> Hits:
        # Stored vectors are unit length; q is used as given (its norm changes no ranking).
        q = np.asarray(query_vec, dtype=np.float32)
        best = np.full(len(self.ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, self._doc_idx, self.vectors @ q)
        if len(self.hype_vectors):
            np.maximum.at(best, self._hype_idx, self.hype_vectors @ q)
        k = min(top_k, len(best))
        top = np.argpartition(-best, k - 1)[:k] if k else np.empty(0, dtype=int)
        top = top[np.argsort(-best[top], kind="stable")]
        return [(str(self.ids[i]), float(best[i])) for i in top]

    def fts_search(self, query: str, topic: str | None = None, top_k: int = TOP_K) -> Hits:
        terms = _terms(query)
        if not terms:
            return []  # an empty MATCH expression is a syntax error
        match = " OR ".join(f'"{t}"' for t in terms)  # \w+ terms never contain quotes
        sql = "SELECT doc_id, rank FROM kb_fts WHERE kb_fts MATCH ?"
        params: list = [match]
        if topic:  # topic = doc_id path prefix
            prefix = topic.rstrip("/") + "/"
            sql += " AND substr(doc_id, 1, ?) = ?"
            params += [len(prefix), prefix]
        sql += " ORDER BY rank LIMIT ?"
        return [(d, float(r)) for d, r in self.conn.execute(sql, [*params, top_k])]

    def frontmatter_search(self, query: str, topic: str | None = None, top_k: int = TOP_K) -> Hits:
        terms = list(dict.fromkeys(_terms(query)))  # a repeated word counts once
        scored = []
        for doc_id, m in self.meta.items():
            if topic and m["topic"] != topic:
                continue
            score = sum(t in m["tags"] for t in terms) + sum(t in m["title_words"] for t in terms)
            if score > 0:
                scored.append((doc_id, float(score)))
        scored.sort(key=lambda x: -x[1])  # stable: ties keep document order
        return scored[:top_k]

    def _boost(self, scores: dict[str, float], now: datetime) -> dict[str, float]:
        out = {}
        for doc_id, s in scores.items():
            m = self.meta.get(doc_id)
            if m is not None:  # a vector without a document gets no boost
                s *= TYPE_BOOST.get(m["doc_type"], 1.0)
                if m["doc_type"] == "journal":
                    age_days = max(0.0, (now - m["updated"]).total_seconds() / 86400)
                    s *= math.exp(-0.693 * age_days / JOURNAL_HALF_LIFE_DAYS)
            out[doc_id] = s
        return out

    def search(
        self,
        query: str,
        query_vec: np.ndarray,
        topic: str | None = None,
        limit: int = 10,
        now: datetime | str | None = None,
    ) -> Hits:
        # As in the plan, the topic filter applies to FTS and frontmatter only; the
        # vector retriever is unfiltered.
        now = _parse_when(now) if now is not None else datetime.now(timezone.utc)
        lists = [
            [d for d, _ in self.vector_search(query_vec, TOP_K)],
            [d for d, _ in self.fts_search(query, topic, TOP_K)],
            [d for d, _ in self.frontmatter_search(query, topic, TOP_K)],
        ]
        scores = self._boost(rrf_fuse(lists), now)
        return sorted(scores.items(), key=lambda x: -x[1])[:limit]


def main(argv: list[str] | None = None) -> None:
    """Cold start to first result, timed from before the numpy/sqlite3 imports.

    Interpreter startup precedes the timer (time the process externally to add it)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", required=True, help="JSONL, one document per line")
    ap.add_argument("--npz", required=True, help="vector sidecar from write_sidecar")
    ap.add_argument("--query", required=True)
    ap.add_argument("--qvec", required=True, help=".npy query embedding")
    ap.add_argument("--topic")
    ap.add_argument("--now", help="ISO time for journal decay (default: now)")
    args = ap.parse_args(argv)
    with open(args.docs, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f if line.strip()]
    index = SeedIndex.load(docs, args.npz)
    results = index.search(args.query, np.load(args.qvec), topic=args.topic, now=args.now)
    seconds = time.perf_counter() - _T0
    print(json.dumps({"first_result": results[0][0] if results else None, "seconds": seconds}))


def selfcheck() -> None:
    """Tiny smoke test on 50 synthetic documents with random vectors."""
    import tempfile
    from pathlib import Path

    rng = np.random.default_rng(0)
    n, dim = 50, 32
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    types = {5: "skill", 9: "journal"}  # every other doc is a note
    words = {3: " zebrafish", 5: " quokka", 9: " wombat"}  # each word in one doc only
    ids = [f"topic{i % 3}/doc-{i:02d}.md" for i in range(n)]
    docs = [
        dict(doc_id=ids[i], title=f"Document {i}", tags=[f"tag{i % 5}"], topic=f"topic{i % 3}",
             doc_type=types.get(i, "note"), updated="2024-01-01",
             body="common filler words" + words.get(i, ""))
        for i in range(n)
    ]  # fmt: skip
    hype = vecs[:4] * -1  # HyPE vectors must not disturb the doc-7 check below
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "seed.npz"
        write_sidecar(path, ids, vecs, ids, hype, ids[:4], ["what is it?"] * 4)
        index = SeedIndex.load(docs, path)

    # (a) a query equal to doc 7's vector ranks doc 7 first.
    top = index.vector_search(vecs[7], 20)
    assert top[0][0] == ids[7] and abs(top[0][1] - 1.0) < 1e-5, top[:3]
    # (b) a word only in doc 3's body finds doc 3 (and only doc 3).
    assert [d for d, _ in index.fts_search("zebrafish")] == [ids[3]]
    assert index.fts_search("zebrafish", topic="topic1") == []  # doc 3 is topic0
    # (c) the skill doc's fused score is its raw RRF score x 1.2.
    q, qv = "quokka", vecs[5]
    runs = (index.vector_search(qv), index.fts_search(q), index.frontmatter_search(q))
    raw = rrf_fuse([[d for d, _ in r] for r in runs])
    got = dict(index.search(q, qv, now="2024-01-01"))
    assert math.isclose(got[ids[5]], raw[ids[5]] * 1.2), (got[ids[5]], raw[ids[5]])
    # Journal: x0.8 and halved after 30 days (limit=n: decayed, it leaves the top 10).
    q, qv = "wombat", vecs[9]
    j0 = dict(index.search(q, qv, limit=n, now="2024-01-01"))[ids[9]]
    j30 = dict(index.search(q, qv, limit=n, now="2024-01-31"))[ids[9]]
    assert math.isclose(j30 / j0, math.exp(-0.693), rel_tol=1e-9), (j0, j30)
    # Frontmatter: tag and title-word matches add up.
    assert index.frontmatter_search("tag2 document 7")[0] == (ids[7], 3.0)
    print("seed selfcheck ok")


if __name__ == "__main__":
    main()

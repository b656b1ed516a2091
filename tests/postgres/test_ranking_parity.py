"""Both backends rank the same small corpus the same way, through the public
API: long documents with chunk vectors, HyPE questions (vector and text
lists), dated journal entries, "latest" questions and the confidence floor.
Every list's rank, the similarity, the matched chunk and question, and the
final order and score agree."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kbstore import KnowledgeStore
from tests.conftest_pg import PgKnowledgeBase
from tests.postgres.test_schema import WORDS, RandomEmbedder

NOW = "2026-12-01T00:00:00+00:00"


def _words(seed: str, n: int) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return " ".join(WORDS[digest[i % 32] % 10] + ("" if i < 32 else f"{i // 32}")
                    for i in range(n))


def questions_for(prompt: str) -> str:
    """Three questions of corpus words, decided by the prompt (the document)."""
    return "\n".join(_words(prompt + str(k), 3 + k) + "?" for k in range(3))


def corpus() -> list[dict]:
    docs = []
    for i in range(16):
        long = i % 4 == 0  # past the embedder's window: chunk vectors
        body = _words(f"body{i}", 220 if long else 6 + i % 7)
        journal = i % 3 == 0
        day = f"2026-{10 + i % 2:02d}-{i + 1:02d}"
        docs.append({"path": f"journal/{day}-n{i}.md" if journal else f"domains/n{i}.md",
                     "title": _words(f"title{i}", 2), "body": body,
                     "tags": [WORDS[(i * 3) % 10]],
                     "doc_type": "journal" if journal else "entry",
                     "created": day, "updated": day})
    return docs


QUERIES = ["alpha beta", "gamma delta kappa", "sigma omega", "zeta theta lambda",
           "what happened on 4 October 2026", "alpha in November 2026",
           "the most recent note on beta gamma", "kappa"]


@pytest.fixture
def both(pg_kb: PgKnowledgeBase, tmp_path: Path, fake_llm):
    fake_llm.answer = questions_for
    embedder = RandomEmbedder(dim=16)
    url = f"{pg_kb.url}{'&' if '?' in pg_kb.url else '?'}kb={pg_kb.name}"
    stores = [KnowledgeStore.open(tmp_path / "kb.sqlite", embedder, hype=True),
              KnowledgeStore.open(url, embedder, hype=True)]
    for store in stores:
        for doc in corpus():
            store.upsert(**doc)
    yield stores
    for store in stores:
        store.close()


@pytest.mark.parametrize("settings", [{}, {"fusion": "convex"}, {"min_similarity": 0.3},
                                      {"topic": "journal"}])
def test_both_backends_rank_alike(both, settings) -> None:
    sqlite, postgres = both
    assert sqlite.status()["chunk_vectors"] == postgres.status()["chunk_vectors"] > 0
    assert sqlite.status()["hype_questions"] == postgres.status()["hype_questions"] > 0
    seen = set()
    for text in QUERIES:
        ours = sqlite.search(text, limit=10, explain=True, now=NOW, **settings)
        theirs = postgres.search(text, limit=10, explain=True, now=NOW, **settings)
        assert [h.path for h in ours] == [h.path for h in theirs], text
        for a, b in zip(ours, theirs, strict=True):
            ea, eb = a.explain, b.explain
            assert ea["ranks"] == eb["ranks"], (text, a.path)
            for key in ("matched_vector", "matched_chunk", "matched_question", "latest_rank"):
                assert ea[key] == eb[key], (text, a.path, key)
            assert eb["similarity"] == pytest.approx(ea["similarity"], abs=1e-5)
            assert b.score == pytest.approx(a.score, rel=1e-5)
            assert b.snippet == a.snippet
            seen |= {k for k, rank in ea["ranks"].items() if rank is not None}
            seen |= {"chunk"} if ea["matched_vector"] == "chunk" else set()
            seen |= {"latest"} if ea["latest_rank"] is not None else set()
    if not settings:  # the corpus exercises every list
        assert seen >= {"frontmatter", "fts", "vector", "hype", "hype_fts", "date", "chunk",
                        "latest"}, seen

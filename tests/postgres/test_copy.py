"""``kbstore copy`` between backends: SQLite -> PostgreSQL -> SQLite keeps
every document field, questions, vectors and hash rows; a stopped copy
resumes; another embedder re-embeds instead of reusing vectors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.errors import KBStoreError
from kbstore.model import HYPE_QUESTIONS, PENDING
from kbstore.transfer import copy_store
from tests import pg_server


@pytest.fixture
def source(tmp_path: Path, sample_workspace: Path, fake_llm) -> Path:  # type: ignore[no-untyped-def]
    """The sample knowledge base with HyPE questions (fake LLM), a document
    with extra frontmatter in a non-sorted key order, and one HyPE failure."""
    db = tmp_path / "source.sqlite"
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=True) as store:
        store.import_directory(sample_workspace)
        fake_llm.fail_with = RuntimeError("provider down")
        store.upsert("projects/unasked.md", title="Unasked", body="no questions yet",
                     tags=["later"], updated="2026-11-30")
        store.upsert("projects/last.md", title="Last", body="plain")
        assert len(store) > 30
    return db


def _snapshot(location: str | Path) -> dict:
    """Everything a lossless copy must keep, per path."""
    with KnowledgeStore.open(location, read_only=True, hype=False) as store:
        backend = store.backend
        paths = store.paths()
        stored = backend.stored(paths)
        out = {}
        for path in paths:
            doc = store.get(path)
            assert doc is not None
            vector, questions = backend.vectors_of(path)
            chunks = backend.chunk_vectors_of(path)
            out[path] = {
                "fields": (doc.title, doc.body, doc.tags, doc.topic, doc.doc_type, doc.created,
                           doc.updated, list(doc.extra.items())),
                "content_hash": stored[path].content_hash,
                "derived": {k: (d.content_hash, d.model, d.status)
                            for k, d in stored[path].derived.items()},
                "questions": backend.questions(path),
                "vector": np.frombuffer(vector, dtype=np.float32) if vector else None,
                "question_vectors": [np.frombuffer(q, dtype=np.float32) for q in questions
                                     if q is not None],
                "chunk_vectors": [np.frombuffer(c, dtype=np.float32) for c in chunks
                                  if c is not None],
            }
        return {"docs": out, "fingerprint": backend.fingerprint(),
                "fusion": backend.get_meta("fusion")}


def _assert_same(a: dict, b: dict, *, pending_copied: bool = False) -> None:
    assert a["fingerprint"] == b["fingerprint"] and a["fusion"] == b["fusion"]
    assert sorted(a["docs"]) == sorted(b["docs"])
    for path, want in a["docs"].items():
        have = b["docs"][path]
        assert have["fields"] == want["fields"], path
        assert have["content_hash"] == want["content_hash"], path
        assert have["questions"] == want["questions"], path
        wanted = dict(want["derived"])
        if not pending_copied and wanted.get(HYPE_QUESTIONS, ("", "", ""))[2] == PENDING:
            wanted.pop(HYPE_QUESTIONS)  # a failure is not copied: the next run asks again
        assert have["derived"] == wanted, path
        assert np.allclose(have["vector"], want["vector"], rtol=0, atol=1e-6), path
        assert len(have["question_vectors"]) == len(want["question_vectors"]) > 0 or \
            not want["questions"]
        for x, y in zip(have["question_vectors"], want["question_vectors"], strict=True):
            assert np.allclose(x, y, rtol=0, atol=1e-6), path
        for x, y in zip(have["chunk_vectors"], want["chunk_vectors"], strict=True):
            assert np.allclose(x, y, rtol=0, atol=1e-6), path
    assert sum(len(d["chunk_vectors"]) for d in a["docs"].values()) > 0


def test_sqlite_to_postgres_and_back_is_lossless(source: Path, pg_url: str, tmp_path: Path,
                                                 run_cli) -> None:  # type: ignore[no-untyped-def]
    pg = pg_server.kb_url(pg_url, pg_server.unique_kb_name("copy"))
    back = tmp_path / "back.sqlite"
    original = _snapshot(source)
    assert any(d["questions"] for d in original["docs"].values())
    assert any(d["fields"][7] for d in original["docs"].values())  # extra frontmatter

    there = run_cli("copy", source, pg)
    assert there.exit_code == 0, there.output
    assert "embedded 0 document(s) and 0 chunk(s) with fake" in there.output
    assert re.search(r"and [1-9][0-9]* chunk vectors", there.output), there.output
    _assert_same(original, _snapshot(pg))

    again = run_cli("copy", pg, back, "--json")
    assert again.exit_code == 0, again.output
    _assert_same(original, _snapshot(back))
    # The same searches rank the same documents first on all three.
    for query in ("sourdough starter feeding", "sqlite full text search"):
        firsts = []
        for location in (source, pg, back):
            with KnowledgeStore.open(location, read_only=True, hype=False) as store:
                firsts.append(store.search(query, limit=1)[0].path)
        assert len(set(firsts)) == 1, (query, firsts)


def test_a_stopped_copy_resumes_without_embedding_again(source: Path, pg_url: str) -> None:
    pg = pg_server.kb_url(pg_url, pg_server.unique_kb_name("resume"))
    total = len(_snapshot(source)["docs"])
    copied: list[int] = []

    def stop_after_two_batches(n: int) -> None:
        copied.append(n)
        if len(copied) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_store(source, pg, batch_size=8, progress=stop_after_two_batches)
    with KnowledgeStore.open(pg, read_only=True, hype=False) as store:
        assert len(store) == 16  # two whole batches, each one transaction
    seen: list[int] = []
    report = copy_store(source, pg, batch_size=8, progress=seen.append)
    assert sum(seen) == total == report.documents
    w = report.jsonl.write
    assert (w.added, w.updated, w.unchanged) == (total - 16, 0, 16)
    assert report.jsonl.embedded == 0
    _assert_same(_snapshot(source), _snapshot(pg))
    # An update on the source and a document only in the destination.
    with KnowledgeStore.open(source, FakeEmbedder(64), hype=False) as store:
        store.upsert("projects/last.md", title="Last", body="plain, edited")
    with KnowledgeStore.open(pg, hype=False) as store:
        store.upsert("projects/only-here.md", title="Only here", body="not in the source")
    report = copy_store(source, pg)
    # The source's new vector for it travels too: still nothing embedded.
    assert (report.jsonl.write.updated, report.jsonl.reused_vectors,
            report.jsonl.embedded) == (1, 1, 0)
    assert report.extra_in_destination == ["projects/only-here.md"]
    report = copy_store(source, pg, prune=True)
    assert report.pruned == 1 and report.jsonl.write.unchanged == total
    _assert_same(_snapshot(source), _snapshot(pg))


def test_another_embedder_embeds_instead_of_reusing(source: Path, pg_url: str) -> None:
    pg = pg_server.kb_url(pg_url, pg_server.unique_kb_name("other"))
    report = copy_store(source, pg, embedder=FakeEmbedder(32))
    total = report.documents
    assert report.jsonl.reused_vectors == 0 and report.jsonl.embedded == total
    assert report.jsonl.fingerprint_mismatch == total
    copied = _snapshot(pg)
    assert copied["fingerprint"]["dim"] == 32
    assert all(len(d["vector"]) == 32 for d in copied["docs"].values())
    # Questions are text: they are kept (and embedded with the new model).
    original = _snapshot(source)
    assert {p: d["questions"] for p, d in copied["docs"].items()} == \
        {p: d["questions"] for p, d in original["docs"].items()}


def test_copy_refuses_the_same_location(source: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KBStoreError, match="same knowledge base"):
        copy_store(source, source)
    result = run_cli("copy", source, str(source))
    assert result.exit_code == 1 and "same knowledge base" in result.output + result.stderr

"""Several batches in one transaction (kbstore/writer.py, _Group): an import
whose batches are produced quickly applies up to GROUP_DOCS documents in ONE
transaction. The file must hold exactly the rows that one transaction per
batch writes, a slow batch must still commit on its own, a path met twice
must end at its last version, progress must count committed documents only,
and vec0's sign bits (now packed in numpy) must be vec_quantize_binary's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kbstore.writer as writer_module
from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite.vectors import sign_bits
from kbstore.doctor import diagnose
from kbstore.documents import make_document

from .util import raw

LONG_BODY = " ".join(f"word{i} filler text" for i in range(400))  # chunked


def _docs(n: int, version: str = "v1") -> list[Any]:
    docs = [make_document(f"knowledge/domains/d{i:03d}.md", title=f"Doc {i} {version}",
                          body=f"Body of document {i}, {version}. Topic {i % 7}.",
                          tags=["alpha", f"t{i % 5}"]) for i in range(n)]
    docs.append(make_document("knowledge/projects/long.md", title=f"Long {version}",
                              body=LONG_BODY))
    return docs


def _rows(db: Path) -> dict[str, list[Any]]:
    """Every row an import writes, table by table (made_at aside: a clock)."""
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        conn = raw(store)
        queries = {
            "documents": "SELECT * FROM documents ORDER BY id",
            "vector_data": "SELECT * FROM vector_data ORDER BY vector_id",
            "vectors": "SELECT vector_id, kind, embedding_bits, doc_id, topic, doc_type "
                       "FROM vectors ORDER BY vector_id",
            "hype_questions": "SELECT * FROM hype_questions ORDER BY doc_id, position",
            "questions_fts": "SELECT rowid, questions FROM questions_fts ORDER BY rowid",
            "derived": "SELECT doc_id, kind, content_hash, model, status, error FROM derived "
                       "ORDER BY doc_id, kind",
            "document_tags": "SELECT * FROM document_tags ORDER BY doc_id, tag",
            "document_chunks": "SELECT * FROM document_chunks ORDER BY doc_id, position",
            # the FTS5 index itself: every (term, row, column, offset) it holds
            "documents_fts": "SELECT term, doc, col, offset FROM fts_vocab ORDER BY 1, 2, 3, 4",
        }
        conn.execute("CREATE VIRTUAL TABLE temp.fts_vocab USING fts5vocab(main, "
                     "'documents_fts', 'instance')")
        out = {name: [tuple(r) for r in conn.execute(sql)] for name, sql in queries.items()}
        conn.execute("DROP TABLE temp.fts_vocab")
        out["search"] = [(h.path, round(h.score, 9)) for q in ("document 12 topic", "filler")
                         for h in store.search(q, limit=10)]
        return out


def _import(db: Path, docs: list[Any], batch_size: int) -> int:
    """upsert_many with HyPE; returns the COMMITs it made."""
    commits = [0]
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=True) as store:
        raw(store).set_trace_callback(
            lambda sql: commits.__setitem__(0, commits[0] + (sql.strip().upper() == "COMMIT")))
        report = store.upsert_many(docs, batch_size=batch_size)
        raw(store).set_trace_callback(None)
        # every input counted once (a path met again in a later batch: twice)
        assert report.added + report.updated + report.unchanged == len(docs)
        assert diagnose(store).ok
    return commits[0]


def test_quick_batches_share_one_transaction_and_write_the_same_rows(
        tmp_path: Path, fake_llm, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    fake_llm.answer = lambda prompt: "What is it?\nWhy does it matter?"
    docs = _docs(120)  # + 1 long document: 121, in batches of 16 -> 8 batches
    grouped = _import(tmp_path / "grouped.sqlite", docs, batch_size=16)
    monkeypatch.setattr(writer_module, "GROUP_DOCS", 1)  # every batch alone, as before
    alone = _import(tmp_path / "alone.sqlite", docs, batch_size=16)
    assert grouped == 1 and alone == 8
    a, b = _rows(tmp_path / "grouped.sqlite"), _rows(tmp_path / "alone.sqlite")
    assert len(a["vectors"]) > 121 * 3 and a["document_chunks"] and a["documents_fts"]
    for table in a:
        assert a[table] == b[table], table
    # An update of every document, grouped, then alone: the same again.
    monkeypatch.setattr(writer_module, "GROUP_DOCS", 512)
    assert _import(tmp_path / "grouped.sqlite", _docs(120, "v2"), batch_size=16) == 1
    monkeypatch.setattr(writer_module, "GROUP_DOCS", 1)
    assert _import(tmp_path / "alone.sqlite", _docs(120, "v2"), batch_size=16) == 8
    a, b = _rows(tmp_path / "grouped.sqlite"), _rows(tmp_path / "alone.sqlite")
    assert any("v2" in str(row) for row in a["documents"])
    for table in a:
        assert a[table] == b[table], table


@pytest.mark.parametrize("bound", ["GROUP_SECONDS", "GROUP_BYTES"])
def test_a_slow_or_large_batch_commits_on_its_own(
        tmp_path: Path, fake_llm, monkeypatch: pytest.MonkeyPatch, bound: str) -> None:  # type: ignore[no-untyped-def]
    # A bound of 0: every batch took "too long" or holds "too much".
    monkeypatch.setattr(writer_module, bound, 0)
    assert _import(tmp_path / "kb.sqlite", _docs(47), batch_size=16) == 3


def test_a_bounded_group_commits_every_group_docs(
        tmp_path: Path, fake_llm, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(writer_module, "GROUP_DOCS", 40)  # 3 batches of 16 reach 48
    assert _import(tmp_path / "kb.sqlite", _docs(120), batch_size=16) == 3  # 48 + 48 + 25


def test_a_path_in_two_batches_of_one_group_ends_at_its_last_version(
        tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    first, last = _docs(20, "v1"), _docs(20, "v2")
    # d003 and d015 twice, each time in a later batch of the same group
    docs = first[:10] + [last[3]] + first[10:] + [last[15]]
    assert _import(tmp_path / "kb.sqlite", docs, batch_size=6) == 3  # flushed before b2, b4
    with KnowledgeStore.open(tmp_path / "kb.sqlite", FakeEmbedder(64), hype=True) as store:
        assert store.get("knowledge/domains/d003.md").title == "Doc 3 v2"  # type: ignore[union-attr]
        assert store.get("knowledge/domains/d015.md").title == "Doc 15 v2"  # type: ignore[union-attr]
        assert store.get("knowledge/domains/d004.md").title == "Doc 4 v1"  # type: ignore[union-attr]
        # Nothing left to make: the vectors and questions are the last version's.
        report = store.upsert_many(docs[-1:])
        assert (report.added, report.updated, report.unchanged, report.embedded) == (0, 0, 1, 0)
        assert diagnose(store).ok


def test_progress_counts_only_committed_documents(tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "kb.sqlite"
    seen: list[tuple[int, int]] = []
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=True) as store:
        done = [0]

        def progress(k: int) -> None:
            done[0] += k
            with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as other:
                seen.append((done[0], len(other)))  # what another process sees

        store.upsert_many(_docs(99), batch_size=10, progress=progress)
    assert seen[-1] == (100, 100)
    assert all(reported <= committed for reported, committed in seen)


def test_sign_bits_are_vec_quantize_binary(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((50, 64)).astype(np.float32)
    vectors[0] = 0.0
    vectors[1, ::2] = -0.0
    vectors[2, :9] = 0.0
    vectors[3] = np.abs(vectors[3])
    blobs = [v.tobytes() for v in vectors]
    with KnowledgeStore.open(tmp_path / "kb.sqlite", FakeEmbedder(64), hype=False) as store:
        want = [bytes(raw(store).execute("SELECT vec_quantize_binary(?)", (b,)).fetchone()[0])
                for b in blobs]
    assert [bytes(b) for b in sign_bits(blobs)] == want
    assert sign_bits([]) == []

"""The ``derived`` rows of the SQLite file: what made each piece of derived
data, a failed LLM call's reason (redacted), and one transaction for a
document with its questions and vectors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite.pending import PendingRows

from .util import doc_id, raw

PATH = "knowledge/domains/a.md"


def _derived(store: KnowledgeStore, path: str, kind: str) -> tuple | None:  # type: ignore[type-arg]
    return raw(store).execute(
        "SELECT h.content_hash, h.model, h.status, h.error FROM derived AS h "
        "JOIN documents AS d ON d.id = h.doc_id WHERE d.path = ? AND h.kind = ?",
        (path, kind)).fetchone()


def test_a_failed_call_is_recorded_with_its_reason_until_it_succeeds(db_path: Path,
                                                                     fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.answer = lambda prompt: "Here are some questions:\n\n"
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True) as store:
        store.upsert(PATH, title="Alpha", body="Alpha body text.")
        status, error = _derived(store, PATH, "hype_questions")[2:]  # type: ignore[index]
        assert status == "pending" and "HypeError" in error
        assert _derived(store, PATH, "hype_vectors") is None
        fake_llm.answer = lambda prompt: (_ for _ in ()).throw(ConnectionError("LLM unreachable"))
        store.upsert(PATH, title="Alpha", body="Alpha body, edited.")
        status, error = _derived(store, PATH, "hype_questions")[2:]  # type: ignore[index]
        assert status == "pending" and "ConnectionError: LLM unreachable" in error
        fake_llm.answer = lambda prompt: "What is alpha?"
        store.upsert(PATH, title="Alpha", body="Alpha body, edited twice.")
        hq, hv = _derived(store, PATH, "hype_questions"), _derived(store, PATH, "hype_vectors")
        assert hq[2:] == ("ok", None) and hq[1] == "openai/gpt-4o-mini"  # type: ignore[index]
        assert hv[0] == hq[0] and hv[1] == "fake:hashing-bow:64::"  # type: ignore[index]


def test_an_api_key_in_an_llm_error_is_redacted_before_it_is_stored(db_path: Path,
                                                                    fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.fail_with = RuntimeError(
        "missing api_key sk-proj-Zq3xT9vLm2NcR7bW4yHs8KdF1jPa6GtE0uQo5Vi")
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True) as store:
        store.upsert(PATH, title="Alpha", body="Alpha body.")
        error = _derived(store, PATH, "hype_questions")[3]  # type: ignore[index]
    assert "RuntimeError" in error and "Zq3xT9vLm2NcR7bW4yHs8KdF1jPa6GtE0uQo5Vi" not in error


def test_document_and_its_questions_change_in_one_transaction(
        db_path: Path, fake_llm, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    fake_llm.answer = lambda prompt: ("How do I bake bread?" if "bread" in prompt
                                      else "How do I brew tea?")
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True) as store:
        store.upsert(PATH, title="Kitchen", body="All about bread.")
        conn = raw(store)

        def state() -> tuple:  # type: ignore[type-arg]
            return (store.get(PATH).body,  # type: ignore[union-attr]
                    conn.execute("SELECT question FROM hype_questions").fetchall(),
                    conn.execute("SELECT vector_id, embedding FROM vector_data ORDER BY 1"
                                 ).fetchall(),
                    conn.execute("SELECT vector_id FROM vectors ORDER BY 1").fetchall(),
                    conn.execute("SELECT * FROM derived ORDER BY kind").fetchall())

        before = state()
        real_flush = PendingRows.flush

        def failing_flush(self, conn):  # type: ignore[no-untyped-def]
            real_flush(self, conn)  # document, questions, vectors and hash rows written
            raise RuntimeError("disk full")

        with monkeypatch.context() as patched:
            patched.setattr(PendingRows, "flush", failing_flush)
            with pytest.raises(RuntimeError, match="disk full"):
                store.upsert(PATH, title="Kitchen", body="All about tea.")
        # Rolled back together: old body, old questions, old vectors, old hash rows.
        assert state() == before
        assert not conn.in_transaction
        assert store.upsert(PATH, title="Kitchen", body="All about tea.") == "updated"
        assert conn.execute("SELECT question FROM hype_questions").fetchall() == [
            ("How do I brew tea?",)]
        assert doc_id(store, PATH) == 1

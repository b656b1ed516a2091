"""The batched write path (kbstore/backends/sqlite/pending.py): an apply
writes vectors, questions, chunks and hash rows with one executemany per
table. What it writes must be what the row-by-row path wrote: every vector
in vec0 and vector_data, questions in hype_questions and questions_fts, one
hash row per kind -- and a later HyPE run must not touch chunk vectors."""

from __future__ import annotations

from pathlib import Path

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.documents import make_document
from kbstore.hype_jobs import run_hype

from .util import SLOTS, doc_id, raw

LONG_BODY = " ".join(f"word{i} filler text" for i in range(400))  # > 128 words: chunked


def _vector_ids(store: KnowledgeStore, table: str, did: int) -> set[int]:
    return {int(r[0]) for r in raw(store).execute(
        f"SELECT vector_id FROM {table} WHERE doc_id = ?", (did,))}


def test_a_batch_writes_every_row_of_every_document(db_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.answer = lambda prompt: "What is it?\nWhy does it matter?\nWhere is it used?"
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True) as store:
        report = store.upsert_many([
            make_document(f"knowledge/domains/d{i}.md", title=f"Doc {i}", body=f"Body {i}.",
                           tags=["alpha", f"t{i}"]) for i in range(5)])
        assert report.added == 5 and report.hype_generated == 5
        conn = raw(store)
        for i in range(5):
            did = doc_id(store, f"knowledge/domains/d{i}.md")
            expected = {did * SLOTS + s for s in range(4)}  # document + 3 questions
            assert _vector_ids(store, "vector_data", did) == expected
            assert _vector_ids(store, "vectors", did) == expected
            kinds = {r[0] for r in conn.execute("SELECT kind FROM derived WHERE doc_id = ?",
                                                (did,))}
            assert kinds == {"doc_vector", "hype_questions", "hype_vectors"}
            text = conn.execute("SELECT questions FROM questions_fts WHERE rowid = ?",
                                (did,)).fetchone()[0]
            assert text.split("\n") == ["What is it?", "Why does it matter?",
                                        "Where is it used?"]
            tags = {r[0] for r in conn.execute("SELECT tag FROM document_tags WHERE doc_id = ?",
                                               (did,))}
            assert tags == {"alpha", f"t{i}"}
        hits = store.search("why does it matter", limit=5)
        assert hits and hits[0].path.startswith("knowledge/domains/d")


def test_replacing_questions_keeps_the_chunk_vectors(db_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    path = "knowledge/domains/long.md"
    fake_llm.answer = lambda prompt: "What is the first question?"
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True) as store:
        store.upsert(path, title="Long", body=LONG_BODY)
        did = doc_id(store, path)
        chunks = {int(r[0]) for r in raw(store).execute(
            "SELECT vector_id FROM document_chunks WHERE doc_id = ?", (did,))}
        assert len(chunks) >= 2
        assert chunks <= _vector_ids(store, "vectors", did)
        fake_llm.answer = lambda prompt: "What is the second question?\nAnd a third one?"
        run_hype(store, "all")  # questions replaced, content and chunks unchanged
        now = _vector_ids(store, "vectors", did)
        assert chunks <= now and chunks <= _vector_ids(store, "vector_data", did)
        assert {did * SLOTS + 1, did * SLOTS + 2} <= now
        questions = [r[0] for r in raw(store).execute(
            "SELECT question FROM hype_questions WHERE doc_id = ? ORDER BY position", (did,))]
        assert questions == ["What is the second question?", "And a third one?"]


def test_a_new_document_id_vec0_still_holds_is_freed_and_written(db_path: Path) -> None:
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=False) as store:
        store.upsert("knowledge/domains/a.md", title="A", body="Alpha.")
        did = doc_id(store, "knowledge/domains/a.md")
        conn = raw(store)
        # Damage: a vec0 row for the id the next document will get.
        conn.execute("INSERT INTO vectors (vector_id, kind, embedding_bits, doc_id, topic, "
                     "doc_type) SELECT ?, 'doc', vec_quantize_binary(embedding), ?, 'domains', "
                     "'entry' FROM vector_data WHERE vector_id = ?",
                     ((did + 1) * SLOTS, did + 1, did * SLOTS))
        conn.commit()
        store.upsert("knowledge/domains/b.md", title="B", body="Beta.")
        new = doc_id(store, "knowledge/domains/b.md")
        assert new == did + 1
        assert _vector_ids(store, "vectors", new) == {new * SLOTS}
        assert store.search("beta", limit=1)[0].path == "knowledge/domains/b.md"


def test_a_question_text_row_left_for_a_new_id_is_replaced(db_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    """Damage: a questions_fts row for the id the next document gets (the
    schema-v3 trigger deleted before inserting; the batched write must too)."""
    questions = "Which oven bakes rye?\nHow long does rye proof?"
    fake_llm.answer = lambda prompt: questions
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True) as store:
        store.upsert("knowledge/domains/a.md", title="A", body="Alpha.")
        did = doc_id(store, "knowledge/domains/a.md")
        conn = raw(store)
        conn.execute("INSERT INTO questions_fts (rowid, questions) VALUES (?, 'phantom words')",
                     (did + 1,))
        store.upsert("knowledge/domains/b.md", title="B", body="Beta.")
        new = doc_id(store, "knowledge/domains/b.md")
        assert new == did + 1
        assert conn.execute("SELECT questions FROM questions_fts WHERE rowid = ?",
                            (new,)).fetchone()[0] == questions
        assert conn.execute("SELECT count(*) FROM questions_fts WHERE questions_fts MATCH "
                            "'phantom'").fetchone()[0] == 0


def test_vec0_rows_keep_their_order_within_each_partition(db_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    """vec0 rows are inserted grouped by kind (pending.flush -> insert_many);
    within a partition they keep the batch's order, as before the grouping,
    so chunk positions (and KNN ties) do not depend on it."""
    fake_llm.answer = lambda prompt: "What is it?\nWhy does it matter?\nWhere is it used?"
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True) as store:
        for batch in (range(6), range(6, 9)):
            store.upsert_many([make_document(f"knowledge/domains/d{i}.md", title=f"Doc {i}",
                                             body=f"Body {i}.") for i in batch])
        ids = [doc_id(store, f"knowledge/domains/d{i}.md") for i in range(9)]
        placed = raw(store).execute(
            "SELECT c.partition00, r.rowid FROM vectors_rowids r "
            "JOIN vectors_chunks c ON c.chunk_id = r.chunk_id "
            "ORDER BY r.chunk_id, r.chunk_offset").fetchall()
        by_kind: dict[str, list[int]] = {}
        for kind, vid in placed:
            by_kind.setdefault(kind, []).append(int(vid))
        assert by_kind["doc"] == [did * SLOTS for did in ids]
        assert by_kind["hype"] == [did * SLOTS + s for did in ids for s in (1, 2, 3)]

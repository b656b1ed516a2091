"""Where a document's data lives in the SQLite file: vec0 rows (sign bits,
kind partition, topic/doc_type metadata) and their float32 copies at
vector_id = doc_id * 32 + slot, hash rows, questions, tag and FTS rows --
and that a delete, an update or a reembed leaves no row behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore

from .util import SLOTS, doc_id, raw


def _rows_for(store: KnowledgeStore, doc: int, path: str, word: str) -> dict[str, int]:
    conn = raw(store)

    def count(sql: str, *args) -> int:  # type: ignore[no-untyped-def]
        return int(conn.execute(sql, args).fetchone()[0])

    return {
        "documents": count("SELECT count(*) FROM documents WHERE path = ?", path),
        "fts": count("SELECT count(*) FROM documents_fts WHERE documents_fts MATCH ?",
                     f'"{word}"'),
        "titles_fts": count("SELECT count(*) FROM titles_fts WHERE rowid = ?", doc),
        "document_tags": count("SELECT count(*) FROM document_tags WHERE doc_id = ?", doc),
        "vectors": count("SELECT count(*) FROM vectors WHERE doc_id = ?", doc),
        "vector_data": count("SELECT count(*) FROM vector_data WHERE doc_id = ?", doc),
        "derived": count("SELECT count(*) FROM derived WHERE doc_id = ?", doc),
        "hype_questions": count("SELECT count(*) FROM hype_questions WHERE doc_id = ?", doc),
    }


def test_deleting_a_file_removes_it_from_every_table(tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws" / "knowledge"
    for rel, text in {"domains/travel.md": "---\ntitle: Zanzibar trip\ntags: [travel, zanzibar]"
                                           "\n---\nSpice farms on Zanzibar.\n",
                      "domains/bikes.md": "# Bikes\nOil the chain.\n"}.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    with KnowledgeStore.open(tmp_path / "h.sqlite", FakeEmbedder(64), hype=True) as s:
        report = s.import_directory(ws.parent)
        assert report.hype_generated == 2 and fake_llm.calls
        doc = doc_id(s, "domains/travel.md")
        before = _rows_for(s, doc, "domains/travel.md", "zanzibar")
        # document + 3 HyPE questions, each with a vector; 3 kinds of hash rows
        assert before == {"documents": 1, "fts": 1, "titles_fts": 1, "document_tags": 2,
                          "vectors": 4, "vector_data": 4, "derived": 3, "hype_questions": 3}
        (ws / "domains/travel.md").unlink()
        report = s.import_directory(ws.parent)
        assert report.deleted == 1 and report.embedded == 0
        assert _rows_for(s, doc, "domains/travel.md", "zanzibar") == dict.fromkeys(before, 0)
        assert raw(s).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        raw(s).execute("INSERT INTO documents_fts(documents_fts) VALUES('integrity-check')")


def test_store_delete_removes_every_row(store: KnowledgeStore) -> None:
    store.upsert("projects/z.md", title="Zanzibar", body="zanzibar notes", tags=["zanzibar"])
    doc = doc_id(store, "projects/z.md")
    assert _rows_for(store, doc, "projects/z.md", "zanzibar")["vectors"] == 1
    assert store.delete("projects/z.md") is True
    assert set(_rows_for(store, doc, "projects/z.md", "zanzibar").values()) == {0}


@pytest.mark.parametrize(("path", "topic", "doc_type"), [
    ("projects/picobot.md", "projects", "entry"),
    ("journal/2026-02-01-x.md", "journal", "journal"),
    ("skills/web/SKILL.md", "skills", "skill"),
    ("loose.md", "general", "entry"),
])
def test_vec0_metadata_follows_the_document(store: KnowledgeStore, path: str, topic: str,
                                            doc_type: str) -> None:
    """topic and doc_type are vec0 metadata columns, so a topic filter runs
    inside the KNN; a document that moves topic takes its vectors along."""
    store.upsert(path, title="T", body="b")

    def vec_row() -> tuple[str, str, str]:
        return tuple(raw(store).execute(  # type: ignore[return-value]
            "SELECT kind, topic, doc_type FROM vectors WHERE vector_id = ?",
            (doc_id(store, path) * SLOTS,)).fetchone())

    assert vec_row() == ("doc", topic, doc_type)
    store.upsert(path, title="T", body="b", topic="domains", doc_type="entry")
    assert vec_row() == ("doc", "domains", "entry")


def test_question_vectors_take_slots_after_the_document_vector(tmp_path: Path,
                                                               fake_llm) -> None:  # type: ignore[no-untyped-def]
    path = "domains/a.md"
    fake_llm.answer = lambda prompt: (
        "How do I bake bread?\nWhat flour is best?\nWhen should I proof?"
        if "bread" in prompt else "How do I brew tea?")
    with KnowledgeStore.open(tmp_path / "q.sqlite", FakeEmbedder(64), hype=True) as s:
        s.upsert(path, title="Kitchen", body="All about bread.")
        doc = doc_id(s, path)

        def ids(kind: str) -> list[int]:
            return [r[0] for r in raw(s).execute(
                "SELECT vector_id FROM vectors WHERE doc_id = ? AND kind = ? ORDER BY 1",
                (doc, kind))]

        assert ids("doc") == [doc * SLOTS]
        assert ids("hype") == [doc * SLOTS + 1, doc * SLOTS + 2, doc * SLOTS + 3]
        s.upsert(path, title="Kitchen", body="All about tea.")
        assert ids("hype") == [doc * SLOTS + 1]
        assert [r[0] for r in raw(s).execute(
            "SELECT vector_id FROM vector_data WHERE doc_id = ? ORDER BY 1", (doc,))] == \
            [doc * SLOTS, doc * SLOTS + 1]
        hq, hv = (raw(s).execute("SELECT content_hash FROM derived WHERE doc_id = ? AND kind = ?",
                                 (doc, kind)).fetchone()[0]
                  for kind in ("hype_questions", "hype_vectors"))
        assert hq == hv  # both describe the new content
        assert raw(s).execute("SELECT count(*) FROM hype_questions WHERE question LIKE "
                              "'%bread%' OR question LIKE '%flour%'").fetchone()[0] == 0


def test_reembed_rebuilds_vec0_for_the_new_dimension(store: KnowledgeStore) -> None:
    store.upsert("domains/a.md", title="Apples", body="apple orchard harvest")
    store.upsert("domains/b.md", title="Boats", body="sailing boat harbour")
    assert store.reembed(FakeEmbedder(dim=128)) == 2
    conn = raw(store)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()[0]
    assert "bit[128]" in sql
    assert conn.execute("SELECT DISTINCT length(embedding) FROM vector_data").fetchall() == [
        (128 * 4,)]
    assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == 2
    # the staging table is gone and every hash row names the new model
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'vector_data_next'"
                        ).fetchone()[0] == 0
    assert {r[0] for r in conn.execute("SELECT DISTINCT model FROM derived")} == {
        "fake:hashing-bow:128::"}

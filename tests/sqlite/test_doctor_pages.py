"""kbstore doctor reads a SQLite file's documents a page at a time: damage on
every page, below the first document's id and above the last one is found
exactly as a single page finds it, and --fix repairs all of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite import doctor_rows
from kbstore.doctor import diagnose, fix

from .util import SLOTS, doc_id, raw

QUESTIONS = "How do I deploy?\nWhat breaks a release?\nWhen should I roll back?"
PATHS = [f"domains/note-{n:02d}.md" for n in range(12)]


def _found(store: KnowledgeStore) -> dict[str, tuple[int, list[Any]]]:
    return {c.name: (c.count, c.sample) for c in diagnose(store).checks if c.count}


def _damage(store: KnowledgeStore) -> dict[str, list[int]]:
    """Damage on the first, middle and last pages (PAGE = 3, 12 documents),
    and rows naming ids below and above every document's."""
    conn = raw(store)
    ids = [doc_id(store, p) for p in PATHS]
    conn.execute("DELETE FROM vectors WHERE vector_id = ?", (ids[1] * SLOTS,))
    conn.execute("DELETE FROM vector_data WHERE vector_id = ?", (ids[7] * SLOTS,))
    conn.execute("DELETE FROM vectors WHERE vector_id = ?", (ids[10] * SLOTS + 2,))
    conn.execute("UPDATE documents SET body = 'rewritten by hand' WHERE id = ?", (ids[11],))
    conn.execute("DELETE FROM document_tags WHERE doc_id = ?", (ids[4],))
    conn.execute("UPDATE hype_questions SET question = 'Which zeppelin?' "
                 "WHERE doc_id = ? AND position = 2", (ids[8],))
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        # its plain rows go with it (a trigger), its vec0 rows stay behind
        conn.execute("DELETE FROM documents WHERE id = ?", (ids[5],))
        conn.execute("INSERT INTO vector_data (vector_id, doc_id, embedding) VALUES (0, 0, ?)",
                     (bytes(64 * 4),))
        conn.execute("INSERT INTO hype_questions VALUES (?, 1, 'whose question?')",
                     (ids[-1] + 50,))
        for ghost in (0, ids[-1] + 50):
            conn.execute("INSERT INTO derived (doc_id, kind, content_hash, model) "
                         "VALUES (?, 'doc_vector', 'x', 'y')", (ghost,))
            conn.execute("INSERT INTO document_tags (tag, doc_id) VALUES ('ghost', ?)", (ghost,))
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
    ghosts = [0, ids[-1] + 50]
    return {
        "documents_missing_vectors": sorted([ids[1], ids[7]]),
        "questions_missing_vectors": [ids[10]],
        "stale_vectors": [ids[11]],
        "stale_questions": [ids[11]],
        "tag_rows": sorted([ids[4], *ghosts]),
        "questions_fts_text": [ids[8]],
        "orphan_derived": ghosts,
        "orphan_questions": [ids[-1] + 50],
        "orphan_vectors": [0, ids[5]],
        "invalid_vectors": [0],  # the ghost vector is all zeros
    }


@pytest.fixture
def store(db_path: Path, fake_llm: Any) -> KnowledgeStore:
    fake_llm.answer = lambda prompt: QUESTIONS
    kb = KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True)
    for n, path in enumerate(PATHS):
        kb.upsert(path, title=f"Note {n}", body=f"note number {n} about topic{n % 4}",
                  tags=[f"tag{n}"])
    return kb


def test_damage_on_every_page_is_found_as_one_page_finds_it(
        store: KnowledgeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _damage(store)
    whole = _found(store)  # 12 documents < PAGE: one page
    monkeypatch.setattr(doctor_rows, "PAGE", 3)
    paged = _found(store)
    assert paged == whole
    for name, ids in expected.items():
        assert paged.get(name) == (len(ids), ids[:doctor_rows.SAMPLE]), (name, paged)
    assert set(paged) == set(expected)


def test_fix_repairs_every_page_and_keeps_the_text(
        store: KnowledgeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_rows, "PAGE", 3)
    text = {p: raw(store).execute("SELECT title, body FROM documents WHERE path = ?",
                                  (p,)).fetchone() for p in PATHS}
    _damage(store)
    report = fix(store, embedder=FakeEmbedder(64))
    assert report.ok, [(c.name, c.count, c.sample) for c in report.problems]
    left = {p: raw(store).execute("SELECT title, body FROM documents WHERE path = ?",
                                  (p,)).fetchone() for p in PATHS}
    deleted = {p for p, row in left.items() if row is None}
    assert deleted == {PATHS[5]}  # the one deleted by hand
    assert all(tuple(left[p]) == tuple(text[p]) for p in PATHS if p not in deleted
               and p != PATHS[11])
    assert tuple(left[PATHS[11]]) == ("Note 11", "rewritten by hand")
    assert [h.path for h in store.search("topic3", limit=12)
            if h.path in (PATHS[7], PATHS[11])] != []  # re-embedded documents are found


def test_pages_cover_every_id_once(store: KnowledgeStore,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_rows, "PAGE", 5)
    ranges = [(lo, hi, sorted(docs)) for lo, hi, docs in doctor_rows.pages(raw(store))]
    assert ranges[0][0] == doctor_rows.LOWEST and ranges[-1][1] == doctor_rows.HIGHEST
    assert all(prev[1] + 1 == nxt[0] for prev, nxt in zip(ranges, ranges[1:], strict=False))
    ids = [d for _, _, page in ranges for d in page]
    assert ids == sorted(doc_id(store, p) for p in PATHS)
    assert [len(page) for _, _, page in ranges] == [5, 5, 2]


def test_fix_refills_question_text_a_page_at_a_time(
        store: KnowledgeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """--fix used to read every HyPE question of the file into one list to
    refill questions_fts; it now reads one page of documents' questions at a
    time, and every page's damage is repaired."""
    monkeypatch.setattr(doctor_rows, "PAGE", 3)
    conn = raw(store)
    ids = [doc_id(store, p) for p in PATHS]
    for n in (0, 4, 8, 11):  # pages 1, 2, 3 and 4
        conn.execute("UPDATE questions_fts SET questions = 'which zeppelin?' WHERE rowid = ?",
                     (ids[n],))
    damaged = sorted(ids[n] for n in (0, 4, 8, 11))
    assert _found(store)["questions_fts_text"] == (4, damaged[:doctor_rows.SAMPLE])
    read: list[set[int]] = []
    question_texts = doctor_rows.question_texts

    def counted(questions: list[tuple[int, int, str]]) -> list[tuple[int, str]]:
        read.append({d for d, _, _ in questions})
        return question_texts(questions)

    monkeypatch.setattr(doctor_rows, "question_texts", counted)
    store.backend.repair({"questions_fts_text"}, {})
    assert read and max(len(docs) for docs in read) <= 3
    assert set().union(*read) == set(ids)
    assert "questions_fts_text" not in _found(store)
    rows = dict(conn.execute("SELECT rowid, questions FROM questions_fts").fetchall())
    assert rows == {d: QUESTIONS for d in ids}

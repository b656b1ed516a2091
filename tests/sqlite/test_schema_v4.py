"""Schema v4: a file written by schema v3 (its questions_fts, FTS and tag
rows made by triggers) is upgraded with its rows intact, and from then on
the backend writes those rows itself, once per document, with the same
values the triggers wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.reliability_path_inputs import make_v3_file
from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.doctor import diagnose
from kbstore.hype_jobs import run_hype

from .util import connect_file, doc_id, raw

V3_TRIGGERS = {"hype_questions_fts_ai", "hype_questions_fts_ad", "hype_questions_fts_au",
               "documents_fts_ai", "titles_fts_ai", "documents_tags_ai"}
# path, title, tags, body, HyPE questions
V3_DOCUMENTS = [
    ("domains/kiln.md", "Firing a kiln", ["Ceramics", " glaze "],
     "Stoneware is fired to cone six; bisque first, then the glaze firing.",
     ["Which cone is stoneware fired to?", "Why bisque before glazing?"]),
    ("projects/loom.md", "Warping a loom", ["weaving"],
     "Wind the warp on the back beam under even tension before threading heddles.",
     ["How do I keep warp tension even?", "What comes before threading heddles?",
      "Where does the warp get wound?"]),
]
LLM_MODEL = "fake/llm"
NEW_QUESTIONS = "Which heddle hook fits?\nHow long is the warp?"


def _make_v3_file(path: Path) -> None:
    make_v3_file(path, V3_DOCUMENTS, LLM_MODEL)


def _index_rows(conn) -> dict[str, list]:  # type: ignore[no-untyped-def]
    return {
        "questions_fts": conn.execute("SELECT rowid, questions FROM questions_fts "
                                      "ORDER BY rowid").fetchall(),
        "documents_fts": conn.execute("SELECT rowid FROM documents_fts_docsize "
                                      "ORDER BY 1").fetchall(),
        "document_tags": conn.execute("SELECT tag, doc_id FROM document_tags "
                                      "ORDER BY 1, 2").fetchall(),
    }


def test_a_v3_file_is_upgraded_with_its_index_rows_intact(db_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    _make_v3_file(db_path)
    conn = connect_file(db_path)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master "
                                            "WHERE type = 'trigger'")}
        assert V3_TRIGGERS <= names  # the triggers really made the v3 rows
        before = _index_rows(conn)
    finally:
        conn.close()
    assert [r[1] for r in before["questions_fts"]] == [
        "\n".join(d[4]) for d in V3_DOCUMENTS]
    assert ("ceramics", 1) in before["document_tags"] and ("glaze", 1) in before["document_tags"]

    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True,
                             hype_model=LLM_MODEL) as store:
        conn = raw(store)
        assert store.status()["schema_version"] == 5
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master "
                                               "WHERE type = 'trigger'")}
        assert not triggers & V3_TRIGGERS
        assert _index_rows(conn) == before
        assert diagnose(store).ok
        hit = store.search("warp tension even", limit=1, explain=True)[0]
        assert hit.path == "projects/loom.md" and hit.explain["ranks"]["hype_fts"] == 1

        # New questions replace the old text in questions_fts (no trigger now).
        fake_llm.answer = lambda prompt: NEW_QUESTIONS
        run_hype(store, "all")
        loom = doc_id(store, "projects/loom.md")
        assert conn.execute("SELECT questions FROM questions_fts WHERE rowid = ?",
                            (loom,)).fetchone()[0] == NEW_QUESTIONS
        assert conn.execute("SELECT count(*) FROM questions_fts WHERE questions_fts MATCH "
                            "'tension'").fetchone()[0] == 0

        # A new document gets the FTS and tag rows the v3 triggers made.
        store.upsert("domains/dye.md", title="Indigo dye vat", body="Keep the vat reduced.",
                     tags=["Dyeing", "  "])
        dye = doc_id(store, "domains/dye.md")
        assert conn.execute("SELECT tag FROM document_tags WHERE doc_id = ?",
                            (dye,)).fetchall() == [("dyeing",)]
        assert conn.execute("SELECT rowid FROM titles_fts WHERE titles_fts MATCH 'indigo'"
                            ).fetchall() == [(dye,)]
        assert store.search("reduced vat", limit=1)[0].path == "domains/dye.md"
        assert conn.execute("SELECT questions FROM questions_fts WHERE rowid = ?",
                            (dye,)).fetchone()[0] == NEW_QUESTIONS

        # Deleting a document still removes its question text.
        assert store.delete("projects/loom.md")
        assert conn.execute("SELECT count(*) FROM questions_fts WHERE rowid = ?",
                            (loom,)).fetchone()[0] == 0
        assert diagnose(store).ok
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("tags", [["Ceramics", " glaze ", "  ", "GLAZE"], ["Ärger", "ÄRGER"],
                                  ["\tTab", "Straße", "ÉCOLE", ""], []])
def test_tag_rows_use_the_query_words_rule(tags: list[str]) -> None:
    """One row per distinct non-blank tag, trimmed and lower-cased with the
    rule the query's words get (full Unicode: SQLite's lower() would leave
    "Ä" and never meet the query word "ärger")."""
    from kbstore.backends.sqlite.pending import tag_rows
    from kbstore.model import tag_key
    from kbstore.query import query_terms

    rows = tag_rows(7, tags)
    assert len(rows) == len({r[0] for r in rows}) and all(r[1] == 7 for r in rows)
    assert {r[0] for r in rows} == {t.strip().lower() for t in tags if t.strip()}
    for tag in tags:  # a one-word tag's key is the word the query analysis makes of it
        if tag.strip().isalpha():
            assert query_terms(tag) == [tag_key(tag)]


def test_read_commands_work_on_a_v3_file_and_leave_it_as_it_is(db_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    """After an upgrade of kbstore, search/status/doctor/export still work on a
    v3 file (v4 changed only how writes make the index rows), say that a
    migration is pending, and do not migrate or modify it; a write migrates."""
    from .util import file_state

    _make_v3_file(db_path)
    before = file_state(db_path)
    with KnowledgeStore.open(db_path, read_only=True) as store:
        assert store.status()["schema_version"] == 3
        assert store.status()["pending_migrations"] == ["0004_index_rows_written_per_batch",
                                                        "0005_sign_bits_index"]
        assert store.search("stoneware cone", limit=1)[0].path == "domains/kiln.md"
        assert store.search("ceramics", limit=1)[0].path == "domains/kiln.md"  # a tag
        report = diagnose(store)
        assert report.ok, [c.to_dict() for c in report.problems]
    text = run_cli("status", "--db", db_path).output
    assert "schema version  3 (2 migration(s) pending: `kbstore migrate`" in text, text
    hits = run_cli("search", "--db", db_path, "warp tension", "--json")
    assert hits.exit_code == 0 and json.loads(hits.output.splitlines()[0])["path"] == \
        "projects/loom.md"
    assert run_cli("doctor", "--db", db_path).exit_code == 0
    assert file_state(db_path) == before
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=False) as store:
        assert store.status()["schema_version"] == 5 and not store.status()["pending_migrations"]

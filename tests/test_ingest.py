"""Ingest: which files are documents, topic/doc_type from the path, path
validation, and import reconciliation by content hash (embedding counts,
deletion from every table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbstore import FakeEmbedder, InvalidDocumentError, KnowledgeStore
from kbstore.ingest import derive_topic_type, make_document, scan_workspace


def write(root: Path, rel: str, text: str) -> Path:
    file = root / rel
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, encoding="utf-8")
    return file


def entry(title: str, body: str, tags: str = "[]", extra: str = "") -> str:
    return f"---\ntitle: {title}\ntags: {tags}\n{extra}---\n{body}\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws, "knowledge/projects/garden.md", entry("Garden", "Water the tomatoes daily.",
                                                    "[garden]"))
    write(ws, "knowledge/domains/bikes.md", entry("Bikes", "Oil the chain monthly."))
    write(ws, "knowledge/journal/2026-01-05-walk.md", "# Walk\n\nA long walk by the river.\n")
    write(ws, "knowledge/self/habits/deep/focus.md", entry("Focus", "Close chat apps."))
    write(ws, "skills/brew/SKILL.md",
          "---\nname: brew-coffee\ndescription: Make pour-over coffee.\ntags: [coffee]\n---\n"
          "Grind 15 g of beans.\n")
    # never indexed
    write(ws, "knowledge/README.md", "# Knowledge\n")
    write(ws, "knowledge/projects/README.md", "# Projects\n")
    write(ws, "knowledge/user/USER.md", "# User\n")
    write(ws, "IDENTITY.md", "# Me\n")
    write(ws, "knowledge/projects/TODO.md", "- [ ] x\n")
    write(ws, "knowledge/projects/SCRATCH.md", "scratch\n")
    write(ws, "knowledge/other/elsewhere.md", "# Not a picobot topic\n")
    write(ws, "skills/brew/notes.md", "# not the skill file\n")
    return ws


EXPECTED = ["domains/bikes.md", "journal/2026-01-05-walk.md", "projects/garden.md",
            "self/habits/deep/focus.md", "skills/brew/SKILL.md"]


def test_scan_finds_only_documents(workspace: Path) -> None:
    found = sorted(rel for rel, _, reason in scan_workspace(workspace) if not reason)
    assert found == EXPECTED


def test_import_derives_topic_type_title_and_dates(store: KnowledgeStore,
                                                   workspace: Path) -> None:
    report = store.import_directory(workspace)
    assert (report.added, report.embedded, report.skipped) == (5, 5, [])
    assert store.paths() == EXPECTED
    journal = store.get("journal/2026-01-05-walk.md")
    assert (journal.topic, journal.doc_type, journal.title) == ("journal", "journal", "Walk")
    assert journal.updated.startswith("2026-01-05")  # from the file name when frontmatter has none
    skill = store.get("skills/brew/SKILL.md")
    assert (skill.topic, skill.doc_type, skill.title) == ("skills", "skill", "brew-coffee")
    assert skill.body.startswith("Make pour-over coffee.")
    assert skill.tags == ["coffee"]
    nested = store.get("self/habits/deep/focus.md")
    assert (nested.topic, nested.doc_type) == ("self", "entry")


@pytest.mark.parametrize(("path", "topic", "doc_type"), [
    ("projects/picobot.md", "projects", "entry"),
    ("journal/2026-02-01-x.md", "journal", "journal"),
    ("skills/web/SKILL.md", "skills", "skill"),
    ("user/a/b.md", "user", "entry"),
    ("loose.md", "general", "entry"),
])
def test_topic_and_doc_type_from_path(store: KnowledgeStore, path: str, topic: str,
                                      doc_type: str) -> None:
    assert derive_topic_type(path) == (topic, doc_type)
    store.upsert(path, title="T", body="b")
    doc = store.get(path)
    assert (doc.topic, doc.doc_type) == (topic, doc_type)
    row = store.conn.execute("SELECT topic, doc_type FROM vectors WHERE vector_id = "
                             "(SELECT id * 32 FROM documents WHERE path = ?)", (path,)).fetchone()
    assert tuple(row) == (topic, doc_type)


def test_explicit_topic_and_type_override_the_path(store: KnowledgeStore) -> None:
    store.upsert("projects/x.md", title="X", body="b", topic="domains", doc_type="skill")
    doc = store.get("projects/x.md")
    assert (doc.topic, doc.doc_type) == ("domains", "skill")


@pytest.mark.parametrize("path", ["../x.md", "/abs.md", "notes/x.txt", "projects/x",
                                  "projects/../../x.md", "./x.md", "a//b.md", "", "  ",
                                  "a\\b.md", "a\x00.md"])
def test_invalid_paths_are_rejected(store: KnowledgeStore, path: str) -> None:
    with pytest.raises(InvalidDocumentError):
        store.upsert(path, title="T", body="b")
    assert len(store) == 0


@pytest.mark.parametrize("kwargs", [
    {"doc_type": "note"},
    {"updated": "yesterday"},
    {"body": "nul \x00 byte"},
    {"tags": 42},
])
def test_invalid_fields_are_rejected(kwargs: dict) -> None:
    fields = {"title": "T", "body": "b", **kwargs}
    with pytest.raises(InvalidDocumentError):
        make_document("projects/x.md", **fields)


def test_upsert_reports_added_updated_unchanged(store: KnowledgeStore,
                                                embedder: FakeEmbedder) -> None:
    assert store.upsert("projects/a.md", title="A", body="one", tags="x, y") == "added"
    assert store.get("projects/a.md").tags == ["x", "y"]
    calls = embedder.calls
    assert store.upsert("projects/a.md", title="A", body="one", tags=["x", "y"]) == "unchanged"
    assert embedder.calls == calls
    assert store.upsert("projects/a.md", title="A", body="two", tags=["x", "y"]) == "updated"
    assert embedder.calls == calls + 1


def test_second_import_embeds_nothing(store: KnowledgeStore, workspace: Path,
                                      embedder: FakeEmbedder) -> None:
    store.import_directory(workspace)
    calls = embedder.calls
    report = store.import_directory(workspace)
    assert (report.added, report.updated, report.unchanged, report.deleted,
            report.embedded) == (0, 0, 5, 0, 0)
    assert embedder.calls == calls


def test_editing_one_file_embeds_exactly_one(store: KnowledgeStore, workspace: Path,
                                             embedder: FakeEmbedder) -> None:
    store.import_directory(workspace)
    calls = embedder.calls
    write(workspace, "knowledge/domains/bikes.md", entry("Bikes", "Oil the chain weekly."))
    report = store.import_directory(workspace)
    assert (report.updated, report.unchanged, report.embedded) == (1, 4, 1)
    assert embedder.calls == calls + 1
    assert "weekly" in store.get("domains/bikes.md").body
    assert store.search("weekly", limit=1)[0].path == "domains/bikes.md"


def _rows_for(store: KnowledgeStore, doc_id: int, path: str) -> dict[str, int]:
    conn = store.conn

    def count(sql: str, *args) -> int:
        return int(conn.execute(sql, args).fetchone()[0])

    return {
        "documents": count("SELECT count(*) FROM documents WHERE path = ?", path),
        "fts": count("SELECT count(*) FROM documents_fts WHERE documents_fts MATCH ?",
                     '"zanzibar"'),
        "document_tags": count("SELECT count(*) FROM document_tags WHERE doc_id = ?", doc_id),
        "vectors": count("SELECT count(*) FROM vectors WHERE doc_id = ?", doc_id),
        "vector_data": count("SELECT count(*) FROM vector_data WHERE doc_id = ?", doc_id),
        "derived": count("SELECT count(*) FROM derived WHERE doc_id = ?", doc_id),
        "hype_questions": count("SELECT count(*) FROM hype_questions WHERE doc_id = ?", doc_id),
    }


def test_deleting_a_file_removes_it_from_every_table(tmp_path: Path, workspace: Path,
                                                     fake_llm) -> None:
    write(workspace, "knowledge/domains/travel.md",
          entry("Zanzibar trip", "Spice farms on Zanzibar.", "[travel, zanzibar]"))
    embedder = FakeEmbedder(64)
    with KnowledgeStore.open(tmp_path / "h.sqlite", embedder, hype=True) as s:
        report = s.import_directory(workspace)
        assert report.hype_generated == 6 and fake_llm.calls
        doc_id = s.conn.execute("SELECT id FROM documents WHERE path = 'domains/travel.md'"
                                ).fetchone()[0]
        before = _rows_for(s, doc_id, "domains/travel.md")
        # document + 3 HyPE questions, each with a vector; 3 kinds of derived rows
        assert before == {"documents": 1, "fts": 1, "document_tags": 2, "vectors": 4,
                          "vector_data": 4, "derived": 3, "hype_questions": 3}
        (workspace / "knowledge/domains/travel.md").unlink()
        report = s.import_directory(workspace)
        assert report.deleted == 1 and report.embedded == 0
        assert _rows_for(s, doc_id, "domains/travel.md") == dict.fromkeys(before, 0)
        assert all(h.path != "domains/travel.md" for h in s.search("zanzibar spice", limit=50))
        assert s.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        s.conn.execute("INSERT INTO documents_fts(documents_fts) VALUES('integrity-check')")


def test_store_delete_removes_everything(store: KnowledgeStore) -> None:
    store.upsert("projects/z.md", title="Zanzibar", body="zanzibar notes", tags=["zanzibar"])
    doc_id = store.conn.execute("SELECT id FROM documents").fetchone()[0]
    assert store.delete("projects/z.md") is True
    assert store.delete("projects/z.md") is False
    assert set(_rows_for(store, doc_id, "projects/z.md").values()) == {0}
    assert store.get("projects/z.md") is None


def test_unreadable_files_are_skipped_with_a_reason(store: KnowledgeStore,
                                                    workspace: Path) -> None:
    write(workspace, "knowledge/domains/broken.md", "---\ntitle: [unclosed\n---\nbody\n")
    (workspace / "knowledge/domains/binary.md").write_bytes(b"\x00\x01\x02")
    (workspace / "knowledge/domains/latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    report = store.import_directory(workspace)
    reasons = {s.path: s.reason for s in report.skipped}
    assert set(reasons) == {"domains/broken.md", "domains/binary.md", "domains/latin1.md"}
    assert "YAML" in reasons["domains/broken.md"]
    assert "NUL" in reasons["domains/binary.md"]
    assert "UTF-8" in reasons["domains/latin1.md"]
    assert report.added == 5

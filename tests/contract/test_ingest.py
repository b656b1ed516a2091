"""Ingest: which files are documents, topic/doc_type from the path, path
validation, import reconciliation by content hash (embedding counts,
deletion), and the removals an import refuses because they look like a
mistake (an empty or half-missing folder) unless told to prune."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kbstore import FakeEmbedder, InvalidDocumentError, KnowledgeStore
from kbstore.doctor import diagnose
from kbstore.documents import derive_topic_type, make_document
from kbstore.ingest import scan_workspace

from .public import questions


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
    store.upsert(path, title="Tangerine", body="b")
    store.upsert("elsewhere/other.md", title="Tangerine", body="b")
    doc = store.get(path)
    assert (doc.topic, doc.doc_type) == (topic, doc_type)
    # every retriever, the vector one included, filters by the derived topic
    hits = store.search("tangerine", topic=topic, explain=True)
    assert [h.path for h in hits] == [path]
    assert hits[0].doc_type == doc_type
    ranks = hits[0].explain["ranks"]
    assert all(ranks[name] is not None for name in ("frontmatter", "fts", "vector"))


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


def test_deleting_a_file_removes_it_and_everything_derived(location, workspace: Path,
                                                          fake_llm) -> None:  # type: ignore[no-untyped-def]
    write(workspace, "knowledge/domains/travel.md",
          entry("Zanzibar trip", "Spice farms on Zanzibar.", "[travel, zanzibar]"))
    embedder = FakeEmbedder(64)
    with KnowledgeStore.open(location, embedder, hype=True) as s:
        report = s.import_directory(workspace)
        assert report.hype_generated == 6 and fake_llm.calls
        before = s.status()
        assert (before["documents"], before["vectors"], before["hype_questions"]) == (6, 24, 18)
        assert "domains/travel.md" in questions(s)
        (workspace / "knowledge/domains/travel.md").unlink()
        report = s.import_directory(workspace)
        assert report.deleted == 1 and report.embedded == 0 and report.kept_missing == []
        after = s.status()
        # the document, its vector, its 3 questions and their 3 vectors are gone
        assert (after["documents"], after["vectors"], after["hype_questions"]) == (5, 20, 15)
        assert after["doc_vectors"] == 5
        assert s.get("domains/travel.md") is None
        assert "domains/travel.md" not in questions(s)
        assert all(h.path != "domains/travel.md" for h in s.search("zanzibar spice", limit=50))
        assert diagnose(s).ok


def test_store_delete_removes_everything(store: KnowledgeStore) -> None:
    store.upsert("projects/z.md", title="Zanzibar", body="zanzibar notes", tags=["zanzibar"])
    store.upsert("projects/k.md", title="Kept", body="another note")
    assert store.delete("projects/z.md") is True
    assert store.delete("projects/z.md") is False
    assert store.get("projects/z.md") is None
    status = store.status()
    assert (status["documents"], status["vectors"], status["doc_vectors"]) == (1, 1, 1)
    assert [h.path for h in store.search("zanzibar", limit=10)] == ["projects/k.md"]
    assert store.delete_many(["projects/k.md", "projects/none.md"]) == 1
    assert len(store) == 0 and diagnose(store).ok


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


# -- removals that look like a mistake --------------------------------------------------


def _notes(root: Path, n: int) -> list[str]:
    for i in range(n):
        write(root, f"knowledge/domains/note-{i}.md", entry(f"Note {i}", f"Body of note {i}."))
    return [f"domains/note-{i}.md" for i in range(n)]


def test_an_empty_folder_deletes_nothing(store: KnowledgeStore, tmp_path: Path) -> None:
    paths = _notes(tmp_path / "ws", 6)
    store.import_directory(tmp_path / "ws")
    (tmp_path / "empty").mkdir()
    report = store.import_directory(tmp_path / "empty")
    assert report.deleted == 0 and report.kept_missing == paths
    assert "holds no documents" in report.kept_reason
    assert store.paths() == paths
    forced = store.import_directory(tmp_path / "empty", prune=True)
    assert forced.deleted == 6 and forced.kept_missing == [] and len(store) == 0


@pytest.mark.parametrize("missing, kept", [(5, True), (7, True), (4, False), (1, False)])
def test_a_removal_of_half_the_store_is_kept(store: KnowledgeStore, tmp_path: Path,
                                             missing: int, kept: bool) -> None:
    ws = tmp_path / "ws"
    paths = _notes(ws, 10)
    store.import_directory(ws)
    for rel in paths[:missing]:
        (ws / "knowledge" / rel).unlink()
    report = store.import_directory(ws)
    if kept:  # at least half of the store and at least 5 documents: looks like a mistake
        assert (report.deleted, report.kept_missing) == (0, paths[:missing])
        assert f"{missing} of 10 documents would be deleted" in report.kept_reason
        assert len(store) == 10
    else:
        assert (report.deleted, report.kept_missing) == (missing, [])
        assert store.paths() == paths[missing:]


def test_a_folder_missing_a_section_keeps_that_section(store: KnowledgeStore,
                                                       tmp_path: Path) -> None:
    """The knowledge folder given instead of the workspace (no skills/), or an
    unmounted journal/: that section was not scanned, so nothing in it is
    deleted; a file removed from a section that was scanned still is."""
    ws = tmp_path / "ws"
    notes = _notes(ws, 3)
    write(ws, "knowledge/journal/2026-01-02.md", entry("Day", "A day."))
    for name in ("deploy", "backup"):
        write(ws, f"skills/{name}/SKILL.md", entry(f"{name} skill", "Steps."))
    store.import_directory(ws)
    assert len(store) == 6
    (ws / "knowledge" / notes[0]).unlink()
    report = store.import_directory(ws / "knowledge")
    assert report.deleted == 1 and store.get(notes[0]) is None
    assert report.kept_missing == ["skills/backup/SKILL.md", "skills/deploy/SKILL.md"]
    assert str(ws / "knowledge" / "skills") in report.kept_reason
    shutil.rmtree(ws / "knowledge" / "journal")
    report = store.import_directory(ws)
    assert (report.deleted, report.kept_missing) == (0, ["journal/2026-01-02.md"])
    assert len(store) == 5
    assert store.import_directory(ws, prune=True).deleted == 1
    assert store.get("journal/2026-01-02.md") is None


def test_cli_import_of_a_partial_folder_lists_what_it_kept(tmp_path: Path,
                                                            run_cli: Any) -> None:
    ws = tmp_path / "ws"
    _notes(ws, 2)
    write(ws, "skills/deploy/SKILL.md", entry("deploy skill", "Steps."))
    db = tmp_path / "kb.sqlite"
    assert run_cli("import", "--db", db, "--embedder", "fake", "--no-hype", ws).exit_code == 0
    result = run_cli("import", "--db", db, "--no-hype", ws / "knowledge")
    assert result.exit_code == 1, result.output
    assert "kept 1 document(s)" in result.stderr and "skills/deploy/SKILL.md" in result.stderr
    with KnowledgeStore.open(db, FakeEmbedder()) as again:
        assert "skills/deploy/SKILL.md" in again.paths()


def test_a_small_store_is_pruned_normally(store: KnowledgeStore, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    paths = _notes(ws, 4)
    store.import_directory(ws)
    for rel in paths[:3]:  # 3 of 4: most of the store, but fewer than 5 documents
        (ws / "knowledge" / rel).unlink()
    assert store.import_directory(ws).deleted == 3
    assert store.paths() == paths[3:]


def test_prune_false_never_deletes_and_before_delete_announces(store: KnowledgeStore,
                                                               tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    paths = _notes(ws, 10)
    store.import_directory(ws)
    (ws / "knowledge" / paths[0]).unlink()
    report = store.import_directory(ws, prune=False)
    assert (report.deleted, report.kept_missing, report.kept_reason) == (0, paths[:1],
                                                                        "prune=False")
    announced: list[list[str]] = []

    def before_delete(gone: list[str]) -> None:
        announced.append(list(gone))
        assert store.get(gone[0]) is not None  # told BEFORE anything is deleted

    report = store.import_directory(ws, before_delete=before_delete)
    assert report.deleted == 1 and announced == [paths[:1]]
    assert store.import_directory(ws, before_delete=before_delete).deleted == 0
    assert announced == [paths[:1]]  # nothing to delete: not called


def test_a_kept_removal_keeps_the_paid_for_questions(location, tmp_path: Path,
                                                     fake_llm) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    _notes(ws, 6)
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=True) as s:
        s.import_directory(ws)
        before = questions(s)
        assert len(before) == 6
        (tmp_path / "typo").mkdir()
        s.import_directory(tmp_path / "typo")
        assert questions(s) == before
    assert len(fake_llm.calls) == 6


def test_cli_import_refuses_a_mistaken_removal_unless_pruned(run_cli, location,
                                                             tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    paths = _notes(ws, 6)
    assert run_cli("import", "--db", location, ws, "--no-hype", "--embedder", "fake"
                   ).exit_code == 0
    (tmp_path / "empty").mkdir()
    refused = run_cli("import", "--db", location, tmp_path / "empty", "--no-hype")
    assert refused.exit_code == 1
    assert "kept 6 document(s) whose files are missing" in refused.stderr
    assert "rerun with --prune" in refused.stderr and "deleted 0" in refused.stdout
    # the way out that deletes nothing is named too (another folder's documents)
    assert "or with --no-prune if they belong here" in refused.stderr
    kept = run_cli("import", "--db", location, tmp_path / "empty", "--no-hype", "--no-prune",
                   "--json")
    assert kept.exit_code == 0
    assert json.loads(kept.stdout)["kept_missing"] == paths
    pruned = run_cli("import", "--db", location, tmp_path / "empty", "--no-hype", "--prune")
    assert pruned.exit_code == 0, pruned.output
    assert "deleting 6 document(s) whose files are gone: domains/note-0.md" in pruned.stderr
    assert "deleted 6" in pruned.stdout
    with KnowledgeStore.open(location, read_only=True) as s:
        assert len(s) == 0


def test_cli_import_names_each_deleted_document(run_cli, location, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    paths = _notes(ws, 12)
    run_cli("import", "--db", location, ws, "--no-hype", "--embedder", "fake")
    for rel in paths[:2]:
        (ws / "knowledge" / rel).unlink()
    result = run_cli("import", "--db", location, ws, "--no-hype")
    assert result.exit_code == 0
    assert result.stderr.strip() == ("deleting 2 document(s) whose files are gone: "
                                     "domains/note-0.md, domains/note-1.md")


@pytest.mark.parametrize("bad", [b"projects/a.md", ["projects/a.md"], None, 3])
def test_delete_many_refuses_a_path_that_is_not_text_before_deleting(
        store: KnowledgeStore, bad: Any) -> None:
    store.upsert("projects/a.md", title="A", body="alpha")
    store.upsert("projects/b.md", title="B", body="beta")
    with pytest.raises(TypeError, match=r"paths as text.*(bytes|list|NoneType|int)"):
        store.delete_many(["projects/a.md", bad])
    assert sorted(store.paths()) == ["projects/a.md", "projects/b.md"]  # nothing deleted


def test_delete_many_refuses_one_string_for_a_list(store: KnowledgeStore) -> None:
    store.upsert("projects/a.md", title="A", body="alpha")
    with pytest.raises(TypeError, match="a list of paths"):
        store.delete_many("projects/a.md")  # type: ignore[arg-type]
    assert store.paths() == ["projects/a.md"]


def test_delete_many_counts_a_path_named_twice_once(store: KnowledgeStore) -> None:
    store.upsert("projects/a.md", title="A", body="alpha")
    store.upsert("projects/b.md", title="B", body="beta")
    assert store.delete_many(["projects/a.md", "projects/a.md", "projects/none.md"]) == 1
    assert store.paths() == ["projects/b.md"] and diagnose(store).ok

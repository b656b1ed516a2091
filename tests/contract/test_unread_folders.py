"""A folder the scan could not look into -- unreadable (permissions, a
vanished mount) or replaced by a symlink, which the scan never follows --
says nothing about the files in it: the documents stored from it are kept
and listed, never deleted as if their files were gone."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.picobot import KnowledgeBase


def _workspace(root: Path) -> Path:
    k = root / "knowledge"
    for folder, n in (("projects", 6), ("projects/work", 3), ("domains", 6)):
        (k / folder).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            name = folder.replace("/", "-")
            (k / folder / f"{name}-{i}.md").write_text(
                f"---\ntitle: {name} {i}\n---\nnotes about {name} number {i}\n")
    skill = root / "skills" / "web"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: web\ndescription: browse\n---\nUse it.\n")
    return root


def _unreadable(monkeypatch: pytest.MonkeyPatch, *folders: Path) -> None:
    """Listing these folders fails as it does without read permission (the
    tests run as root too, where chmod would not stop a read)."""
    denied = {str(f) for f in folders}
    real_scandir, real_listdir = os.scandir, os.listdir

    def check(path: Any) -> None:
        if os.fspath(path) in denied:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))

    def scandir(path: Any = ".") -> Any:
        check(path)
        return real_scandir(path)

    def listdir(path: Any = ".") -> list[str]:
        check(path)
        return real_listdir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)


@pytest.mark.parametrize("folder", ["knowledge/projects/work", "knowledge/projects", "skills"])
def test_an_unreadable_folder_keeps_its_documents(tmp_path: Path, location: str,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  folder: str) -> None:
    ws = _workspace(tmp_path / "ws")
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        assert store.import_directory(ws).added == 16
        under = [p for p in store.paths()
                 if p.startswith(folder.removeprefix("knowledge/") + "/")]
        assert under
        _unreadable(monkeypatch, ws / folder)
        report = store.import_directory(ws)
        assert report.deleted == 0 and len(store) == 16
        assert sorted(report.kept_missing) == sorted(under)
        assert "not read" in report.kept_reason
        skipped = {s.path: s.reason for s in report.skipped}
        assert "Permission denied" in skipped[folder.removeprefix("knowledge/")]
        # ... and --prune still deletes them when that is what the user wants
        assert store.import_directory(ws, prune=True).deleted == len(under)


@pytest.mark.parametrize("mounted", [True, False], ids=["target-there", "target-unmounted"])
def test_a_subfolder_replaced_by_a_symlink_keeps_its_documents(tmp_path: Path, location: str,
                                                               mounted: bool) -> None:
    ws = _workspace(tmp_path / "ws")
    work = ws / "knowledge" / "projects" / "work"
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        store.import_directory(ws)
        moved = tmp_path / "other-disk" / "work"
        moved.parent.mkdir()
        work.rename(moved)  # moved to another disk, a symlink left in its place
        work.symlink_to(moved, target_is_directory=True)
        if not mounted:  # the other disk is not there: a dangling symlink
            moved.rename(tmp_path / "elsewhere")
        report = store.import_directory(ws)
        assert report.deleted == 0 and len(store) == 16
        assert sorted(report.kept_missing) == [f"projects/work/projects-work-{i}.md"
                                               for i in range(3)]
        assert "symlink" in {s.path: s.reason for s in report.skipped}["projects/work"]


def test_ordinary_deletions_still_happen_beside_an_unreadable_folder(
        tmp_path: Path, location: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace(tmp_path / "ws")
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        store.import_directory(ws)
        (ws / "knowledge" / "domains" / "domains-0.md").unlink()
        _unreadable(monkeypatch, ws / "knowledge" / "projects" / "work")
        report = store.import_directory(ws)
        assert report.deleted == 1 and store.get("domains/domains-0.md") is None
        assert len(report.kept_missing) == 3 and len(store) == 15


def test_picobot_sync_keeps_documents_of_an_unreadable_folder(
        tmp_path: Path, location: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _workspace(tmp_path / "ws")
    with KnowledgeBase(workspace=ws, db=location, embedder=FakeEmbedder(64), hype=False) as kb:
        assert "projects 0" in kb.search("projects number 0")
    _unreadable(monkeypatch, ws / "knowledge" / "projects" / "work")
    with KnowledgeBase(workspace=ws, db=location, embedder=FakeEmbedder(64), hype=False) as kb:
        kb.search("projects number 0")  # the first search reconciles with the folder
        assert len(kb.knowledge_store) == 16

"""A writing command on a file SQLite cannot write says which file and why,
not SQLite's bare 'unable to open database file' / 'attempt to write a
readonly database', and points at the read commands that still work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore


@pytest.fixture
def blocked_store(tmp_path: Path) -> Path:
    """A closed WAL-mode store whose -shm file cannot be created (a folder
    holds its name): SQLite opens it read-only and every write fails, even
    as root."""
    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        store.upsert("projects/deploy.md", title="Deploy", body="ship it with a canary")
    (tmp_path / "kb.sqlite-shm").mkdir()
    return db


def _workspace(root: Path) -> Path:
    workspace = root / "ws"
    (workspace / "projects").mkdir(parents=True)
    (workspace / "projects" / "a.md").write_text("---\ntitle: A\n---\nbody\n",
                                                 encoding="utf-8")
    return workspace


def test_a_writer_that_cannot_write_the_file_says_why(run_cli, blocked_store: Path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("import", "--db", blocked_store, _workspace(blocked_store.parent),
                     "--no-hype")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: {blocked_store} cannot be written here: SQLite could not write it or its "
        "kb.sqlite-wal / -shm files (attempt to write a readonly database); only read "
        "commands (search, status, doctor, export) can use it")


def test_a_read_only_file_is_named_as_such(run_cli, blocked_store: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    real_access = os.access

    def access(path, mode, *args, **kwargs):  # type: ignore[no-untyped-def]
        if mode == os.W_OK and Path(path) == blocked_store:
            return False  # as on a read-only mount, or chmod 444 for a non-root user
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    result = run_cli("import", "--db", blocked_store, _workspace(blocked_store.parent),
                     "--no-hype")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: {blocked_store} cannot be written here: the file is read-only; only read "
        "commands (search, status, doctor, export) can use it")


def test_the_read_commands_still_work_on_it(run_cli, blocked_store: Path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("search", "--db", blocked_store, "canary", "--json")
    assert result.exit_code == 0 and "projects/deploy.md" in result.output

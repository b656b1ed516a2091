"""A file that exists but holds no knowledge base -- zero bytes (a crash or a
full disk truncated it, `touch` made it) or an empty SQLite database -- is
what a missing file is to the commands that never create one: `doctor
--fix`, `reembed`, `hype` and `migrate` refuse it and leave it as it is
(doctor --fix turned a truncated knowledge base into a new empty store and
reported "no problems found")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.errors import NotAKnowledgeBaseError

WRITERS = [("doctor", "--fix"), ("reembed", "--embedder", "fake"), ("hype", "--all"),
           ("migrate",)]


def _empty(tmp_path: Path, kind: str) -> Path:
    db = tmp_path / "kb.sqlite"
    if kind == "zero-byte":
        db.write_bytes(b"")
    else:
        sqlite3.connect(db).execute("VACUUM").connection.close()
    return db


@pytest.mark.parametrize("kind", ["zero-byte", "empty-sqlite"])
@pytest.mark.parametrize("command", WRITERS, ids=lambda c: c[0])
def test_a_writer_that_never_creates_refuses_an_empty_file(
        run_cli, tmp_path: Path, kind: str, command: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    db = _empty(tmp_path, kind)
    before = db.read_bytes()
    result = run_cli(command[0], "--db", db, *command[1:])
    assert result.exit_code == 1
    assert "not a kbstore database yet" in result.stderr and "kbstore init" in result.stderr
    assert db.read_bytes() == before and "no problems" not in result.output


def test_the_api_without_create_refuses_an_empty_file(tmp_path: Path) -> None:
    db = _empty(tmp_path, "zero-byte")
    with pytest.raises(NotAKnowledgeBaseError, match="not a kbstore database yet"):
        KnowledgeStore.open(db, FakeEmbedder(64), create=False)
    assert db.read_bytes() == b""


@pytest.mark.parametrize("command", [("init", "--embedder", "fake"),
                                     ("import", "--embedder", "fake", "--no-hype")])
def test_commands_that_create_still_take_an_empty_file(run_cli, tmp_path: Path,
                                                       command: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    db = _empty(tmp_path, "zero-byte")
    args = [*command, tmp_path / "ws"] if command[0] == "import" else list(command)
    if command[0] == "import":
        (tmp_path / "ws" / "knowledge" / "projects").mkdir(parents=True)
        (tmp_path / "ws" / "knowledge" / "projects" / "a.md").write_text("# A\nbody\n")
    result = run_cli(args[0], "--db", db, *args[1:])
    assert result.exit_code == 0, result.output
    with KnowledgeStore.open(db, read_only=True) as store:
        assert store.status()["schema_version"] >= 4

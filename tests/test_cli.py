"""The kbstore command line through click's CliRunner: help everywhere, the
outputs of init/status/import/search/migrate/vec-path/reembed, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kbstore import KnowledgeStore
from kbstore.cli import _register, cli

_register()

NO_DB = {"vec-path", "demo"}  # demo's --db is optional; vec-path reads no database


def all_commands(group: click.Group = cli, prefix: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from all_commands(command, (*prefix, name))


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def run(runner: CliRunner, *args: str):
    return runner.invoke(cli, list(args), catch_exceptions=False)


def test_registered_commands() -> None:
    names = set(cli.commands)
    assert {"init", "migrate", "status", "vec-path", "import", "search", "reembed",
            "demo"} <= names


@pytest.mark.parametrize("path", [p for p, _ in all_commands()], ids="-".join)
def test_every_command_has_help(runner: CliRunner, path: tuple[str, ...]) -> None:
    command = cli
    for name in path:
        command = command.commands[name]
    assert (command.help or command.short_help or "").strip(), f"{path} has no help text"
    result = run(runner, *path, "--help")
    assert result.exit_code == 0
    assert result.output.startswith(f"Usage: cli {' '.join(path)}") or "Usage:" in result.output
    first_line = command.help.strip().splitlines()[0]
    assert first_line.split()[0] in result.output
    if path[0] not in NO_DB and not isinstance(command, click.Group):
        assert "--db" in result.output and "KBSTORE_DB" in result.output


def test_top_level_help_lists_commands(runner: CliRunner) -> None:
    result = run(runner, "--help")
    assert result.exit_code == 0
    for name in ("init", "search", "import", "status"):
        assert name in result.output


def _init(runner: CliRunner, db: Path, dim: str = "64"):
    return run(runner, "init", "--db", str(db), "--embedder", "fake", "--dim", dim)


def test_init_and_status(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    result = _init(runner, db)
    assert result.exit_code == 0
    assert result.output.strip() == (f"initialised {db}: schema v1, embedder fake "
                                     "(hashing-bow, 64 dims)")
    status = run(runner, "status", "--db", str(db), "--json")
    assert status.exit_code == 0
    info = json.loads(status.output)
    assert info["schema_version"] == 1 and info["documents"] == 0 and info["vectors"] == 0
    assert info["embedder"]["name"] == "fake" and info["embedder"]["dim"] == 64
    assert info["file_bytes"] > 0 and info["pending_migrations"] == []
    text = run(runner, "status", "--db", str(db))
    assert "schema version  1" in text.output and "documents       0" in text.output


def test_db_from_environment(runner: CliRunner, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "env.sqlite"
    monkeypatch.setenv("KBSTORE_DB", str(db))
    assert run(runner, "init", "--embedder", "fake", "--dim", "16").exit_code == 0
    assert json.loads(run(runner, "status", "--json").output)["embedder"]["dim"] == 16


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    for rel, text in {
        "knowledge/domains/bees.md": "---\ntitle: Beekeeping\ntags: [bees]\n---\nHive and honey.",
        "knowledge/projects/shed.md": "---\ntitle: Garden shed\n---\nRoof felt and screws.",
        "skills/smoke/SKILL.md": "---\nname: smoke-hive\ndescription: Calm the bees.\n---\nUse"
                                 " cool smoke.",
    }.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    return ws


def test_import_and_search(runner: CliRunner, tmp_path: Path) -> None:
    db, ws = tmp_path / "kb.sqlite", _workspace(tmp_path)
    _init(runner, db)
    first = run(runner, "import", "--db", str(db), str(ws), "--no-hype")
    assert first.exit_code == 0
    assert first.output.startswith("added 3, updated 0, unchanged 0, deleted 0, embedded 3")
    again = run(runner, "import", "--db", str(db), str(ws), "--no-hype", "--json")
    report = json.loads(again.output)
    assert (report["added"], report["unchanged"], report["embedded"]) == (0, 3, 0)

    result = run(runner, "search", "--db", str(db), "honey bees hive", "--json", "--limit", "5")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert len(lines) >= 2
    objects = [json.loads(line) for line in lines]  # one JSON object per line
    keys = {"path", "title", "tags", "doc_type", "topic", "updated", "score", "snippet"}
    assert all(set(o) == keys for o in objects)
    assert all(list(o) == sorted(o) for o in objects)  # stable key order
    assert objects[0]["path"] == "domains/bees.md"
    assert [o["score"] for o in objects] == sorted((o["score"] for o in objects), reverse=True)

    explained = run(runner, "search", "--db", str(db), "honey bees", "--json", "--explain")
    first_hit = json.loads(explained.output.splitlines()[0])
    assert set(first_hit) == keys | {"explain"}
    assert set(first_hit["explain"]["ranks"]) == {"frontmatter", "fts", "vector"}

    text = run(runner, "search", "--db", str(db), "honey bees", "--explain", "--topic",
               "domains")
    assert text.output.startswith(" 1. ")
    assert "domains/bees.md" in text.output and "ranks: frontmatter=" in text.output
    assert "skills/" not in text.output

    none = run(runner, "search", "--db", str(db), "quantum gluon", "--min-similarity", "0.9")
    assert none.exit_code == 0 and none.output.strip() == "no results"


def test_migrate_and_list(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    listed = run(runner, "migrate", "--db", str(db), "--list")
    assert listed.exit_code == 0 and listed.output.strip() == "pending  0001_initial"
    applied = run(runner, "migrate", "--db", str(db))
    assert applied.output.strip() == "applied 1 migration(s): 0001_initial"
    again = run(runner, "migrate", "--db", str(db))
    assert again.output.strip() == "applied 0 migration(s); schema is current"
    assert run(runner, "migrate", "--db", str(db), "--list").output.strip() == \
        "applied  0001_initial"


def test_vec_path(runner: CliRunner) -> None:
    from kbstore import db as kbdb

    result = run(runner, "vec-path")
    assert result.exit_code == 0 and result.output.strip() == kbdb.vec_path()


def test_reembed(runner: CliRunner, tmp_path: Path) -> None:
    db, ws = tmp_path / "kb.sqlite", _workspace(tmp_path)
    _init(runner, db)
    run(runner, "import", "--db", str(db), str(ws), "--no-hype")
    result = run(runner, "reembed", "--db", str(db), "--embedder", "fake", "--dim", "128")
    assert result.exit_code == 0 and result.output.strip() == \
        "re-embedded 3 document(s) with fake"
    info = json.loads(run(runner, "status", "--db", str(db), "--json").output)
    assert info["embedder"]["dim"] == 128 and info["doc_vectors"] == 3
    hits = run(runner, "search", "--db", str(db), "roof felt", "--json").output.splitlines()
    assert json.loads(hits[0])["path"] == "projects/shed.md"


def _one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 1
    message = result.stderr if result.stderr else result.output
    lines = [line for line in message.splitlines() if line.strip()]
    assert len(lines) == 1, message
    assert lines[0].startswith("Error: ")
    for needle in needles:
        assert needle in lines[0]


def test_errors_are_one_line(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    _one_line_error(run(runner, "status", "--db", str(missing)), "no database", "kbstore init")
    assert not missing.exists()
    db = tmp_path / "kb.sqlite"
    _init(runner, db)
    _one_line_error(run(runner, "search", "--db", str(db), "   "), "empty")
    _one_line_error(run(runner, "init", "--db", str(tmp_path / "bad.sqlite"), "--embedder",
                        "fake", "--dim", "12"), "multiple of 8")
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("just some text, not SQLite\n" * 100)
    _one_line_error(run(runner, "status", "--db", str(not_a_db)))
    with KnowledgeStore.open(tmp_path / "other.sqlite", "fake", hype=False, dim=32):
        pass
    _one_line_error(run(runner, "import", "--db", str(tmp_path / "other.sqlite"),
                        str(_workspace(tmp_path)), "--embedder", "minilm"),
                    "kbstore reembed")


def test_future_schema_error_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    _init(runner, db)
    with KnowledgeStore.open(db, "fake", hype=False) as s:
        s.conn.execute("PRAGMA user_version = 99")
    _one_line_error(run(runner, "status", "--db", str(db)), "upgrade kbstore")


def test_console_entry_points() -> None:
    for cmd in ([sys.executable, "-m", "kbstore", "--help"],
                [str(Path(sys.executable).with_name("kbstore")), "vec-path"]):
        if not Path(cmd[0]).exists():
            continue
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip()

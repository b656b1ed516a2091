"""The kbstore command line through click's CliRunner: help everywhere, the
outputs of init/status/import/search/migrate/reembed, read commands that
never create a store, one-line errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.cli import _register, cli

_register()

COMMANDS = {"init", "migrate", "status", "vec-path", "import", "search", "reembed", "demo",
            "hype", "doctor", "export", "import-jsonl", "import-npz", "mcp", "watch", "copy"}
# demo's --db is optional; vec-path reads no database; copy takes two locations
NO_DB = {"vec-path", "demo", "copy"}


def all_commands(group: click.Group = cli, prefix: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    for name, command in sorted(group.commands.items()):
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from all_commands(command, (*prefix, name))


def test_registered_commands() -> None:
    from kbstore.cli.common import COMMAND_MODULES

    assert set(cli.commands) == COMMANDS
    # each command is imported lazily from the module its map entry names
    assert set(COMMAND_MODULES) == COMMANDS
    for name, module in COMMAND_MODULES.items():
        assert cli.commands[name].callback.__module__ == f"kbstore.cli.{module}", name


@pytest.mark.parametrize("path", [p for p, _ in all_commands()], ids="-".join)
def test_every_command_has_help(run_cli, path: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    command = cli
    for name in path:
        command = command.commands[name]
    assert (command.help or command.short_help or "").strip(), f"{path} has no help text"
    result = run_cli(*path, "--help")
    assert result.exit_code == 0
    assert result.output.startswith(f"Usage: cli {' '.join(path)}")
    first_line = command.help.strip().splitlines()[0]
    assert first_line.split()[0] in result.output
    if path[0] not in NO_DB and not isinstance(command, click.Group):
        assert "--db" in result.output and "KBSTORE_DB" in result.output


def test_top_level_help_lists_commands(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("--help")
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


def _init(run_cli, location: str, dim: str = "64"):  # type: ignore[no-untyped-def]
    return run_cli("init", "--db", location, "--embedder", "fake", "--dim", dim)


def _status(run_cli, location: str) -> dict:  # type: ignore[no-untyped-def, type-arg]
    result = run_cli("status", "--db", location, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_init_and_status(run_cli, backend, location) -> None:  # type: ignore[no-untyped-def]
    result = _init(run_cli, location)
    assert result.exit_code == 0, result.output
    info = _status(run_cli, location)
    assert info["backend"] == backend.kind and info["read_only"] is True
    assert info["schema_version"] >= 2 and info["pending_migrations"] == []
    assert info["documents"] == 0 and info["vectors"] == 0 and info["hype_pending"] == 0
    assert info["embedder"]["name"] == "fake" and info["embedder"]["dim"] == 64
    # init says which schema version it made and how many documents the store has
    assert re.fullmatch(rf"(initialised|checked) {re.escape(info['path'])}: schema "
                        rf"v{info['schema_version']}, embedder fake \(hashing-bow, 64 dims\), "
                        r"0 document\(s\)", result.output.strip()), result.output
    text = run_cli("status", "--db", location)
    assert f"schema version  {info['schema_version']}" in text.output
    assert "documents       0" in text.output


def test_status_counts_each_kind_of_vector(run_cli, location) -> None:  # type: ignore[no-untyped-def]
    """A long document's chunk vectors are not HyPE vectors: without HyPE the
    status line says 0 HyPE vectors and names the chunks."""
    _init(run_cli, location)
    long_body = " ".join(f"word{i}" for i in range(1500))
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        store.upsert("projects/long.md", title="Long", body=long_body)
        store.upsert("projects/short.md", title="Short", body="a few words")
    info = _status(run_cli, location)
    assert info["doc_vectors"] == 2 and info["chunk_vectors"] > 0
    assert info["hype_questions"] == 0
    assert info["vectors"] == info["doc_vectors"] + info["chunk_vectors"]
    text = run_cli("status", "--db", location).output
    assert (f"vectors         {info['vectors']} (2 document, {info['chunk_vectors']} chunk, "
            "0 HyPE)") in text, text


def test_init_of_an_existing_store_keeps_it_and_counts_its_documents(
        run_cli, location) -> None:  # type: ignore[no-untyped-def]
    _init(run_cli, location)
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        store.upsert("projects/a.md", title="A", body="kept")
    again = _init(run_cli, location)
    assert again.exit_code == 0, again.output
    assert again.output.startswith("checked ") and again.output.strip().endswith(
        "1 document(s)")
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        assert store.get("projects/a.md").body == "kept"  # type: ignore[union-attr]


def test_db_from_environment(run_cli, location, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KBSTORE_DB", location)
    assert run_cli("init", "--embedder", "fake", "--dim", "16").exit_code == 0
    assert json.loads(run_cli("status", "--json").output)["embedder"]["dim"] == 16


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


def test_import_and_search(run_cli, tmp_path: Path, location) -> None:  # type: ignore[no-untyped-def]
    ws = _workspace(tmp_path)
    _init(run_cli, location)
    first = run_cli("import", "--db", location, ws, "--no-hype")
    assert first.exit_code == 0
    assert first.output.startswith("added 3, updated 0, unchanged 0, deleted 0, embedded 3")
    again = run_cli("import", "--db", location, ws, "--no-hype", "--json")
    report = json.loads(again.output)
    assert (report["added"], report["unchanged"], report["embedded"]) == (0, 3, 0)
    assert report["kept_missing"] == [] and report["skipped"] == []

    result = run_cli("search", "--db", location, "honey bees hive", "--json", "--limit", "5")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert len(lines) >= 2
    objects = [json.loads(line) for line in lines]  # one JSON object per line
    keys = {"path", "title", "tags", "doc_type", "topic", "updated", "score", "snippet"}
    assert all(set(o) == keys for o in objects)
    assert all(list(o) == sorted(o) for o in objects)  # stable key order
    assert objects[0]["path"] == "domains/bees.md"
    assert [o["score"] for o in objects] == sorted((o["score"] for o in objects), reverse=True)

    explained = run_cli("search", "--db", location, "honey bees", "--json", "--explain")
    first_hit = json.loads(explained.output.splitlines()[0])
    assert set(first_hit) == keys | {"explain"}
    assert set(first_hit["explain"]["ranks"]) == {"frontmatter", "fts", "vector", "hype",
                                                  "hype_fts", "date"}

    text = run_cli("search", "--db", location, "honey bees", "--explain", "--topic", "domains")
    assert text.output.startswith(" 1. ")
    assert "domains/bees.md" in text.output and "ranks: frontmatter=" in text.output
    assert "skills/" not in text.output

    none = run_cli("search", "--db", location, "quantum gluon", "--min-similarity", "0.9")
    assert none.exit_code == 0 and none.output.strip() == "no results"


def test_migrate_list_and_migrate_on_a_current_store(run_cli, location) -> None:  # type: ignore[no-untyped-def]
    _init(run_cli, location)
    version = _status(run_cli, location)["schema_version"]
    listed = run_cli("migrate", "--db", location, "--list")
    assert listed.exit_code == 0
    lines = listed.output.splitlines()
    assert len(lines) == version and all(line.startswith("applied  ") for line in lines)
    again = run_cli("migrate", "--db", location)
    assert again.exit_code == 0
    assert again.output.strip() == "applied 0 migration(s); schema is current"
    assert run_cli("migrate", "--db", location, "--list").output.splitlines() == lines


def test_reembed(run_cli, tmp_path: Path, location) -> None:  # type: ignore[no-untyped-def]
    ws = _workspace(tmp_path)
    _init(run_cli, location)
    run_cli("import", "--db", location, ws, "--no-hype")
    result = run_cli("reembed", "--db", location, "--embedder", "fake", "--dim", "128")
    assert result.exit_code == 0 and result.output.strip() == \
        "re-embedded 3 document(s) with fake"
    info = _status(run_cli, location)
    assert info["embedder"]["dim"] == 128 and info["doc_vectors"] == 3
    assert info["rebuild_in_progress"] is False
    hits = run_cli("search", "--db", location, "roof felt", "--json").output.splitlines()
    assert json.loads(hits[0])["path"] == "projects/shed.md"


def _one_line_error(result, *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 1, result.output
    message = result.stderr if result.stderr else result.output
    lines = [line for line in message.splitlines() if line.strip()]
    assert len(lines) == 1, message
    assert lines[0].startswith("Error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_errors_are_one_line(run_cli, tmp_path: Path, backend, location) -> None:  # type: ignore[no-untyped-def]
    missing = backend.missing()
    _one_line_error(run_cli("status", "--db", missing), "no database", "kbstore init")
    assert not backend.exists(missing)
    _init(run_cli, location)
    _one_line_error(run_cli("search", "--db", location, "   "), "empty")
    bad = backend()
    _one_line_error(run_cli("init", "--db", bad, "--embedder", "fake", "--dim", "12"),
                    "multiple of 8")
    assert not backend.exists(bad)
    other = backend()
    with KnowledgeStore.open(other, "fake", hype=False, dim=32) as store:
        store.upsert("projects/a.md", title="A", body="a document makes the embedder stick")
    _one_line_error(run_cli("import", "--db", other, _workspace(tmp_path), "--embedder",
                            "minilm"), "kbstore reembed")


@pytest.mark.parametrize("args", [
    ("init", "--embedder", "fake", "--dim", "0"),
    ("init", "--embedder", "minilm", "--dim", "128"),
    ("init", "--embedder", "nomic", "--dim", "100"),
    ("init", "--embedder", "fake", "--dim", "4097"),
], ids=["zero", "minilm-other-dim", "nomic-not-matryoshka", "fake-too-big"])
def test_init_refuses_a_bad_dimension_and_leaves_nothing(run_cli, backend, args) -> None:  # type: ignore[no-untyped-def]
    target = backend()
    _one_line_error(run_cli(args[0], "--db", target, *args[1:]), "dim")
    assert not backend.exists(target)


def test_an_empty_store_takes_another_embedder_one_with_documents_refuses(
        run_cli, location) -> None:  # type: ignore[no-untyped-def]
    _init(run_cli, location, dim="32")
    assert _init(run_cli, location, dim="64").exit_code == 0  # no documents: re-stamped
    assert _status(run_cli, location)["embedder"]["dim"] == 64
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        store.upsert("projects/a.md", title="A", body="now it has a document")
    _one_line_error(_init(run_cli, location, dim="32"), "kbstore reembed")
    assert _status(run_cli, location)["embedder"]["dim"] == 64


@pytest.mark.parametrize("args", [
    ("status",), ("search", "anything"), ("doctor",), ("migrate", "--list"), ("migrate",),
    ("export", "--format", "jsonl", "-"), ("hype", "--dry-run"), ("reembed", "--embedder", "fake"),
], ids=lambda a: "-".join(a))
def test_commands_that_need_a_store_never_create_one(run_cli, backend, args) -> None:  # type: ignore[no-untyped-def]
    missing = backend.missing()
    _one_line_error(run_cli(args[0], "--db", missing, *args[1:]), "no database")
    assert not backend.exists(missing)


def test_demo_refuses_an_existing_store(run_cli, location) -> None:  # type: ignore[no-untyped-def]
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        store.upsert("projects/mine.md", title="Mine", body="my own knowledge")
    _one_line_error(run_cli("demo", "--db", location, "--embedder", "fake"), "exists")
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        assert store.paths() == ["projects/mine.md"]


def test_demo_indexes_the_sample_into_a_new_store(run_cli, location) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("demo", "--db", location, "--embedder", "fake", "sourdough starter")
    assert result.exit_code == 0, result.output
    assert "indexed the sample knowledge base" in result.output
    assert "> sourdough starter" in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("  1. ")]
    assert len(lines) == 1 and "sourdough" in lines[0].lower()
    with KnowledgeStore.open(location, hype=False) as store:
        assert len(store) > 20


def test_console_entry_points() -> None:
    ran = 0
    for cmd in ([sys.executable, "-m", "kbstore", "--help"],
                [str(Path(sys.executable).with_name("kbstore")), "vec-path"]):
        if not Path(cmd[0]).exists():
            continue
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip()
        ran += 1
    assert ran >= 1

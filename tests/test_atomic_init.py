"""A new store is made in ONE transaction: schema, embedder fingerprint,
fusion defaults and vector table. A ``kbstore init`` killed (SIGKILL) at the
vector-table step leaves nothing a command mistakes for a store, and
``kbstore init`` again makes a whole one -- on both backends. A store left
half-made by an older kbstore (schema, no fingerprint, no vector table)
gets a clear error from read commands and is finished by ``kbstore init``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.cli import _register, cli
from kbstore.errors import NotInitializedError

_register()

# Patched into a child process: SIGKILL at the step that creates the vector
# table, i.e. after the schema's steps ran in the same open.
_KILL_AT = {
    "sqlite": ("kbstore.backends.sqlite.vectors", "create_table"),
    "postgres": ("kbstore.backends.postgres.backend", "PostgresBackend._reshape"),
}


def _run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(params=["sqlite", "postgres"])
def new_location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "kb.sqlite")
    from tests import pg_server

    url = request.getfixturevalue("pg_url")
    return "postgres", f"{url}{'&' if '?' in url else '?'}kb={pg_server.unique_kb_name()}"


def _init_killed_at_vector_table(kind: str, location: str) -> subprocess.CompletedProcess:
    module, attr = _KILL_AT[kind]
    owner, _, name = attr.rpartition(".")
    script = textwrap.dedent(f"""
        import importlib, os, signal
        mod = importlib.import_module({module!r})
        target = getattr(mod, {owner!r}) if {owner!r} else mod
        def die(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
        setattr(target, {name!r}, die)
        from kbstore.cli import _register, cli
        _register()
        cli(["init", "--db", {location!r}, "--embedder", "fake", "--dim", "16"])
    """)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)


def test_init_killed_at_the_vector_table_leaves_no_half_store(
        new_location: tuple[str, str]) -> None:
    kind, location = new_location
    done = _init_killed_at_vector_table(kind, location)
    assert done.returncode == -signal.SIGKILL, done.stderr

    # Nothing a command takes for a store: read commands say "create it".
    status = _run("status", "--db", location)
    assert status.exit_code == 1
    assert "kbstore init" in status.output
    assert "Traceback" not in status.output
    assert "did not finish" not in status.output  # not a half-made store: nothing
    if kind == "sqlite":
        import sqlite3

        if Path(location).exists():  # the killed transaction never committed
            with sqlite3.connect(location) as conn:
                assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    else:
        import psycopg

        from kbstore.backends.postgres.connection import parse

        target = parse(location)
        with psycopg.connect(target.conninfo, autocommit=True) as conn:
            assert not conn.execute("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE "
                                    "nspname = %s)", (target.schema,)).fetchone()[0]

    again = _run("init", "--db", location, "--embedder", "fake", "--dim", "16")
    assert again.exit_code == 0, again.output
    assert "initialised" in again.output
    with KnowledgeStore.open(location, read_only=True) as store:
        assert store.status()["embedder"] == FakeEmbedder(16).fingerprint()
        assert store.search("anything") == []


def _half_made(kind: str, location: str) -> None:
    """What an older kbstore left when killed between its two transactions."""
    if kind == "sqlite":
        from kbstore.backends.sqlite import SQLiteBackend as Backend
    else:
        from kbstore.backends.postgres import PostgresBackend as Backend
    Backend.open(location, mode="create").close()  # the schema only: no stamp


def test_a_half_made_store_gets_a_clear_error_and_init_finishes_it(
        new_location: tuple[str, str]) -> None:
    kind, location = new_location
    _half_made(kind, location)
    for args in (("search", "--db", location, "deploy"), ("status", "--db", location),
                 ("doctor", "--db", location)):
        result = _run(*args)
        assert result.exit_code == 1, (args, result.output)
        assert "did not finish" in result.output and "kbstore init" in result.output
    with pytest.raises(NotInitializedError):
        KnowledgeStore.open(location, read_only=True)

    done = _run("init", "--db", location, "--embedder", "fake", "--dim", "16")
    assert done.exit_code == 0, done.output
    with KnowledgeStore.open(location, FakeEmbedder(16), hype=False) as store:
        store.upsert("notes/deploy.md", title="deploy", body="the deploy checklist")
        assert [h.path for h in store.search("deploy checklist")] == ["notes/deploy.md"]
        assert json.dumps(store.status()["embedder"], sort_keys=True) == json.dumps(
            FakeEmbedder(16).fingerprint(), sort_keys=True)


def test_racing_inits_make_one_store_and_say_which_made_it(
        new_location: tuple[str, str]) -> None:
    _, location = new_location
    argv = [sys.executable, "-m", "kbstore", "init", "--db", location, "--embedder", "fake",
            "--dim", "16"]
    runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], outputs
    said = sorted(out.split()[0] for out, _ in outputs)
    assert said == ["checked", "checked", "initialised"], outputs
    with KnowledgeStore.open(location, read_only=True) as store:
        assert store.status()["embedder"] == FakeEmbedder(16).fingerprint()


def test_a_failed_init_never_deletes_a_store_another_process_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kbstore.cli.admin as admin

    db = tmp_path / "kb.sqlite"
    real_open = admin.open_store

    def another_process_wins_then_this_one_fails(path: str, **kwargs):
        with real_open(path, create=True, embedder=FakeEmbedder(16)) as store:
            store.upsert("notes/keep.md", title="keep", body="made by the other process")
        raise OSError("disk full")

    monkeypatch.setattr(admin, "open_store", another_process_wins_then_this_one_fails)
    result = CliRunner().invoke(cli, ["init", "--db", str(db), "--embedder", "fake",
                                      "--dim", "16"])
    assert result.exit_code != 0
    monkeypatch.undo()
    with KnowledgeStore.open(db, read_only=True) as store:
        assert store.get("notes/keep.md") is not None


def test_a_failed_init_removes_the_file_it_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kbstore.backends.sqlite.vectors as vectors

    db = tmp_path / "kb.sqlite"

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(vectors, "create_table", fail)
    result = CliRunner().invoke(cli, ["init", "--db", str(db), "--embedder", "fake",
                                      "--dim", "16"])
    assert result.exit_code != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == []

"""The command line on SQLite files: the schema version and file it reports,
vec-path, files kbstore must refuse (a newer schema, not SQLite, another
application's database), migrate's steps, export next to its database."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite import vec_path
from kbstore.backends.sqlite.migrations import SCHEMA_VERSION

from .util import file_state, raw


def _one_line_error(result, *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 1, result.output
    lines = [line for line in (result.stderr or result.output).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_init_reports_schema_v5_and_status_the_file(run_cli, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("init", "--db", db_path, "--embedder", "fake", "--dim", "64")
    assert result.exit_code == 0
    assert result.output.strip() == (f"initialised {db_path}: schema v5, embedder fake "
                                     "(hashing-bow, 64 dims), 0 document(s)")
    assert SCHEMA_VERSION == 5
    info = json.loads(run_cli("status", "--db", db_path, "--json").output)
    assert info["path"] == str(db_path) and info["schema_version"] == 5
    assert info["file_bytes"] == db_path.stat().st_size > 0
    text = run_cli("status", "--db", db_path).output
    assert f"database        {db_path} ({db_path.stat().st_size:,} bytes)" in text


def test_init_in_a_missing_folder_creates_no_folder(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "typo" / "kb.sqlite"
    _one_line_error(run_cli("init", "--db", target, "--embedder", "fake"), "does not exist")
    assert not target.parent.exists()


def test_vec_path(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("vec-path")
    assert result.exit_code == 0 and result.output.strip() == vec_path()


def test_future_schema_error_is_one_line(run_cli, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    with KnowledgeStore.open(db_path, "fake", hype=False) as store:
        raw(store).execute("PRAGMA user_version = 99")
    for args in (("status",), ("search", "x"), ("import", db_path.parent)):
        _one_line_error(run_cli(args[0], "--db", db_path, *args[1:]), "upgrade kbstore")


def test_migrate_list_names_a_newer_kbstores_step_once(run_cli, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    with KnowledgeStore.open(db_path, "fake", hype=False) as store:
        raw(store).execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                           "VALUES ('kbstore', '0099_from_the_future', '2030-01-01')")
    result = run_cli("migrate", "--db", db_path, "--list")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert [line for line in lines if "0099_from_the_future" in line] == [
        "unknown  0099_from_the_future (from a newer kbstore)"]
    assert lines[0] == "applied  0001_initial" and len(lines) == SCHEMA_VERSION + 1


def test_a_file_that_is_not_sqlite_is_a_one_line_error(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("just some text, not SQLite\n" * 100)
    before = not_a_db.read_bytes()
    for args in (("status",), ("search", "x"), ("doctor",)):
        _one_line_error(run_cli(args[0], "--db", not_a_db, *args[1:]), "not a SQLite database")
    _one_line_error(run_cli("init", "--db", not_a_db, "--embedder", "fake"))
    assert not_a_db.read_bytes() == before


def _foreign(path: Path) -> dict[str, bytes | None]:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (9.5)")
    conn.commit()
    conn.close()
    return file_state(path)


@pytest.mark.parametrize("args", [("status",), ("search", "x"), ("doctor",), ("doctor", "--fix"),
                                  ("migrate",), ("migrate", "--list"),
                                  ("init", "--embedder", "fake")],
                         ids=lambda a: "-".join(a))
def test_another_applications_database_is_refused_untouched(run_cli, tmp_path: Path,
                                                           args) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "app.sqlite"
    before = _foreign(path)
    _one_line_error(run_cli(args[0], "--db", path, *args[1:]), "did not create", "invoices")
    assert file_state(path) == before


def test_another_applications_database_is_refused_by_the_api(tmp_path: Path) -> None:
    from kbstore import NotAKnowledgeBaseError

    path = tmp_path / "app.sqlite"
    before = _foreign(path)
    for read_only in (True, False):
        with pytest.raises(NotAKnowledgeBaseError, match="invoices"):
            KnowledgeStore.open(path, FakeEmbedder(64), read_only=read_only)
    assert file_state(path) == before


def test_an_empty_file_is_not_yet_a_store_for_read_commands(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "empty.sqlite"
    path.touch()
    _one_line_error(run_cli("status", "--db", path), "kbstore init")
    assert path.read_bytes() == b""
    assert run_cli("init", "--db", path, "--embedder", "fake").exit_code == 0  # it may become one


def test_migrate_applies_the_v2_to_v5_steps_to_a_v1_file(run_cli, legacy_v1: Path) -> None:  # type: ignore[no-untyped-def]
    before = file_state(legacy_v1)
    listed = run_cli("migrate", "--db", legacy_v1, "--list")
    assert listed.exit_code == 0
    assert listed.output.splitlines() == ["applied  0001_initial",
                                          "pending  0002_stable_ids_and_viewers",
                                          "pending  0003_chunk_vectors",
                                          "pending  0004_index_rows_written_per_batch",
                                          "pending  0005_sign_bits_index"]
    assert file_state(legacy_v1) == before  # --list is read-only
    _one_line_error(run_cli("status", "--db", legacy_v1), "kbstore migrate")
    assert file_state(legacy_v1) == before  # so is status on an outdated file
    applied = run_cli("migrate", "--db", legacy_v1)
    assert applied.output.strip() == ("applied 4 migration(s): 0002_stable_ids_and_viewers, "
                                      "0003_chunk_vectors, 0004_index_rows_written_per_batch, "
                                      "0005_sign_bits_index")
    assert run_cli("migrate", "--db", legacy_v1, "--list").output.splitlines() == [
        "applied  0001_initial", "applied  0002_stable_ids_and_viewers",
        "applied  0003_chunk_vectors", "applied  0004_index_rows_written_per_batch",
        "applied  0005_sign_bits_index"]
    info = json.loads(run_cli("status", "--db", legacy_v1, "--json").output)
    assert info["schema_version"] == 5 and info["documents"] == 3


@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_export_never_writes_over_its_own_database(run_cli, db_path: Path, suffix: str) -> None:  # type: ignore[no-untyped-def]
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=False) as store:
        store.upsert("projects/a.md", title="A", body="precious")
    target = Path(f"{db_path}{suffix}")  # -wal: the file a writer would have open
    before = file_state(db_path)
    for force in ((), ("--force",)):
        _one_line_error(run_cli("export", "--db", db_path, "--format", "jsonl", target, *force),
                        "database being exported")
    assert file_state(db_path) == before
    assert not list(db_path.parent.glob(".*.tmp"))  # no temp file left behind
    with KnowledgeStore.open(db_path, read_only=True) as store:
        assert store.get("projects/a.md").body == "precious"  # type: ignore[union-attr]


def test_read_only_doctor_says_the_fts5_check_was_skipped(run_cli, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The FTS5 integrity check is an INSERT: a read-only doctor cannot run it
    and says so ("skip"), rather than reporting it "ok"; --fix runs it."""
    run_cli("init", "--db", db_path, "--embedder", "fake", "--dim", "64")
    plain = run_cli("doctor", "--db", db_path)
    assert plain.exit_code == 0, plain.output
    line = next(x for x in plain.output.splitlines() if "fts_integrity" in x)
    assert line.startswith("skip   fts_integrity: ") and "--fix" in line
    report = json.loads(run_cli("doctor", "--db", db_path, "--json").output)
    check = next(c for c in report["checks"] if c["name"] == "fts_integrity")
    assert check["skipped"] is True and check["ok"] is True
    fixed = run_cli("doctor", "--db", db_path, "--fix")
    assert "ok     fts_integrity: FTS5 integrity-check: ok" in fixed.output, fixed.output

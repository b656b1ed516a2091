"""Read commands and read-only opens never create, convert or modify a file:
the database stays byte-identical and no -wal/-shm is left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore, ReadOnlyError, SchemaOutdatedError
from kbstore.doctor import diagnose
from kbstore.exchange import export_jsonl

from .util import connect_file, file_state


@pytest.fixture
def closed_store(db_path: Path, fake_llm) -> Path:  # type: ignore[no-untyped-def]
    """A WAL-mode store with documents, vectors and HyPE questions, closed."""
    with KnowledgeStore.open(db_path, FakeEmbedder(64), hype=True) as store:
        store.upsert("projects/deploy.md", title="Deploy", body="ship it with a canary",
                     tags=["ops"])
        store.upsert("domains/bread.md", title="Bread", body="knead the sourdough")
    state = file_state(db_path)
    assert state["-wal"] is None and state["-shm"] is None  # closing folds the WAL back
    return db_path


READ_COMMANDS = [
    ("status",), ("status", "--json"), ("search", "canary deploy"),
    ("search", "canary", "--explain", "--json"), ("search", "canary", "--shell"),
    ("doctor",), ("doctor", "--json"), ("migrate", "--list"), ("hype", "--dry-run"),
    ("hype", "--all", "--dry-run", "--json"),
]


@pytest.mark.parametrize("args", READ_COMMANDS, ids=lambda a: "-".join(a))
def test_read_commands_leave_the_file_byte_identical(run_cli, closed_store: Path,
                                                    args) -> None:  # type: ignore[no-untyped-def]
    before = file_state(closed_store)
    result = run_cli(args[0], "--db", closed_store, *args[1:])
    assert result.exit_code == 0, result.output
    assert file_state(closed_store) == before


@pytest.mark.parametrize("fmt", ["jsonl", "markdown"])
def test_export_leaves_the_file_byte_identical(run_cli, closed_store: Path, tmp_path: Path,
                                               fmt: str) -> None:  # type: ignore[no-untyped-def]
    before = file_state(closed_store)
    out = tmp_path / ("out.jsonl" if fmt == "jsonl" else "out")
    result = run_cli("export", "--db", closed_store, "--format", fmt, out)
    assert result.exit_code == 0, result.output
    assert out.exists()
    assert file_state(closed_store) == before


def test_a_read_only_store_reads_everything_and_writes_nothing(closed_store: Path,
                                                               tmp_path: Path) -> None:
    before = file_state(closed_store)
    with KnowledgeStore.open(closed_store, read_only=True) as store:
        assert store.status()["read_only"] is True
        assert store.search("canary", limit=1)[0].path == "projects/deploy.md"
        assert store.get("domains/bread.md").body == "knead the sourdough"  # type: ignore[union-attr]
        assert diagnose(store).ok
        assert export_jsonl(store, tmp_path / "x.jsonl") == 2
        with pytest.raises(ReadOnlyError):
            store.upsert("projects/new.md", title="New", body="refused")
        with pytest.raises(ReadOnlyError):
            store.delete("projects/deploy.md")
        with pytest.raises(ReadOnlyError):
            store.reembed(FakeEmbedder(32))
        assert len(store) == 2
    assert file_state(closed_store) == before


def test_a_read_only_open_while_a_writer_works_sees_its_commits(closed_store: Path) -> None:
    with KnowledgeStore.open(closed_store, FakeEmbedder(64), hype=False) as writer, \
            KnowledgeStore.open(closed_store, read_only=True) as reader:
        writer.upsert("projects/later.md", title="Later", body="written after the reader opened")
        assert reader.get("projects/later.md") is not None
        assert reader.search("written after", limit=1)[0].path == "projects/later.md"


def test_a_file_with_pending_migrations_is_not_migrated_by_a_read(legacy_v1: Path) -> None:
    before = file_state(legacy_v1)
    with pytest.raises(SchemaOutdatedError, match="kbstore migrate"):
        KnowledgeStore.open(legacy_v1, read_only=True)
    assert file_state(legacy_v1) == before


def test_the_connection_factorys_read_mode_cannot_write(closed_store: Path) -> None:
    before = file_state(closed_store)
    conn = connect_file(closed_store, mode="read")
    try:
        assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == 2
        with pytest.raises(Exception, match="readonly|read-only"):
            conn.execute("DELETE FROM documents")
    finally:
        conn.close()
    assert file_state(closed_store) == before


def test_a_missing_fingerprint_is_never_repaired_by_a_read(run_cli, closed_store: Path) -> None:  # type: ignore[no-untyped-def]
    """Formerly status/doctor/search on a file without its embedder row
    deleted every vector and stamped a nomic fingerprint."""
    conn = connect_file(closed_store)
    try:
        conn.execute("DELETE FROM meta WHERE key = 'embedder'")
        vectors = conn.execute("SELECT count(*) FROM vector_data").fetchone()[0]
    finally:
        conn.close()
    assert vectors > 0
    before = file_state(closed_store)
    assert run_cli("status", "--db", closed_store).exit_code == 0
    hits = run_cli("search", "--db", closed_store, "canary", "--json")
    assert hits.exit_code == 0 and "projects/deploy.md" in hits.output  # text retrievers only
    doctor = run_cli("doctor", "--db", closed_store)
    assert doctor.exit_code == 1 and "fingerprint" in doctor.output
    assert file_state(closed_store) == before

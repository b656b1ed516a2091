"""Issue 10's rules through the CLI and the public API: nothing deleted that
was not asked for, read commands touch nothing, old-or-new state only,
clear refusals instead of traps."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from kbstore import (
    EmbedderChangedError,
    EmbedderMismatchError,
    FakeEmbedder,
    InvalidQueryError,
    KBStoreError,
    KnowledgeStore,
)
from kbstore.cli import _register, cli

_register()


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


def _fill(db: Path, n: int = 8, dim: int = 64) -> None:
    with KnowledgeStore.open(db, FakeEmbedder(dim), hype=False) as store:
        for i in range(n):
            store.upsert(f"projects/note-{i}.md", title=f"note {i}",
                         body=f"deploy rollback step {i} with sourdough {i}", tags=["ops"])


def _count(db: Path) -> int:
    with KnowledgeStore.open(db, read_only=True) as store:
        return len(store)


def _digest(path: Path) -> tuple[str, list[str]]:
    """File bytes and the folder listing: what a read command must not change."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), sorted(os.listdir(path.parent))


def _workspace(root: Path, n: int) -> Path:
    for i in range(n):
        folder = root / "knowledge" / "projects"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{i}.md").write_text(
            f"---\ntitle: note {i}\ntags: [ops]\n---\ndeploy rollback step {i}\n")
    return root


# -- rule 1: nothing deleted or replaced that was not asked for -----------------------


def test_demo_never_replaces_an_existing_database(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    _fill(db)
    before = _digest(db)
    result = run("demo", "--db", db, "--embedder", "fake")
    assert result.exit_code == 1 and "exists" in result.output
    assert _digest(db) == before and _count(db) == 8


@pytest.mark.parametrize("target", ["empty", "parent", "unrelated"])
def test_import_of_a_wrong_folder_deletes_nothing(tmp_path: Path, target: str) -> None:
    ws = _workspace(tmp_path / "home" / "workspace", 8)
    db = tmp_path / "kb.sqlite"
    assert run("import", "--db", db, ws, "--embedder", "fake", "--no-hype").exit_code == 0
    folder = {"empty": tmp_path / "empty", "parent": ws.parent,
              "unrelated": tmp_path / "photos"}[target]
    folder.mkdir(exist_ok=True)
    (folder / "readme.txt").write_text("not a workspace")
    result = run("import", "--db", db, folder)
    assert result.exit_code == 1
    assert "kept 8 document(s)" in result.output and "--prune" in result.output
    assert _count(db) == 8


def test_import_lists_deletions_and_prune_confirms_a_mass_removal(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws", 8)
    db = tmp_path / "kb.sqlite"
    run("import", "--db", db, ws, "--embedder", "fake", "--no-hype")
    (ws / "knowledge" / "projects" / "note-0.md").unlink()  # an ordinary removal
    result = run("import", "--db", db, ws)
    assert result.exit_code == 0
    assert "deleting 1 document(s)" in result.output and "projects/note-0.md" in result.output
    assert _count(db) == 7
    for i in range(1, 6):  # five of seven: looks like a mistake
        (ws / "knowledge" / "projects" / f"note-{i}.md").unlink()
    assert run("import", "--db", db, ws).exit_code == 1 and _count(db) == 7
    assert run("import", "--db", db, ws, "--no-prune").exit_code == 0 and _count(db) == 7
    result = run("import", "--db", db, ws, "--prune")
    assert result.exit_code == 0 and "deleting 5 document(s)" in result.output
    assert _count(db) == 2


def test_picobot_search_keeps_the_index_when_knowledge_is_briefly_missing(
        tmp_path: Path) -> None:
    from kbstore.picobot import KnowledgeBase

    ws = _workspace(tmp_path / "ws", 8)
    with KnowledgeBase(workspace=ws, data_dir=tmp_path / "data", embedder=FakeEmbedder(64),
                       hype=False) as kb:
        assert "note 3" in kb.search("rollback step 3")
    (ws / "knowledge").rename(ws / "knowledge.syncing")
    with KnowledgeBase(workspace=ws, data_dir=tmp_path / "data", embedder=FakeEmbedder(64),
                       hype=False) as kb:
        assert "note 3" in kb.search("rollback step 3")
    assert _count(tmp_path / "data" / "kb.sqlite") == 8


def test_export_never_replaces_its_source_or_an_existing_file(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    _fill(db)
    before = _digest(db)
    result = run("export", "--db", db, "--format", "jsonl", db)
    assert result.exit_code == 1 and "database being exported" in result.output
    assert _digest(db) == before
    out = tmp_path / "kb.jsonl"
    out.write_text("my own notes\n")
    assert run("export", "--db", db, "--format", "jsonl", out).exit_code == 1
    assert out.read_text() == "my own notes\n"
    assert run("export", "--db", db, "--format", "jsonl", out, "--force").exit_code == 0
    assert len(out.read_text().splitlines()) == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.jsonl", "kb.sqlite"]


def test_a_failed_export_leaves_no_file_behind(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from kbstore import exchange

    db = tmp_path / "kb.sqlite"
    _fill(db)
    real = exchange.document_records

    def breaks_midway(store, include_vectors=False):
        for n, record in enumerate(real(store, include_vectors)):
            if n == 3:
                raise OSError("disk full")
            yield record

    monkeypatch.setattr(exchange, "document_records", breaks_midway)
    with KnowledgeStore.open(db, read_only=True) as store, pytest.raises(OSError):
        exchange.export_jsonl(store, tmp_path / "out.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.sqlite"]


# -- read commands never create, convert or modify ----------------------------------------


READ_COMMANDS = [
    ("search", "rollback"), ("status",), ("doctor",), ("migrate", "--list"),
    ("export", "--format", "jsonl", "-"), ("hype", "--dry-run"),
]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_read_commands_leave_the_file_and_folder_as_they_were(tmp_path: Path,
                                                              command: tuple[str, ...]) -> None:
    db = tmp_path / "kb.sqlite"
    _fill(db)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = DELETE")  # a converted file would show WAL
    conn.close()
    before = _digest(db)
    result = run(command[0], "--db", db, *command[1:])
    assert result.exit_code == 0, result.output
    assert _digest(db) == before
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


@pytest.mark.parametrize("command", [*READ_COMMANDS, ("reembed", "--embedder", "fake"),
                                     ("doctor", "--fix")], ids=lambda c: c[0])
def test_a_mistyped_db_creates_nothing(tmp_path: Path, command: tuple[str, ...]) -> None:
    typo = tmp_path / "no-such-dir" / "kb.sqllite"
    result = run(command[0], "--db", typo, *command[1:])
    assert result.exit_code == 1 and "no database at" in result.output
    assert not typo.parent.exists() and list(tmp_path.iterdir()) == []


def test_a_foreign_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    other = tmp_path / "photos.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    before = _digest(other)
    for args in (("status",), ("search", "x"), ("import", tmp_path), ("doctor", "--fix")):
        result = run(args[0], "--db", other, *args[1:])
        assert result.exit_code == 1 and "did not create" in result.output
    assert _digest(other) == before


def test_a_missing_fingerprint_is_never_replaced_by_a_read(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    _fill(db)
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM meta WHERE key = 'embedder'")
    conn.commit()
    conn.close()
    before = _digest(db)
    assert run("status", "--db", db).exit_code == 0
    assert "no embedder fingerprint" in run("doctor", "--db", db).output
    assert "projects/note-3.md" in run("search", "--db", db, "rollback step 3").output
    assert _digest(db) == before
    result = run("doctor", "--db", db, "--fix", "--embedder", "fake")
    assert result.exit_code == 0, result.output
    with KnowledgeStore.open(db, read_only=True) as store:
        status = store.status()
        assert status["embedder"]["name"] == "fake" and status["doc_vectors"] == 8


# -- the embedder: no traps, no silent mixing ---------------------------------------------


def test_an_empty_store_takes_the_first_embedder_that_works(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    assert run("init", "--db", db).exit_code == 0  # nomic: cannot embed offline
    ws = _workspace(tmp_path / "ws", 3)
    result = run("import", "--db", db, ws, "--embedder", "fake", "--no-hype")
    assert result.exit_code == 0, result.output
    with KnowledgeStore.open(db, read_only=True) as store:
        assert store.status()["embedder"]["name"] == "fake" and len(store) == 3
    # With documents, another embedder is a clear refusal naming the way out.
    result = run("import", "--db", db, ws, "--embedder", "minilm")
    assert result.exit_code == 1 and "kbstore reembed" in result.output


def test_bad_dimensions_are_refused_before_a_file_exists(tmp_path: Path) -> None:
    for args in (("--embedder", "fake", "--dim", "4097"), ("--embedder", "fake", "--dim", "0"),
                 ("--embedder", "minilm", "--dim", "128"), ("--embedder", "nomic", "--dim", "100")):
        db = tmp_path / "kb.sqlite"
        result = run("init", "--db", db, *args)
        assert result.exit_code == 1, args
        assert not db.exists(), args


class _Broken(FakeEmbedder):
    """Works for ``good`` texts, then raises like an offline model."""

    def __init__(self, dim: int, good: int) -> None:
        super().__init__(dim)
        self.good = good

    def fingerprint(self):
        return {**super().fingerprint(), "model": "broken"}

    def embed_documents(self, texts):
        if self.calls + len(texts) > self.good:
            raise KBStoreError("model download failed: no network")
        return super().embed_documents(texts)


@pytest.mark.parametrize("good", [0, 1, 40])
def test_a_failing_reembed_changes_nothing(tmp_path: Path, good: int) -> None:
    db = tmp_path / "kb.sqlite"
    _fill(db, n=100)
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        before = [h.path for h in store.search("rollback step 7")]
        with pytest.raises(KBStoreError, match="no network"):
            store.reembed(_Broken(32, good), batch_size=16)
        status = store.status()
        assert status["embedder"]["model"] == "hashing-bow" and status["doc_vectors"] == 100
        assert status["vectors"] == 100
        assert [h.path for h in store.search("rollback step 7")] == before
        # Running it again with a working model finishes the job.
        assert store.reembed(FakeEmbedder(32), batch_size=16) == 100
        assert store.status()["embedder"]["dim"] == 32
        assert not store.status()["rebuild_in_progress"]


def test_a_delete_racing_reembed_is_not_undone(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    _fill(db, n=40)

    class DeletesMidway(FakeEmbedder):
        def embed_documents(self, texts):
            if self.calls and not getattr(self, "done", False):
                self.done = True  # another process deletes while we are staging
                with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as other:
                    assert other.delete("projects/note-0.md")
                    assert other.delete("projects/note-39.md")
            return super().embed_documents(texts)

    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        store.reembed(DeletesMidway(32), batch_size=8)
        assert "projects/note-0.md" not in store.paths()
        assert "projects/note-39.md" not in store.paths()
        assert len(store) == 38 and store.status()["doc_vectors"] == 38


def test_a_long_lived_store_notices_another_process_reembed(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    _fill(db)
    follower = KnowledgeStore.open(db, hype=False)             # embedder from the file
    pinned = KnowledgeStore.open(db, FakeEmbedder(64), hype=False)  # embedder given
    with KnowledgeStore.open(db, hype=False) as other:
        other.reembed(FakeEmbedder(32))
    try:
        assert follower.search("rollback step 2")[0].path == "projects/note-2.md"
        follower.upsert("projects/new.md", title="new", body="after the reembed")
        with pytest.raises(EmbedderChangedError):
            pinned.upsert("projects/stale.md", title="stale", body="old model vector")
        with pytest.raises(EmbedderChangedError):
            pinned.search("rollback")
    finally:
        follower.close()
        pinned.close()
    with KnowledgeStore.open(db, read_only=True) as store:
        assert "projects/stale.md" not in store.paths()
        assert store.status()["doc_vectors"] == 9


def test_another_embedder_on_a_store_with_documents_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    _fill(db)
    with pytest.raises(EmbedderMismatchError, match="kbstore reembed"):
        KnowledgeStore.open(db, FakeEmbedder(32), hype=False)
    assert _count(db) == 8


# -- the API refuses nonsense with a clear error ----------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {"limit": 2 ** 63}, {"limit": 0}, {"limit": True}, {"topic": ["projects"]}, {"topic": ""},
    {"query_vector": [0.1] * 3}, {"query_vector": [float("nan")] * 64},
    {"boost_skill": float("inf")}, {"k_rrf": -1}, {"w_vec": -0.5}, {"fusion": "max"},
    {"half_life_days": -3}, {"now": "yesterday-ish"}, {"min_similarity": 5},
    {"vec_k_doc": 10 ** 6},
])
def test_bad_search_arguments_are_clear_errors(store: KnowledgeStore, kwargs: dict) -> None:
    store.upsert("projects/a.md", title="a", body="rollback")
    with pytest.raises(InvalidQueryError):
        store.search("rollback", **kwargs)


@pytest.mark.parametrize("off", [None, 0, 0.0])
def test_recency_decay_has_a_clean_off(store: KnowledgeStore, off) -> None:
    store.upsert("journal/2020-01-01-old.md", title="old deploy", body="rollback story",
                 updated="2020-01-01")
    [hit] = store.search("rollback story", half_life_days=off, explain=True,
                         now="2026-01-01")
    assert hit.explain["decay"] == 1.0

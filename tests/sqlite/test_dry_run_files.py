"""A dry run leaves the database file alone: same bytes, same mtime, no -wal
or -shm left beside it (SQLite only: it looks at the files)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from kbstore import FakeEmbedder, KnowledgeStore


def _state(db: Path) -> tuple[str, int, list[str]]:
    return (hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns,
            sorted(os.listdir(db.parent)))


@pytest.mark.parametrize("command", ["import", "import-npz", "copy", "watch", "reembed",
                                     "import-jsonl"])
def test_a_dry_run_changes_no_byte_of_the_file(run_cli: Any, tmp_path: Path,
                                               command: str) -> None:
    import numpy as np

    db, other = tmp_path / "kb.sqlite", tmp_path / "src" / "other.sqlite"
    ws = tmp_path / "ws" / "projects"
    ws.mkdir(parents=True)
    other.parent.mkdir()
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        for i in range(6):
            store.upsert(f"projects/n{i}.md", title=f"n{i}", body=f"body {i}")
    with KnowledgeStore.open(other, FakeEmbedder(64), hype=False) as store:
        store.upsert("projects/n0.md", title="n0", body="another body")
    (ws / "n0.md").write_text("---\ntitle: n0\n---\nchanged\n")
    npz, jsonl = tmp_path / "src" / "e.npz", tmp_path / "src" / "kb.jsonl"
    np.savez(npz, vectors=np.ones((0, 64), np.float32), doc_ids=np.array([], str),
             content_hashes=np.array([], str))
    assert run_cli("export", "--db", other, "--format", "jsonl", jsonl).exit_code == 0
    args = {"import": ["import", "--db", db, ws.parent, "--prune"],
            "import-npz": ["import-npz", "--db", db, "--workspace", ws.parent, npz, "--prune"],
            "copy": ["copy", other, db, "--prune", "--force"],
            "watch": ["watch", ws.parent, "--db", db],
            "reembed": ["reembed", "--db", db, "--embedder", "fake", "--dim", "32"],
            "import-jsonl": ["import-jsonl", "--db", db, jsonl]}[command]
    before = _state(db)
    result = run_cli(*args, "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("dry run, nothing written: would ")
    assert _state(db) == before

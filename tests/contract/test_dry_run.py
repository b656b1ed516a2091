"""--dry-run on every command that can delete or overwrite stored documents
(import, import-npz, import-jsonl, copy, watch's initial sync, reembed): it
lists exactly what would be added, updated and deleted, and writes nothing
(the store's whole export is the same afterwards; a missing store is not
created). The real run then does what the dry run said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kbstore import FakeEmbedder, KnowledgeStore

from .public import records


def _workspace(root: Path, n: int) -> Path:
    folder = root / "knowledge" / "projects"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"note-{i}.md").write_text(f"---\ntitle: note {i}\n---\nbody {i}\n")
    return root


def _everything(location: str) -> list[dict[str, Any]]:
    with KnowledgeStore.open(location, read_only=True) as store:
        return records(store, vectors=True)


def _dry_lines(run_cli: Any, *args: Any) -> list[str]:
    result = run_cli(*args, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "deleting" not in result.stderr
    return result.stdout.splitlines()


@pytest.fixture
def imported(backend: Any, run_cli: Any, tmp_path: Path) -> tuple[str, Path]:
    location, ws = backend(), _workspace(tmp_path / "ws", 8)
    result = run_cli("import", "--db", location, ws, "--embedder", "fake", "--no-hype")
    assert result.exit_code == 0, result.output
    return location, ws


def _edit(ws: Path) -> None:
    folder = ws / "knowledge" / "projects"
    (folder / "new.md").write_text("---\ntitle: new\n---\nfresh\n")
    (folder / "note-1.md").write_text("---\ntitle: note 1\n---\nchanged body\n")
    (folder / "note-2.md").unlink()


def test_import_dry_run_lists_the_changes_and_writes_nothing(imported: Any,
                                                             run_cli: Any) -> None:
    location, ws = imported
    _edit(ws)
    before = _everything(location)
    assert _dry_lines(run_cli, "import", "--db", location, ws) == [
        "dry run, nothing written: would add 1, update 1, leave 6 unchanged, delete 1, keep 0 "
        "missing, skip 0",
        "  would add 1 document(s): projects/new.md",
        "  would update 1 document(s): projects/note-1.md",
        "  would delete 1 document(s) whose files are gone: projects/note-2.md"]
    assert _everything(location) == before
    real = run_cli("import", "--db", location, ws)
    assert real.stdout.startswith("added 1, updated 1, unchanged 6, deleted 1,")


def test_import_dry_run_shows_a_held_back_removal(imported: Any, run_cli: Any) -> None:
    location, ws = imported
    for i in range(5):
        (ws / "knowledge" / "projects" / f"note-{i}.md").unlink()
    before = _everything(location)
    dry = run_cli("import", "--db", location, ws, "--dry-run", "--json")
    plan = json.loads(dry.stdout)
    assert (plan["delete"], plan["keep_reason"]) == ([], "5 of 8 documents would be deleted")
    assert plan["keep"] == [f"projects/note-{i}.md" for i in range(5)]
    forced = json.loads(run_cli("import", "--db", location, ws, "--dry-run", "--json",
                                "--prune").stdout)
    assert (forced["delete"], forced["keep"]) == (plan["keep"], [])
    text = run_cli("import", "--db", location, ws, "--dry-run").stdout
    assert ("would keep 5 document(s) whose files are gone (5 of 8 documents would be "
            "deleted): projects/note-0.md") in text and "rerun with --prune" in text
    assert _everything(location) == before


def test_a_dry_run_never_creates_a_store(backend: Any, run_cli: Any, tmp_path: Path) -> None:
    location, ws = backend(), _workspace(tmp_path / "ws", 15)
    dry = run_cli("import", "--db", location, ws, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.startswith("dry run, nothing written: would add 15, update 0,")
    # long lists are cut after ten paths
    assert dry.stdout.splitlines()[1].endswith("projects/note-4.md ... and 5 more")
    assert not backend.exists(location)


def test_copy_dry_run_lists_what_prune_would_delete(backend: Any, run_cli: Any,
                                                    imported: Any) -> None:
    src, _ = imported
    dst = backend("dst")
    with KnowledgeStore.open(dst, FakeEmbedder(64), hype=False) as store:
        store.upsert("projects/note-0.md", title="note 0", body="another body")
        store.upsert("projects/mine.md", title="mine", body="only here")
    before = _everything(dst)
    lines = _dry_lines(run_cli, "copy", src, dst, "--prune")
    assert lines[0] == ("dry run, nothing written: would add 7, update 1, leave 0 unchanged, "
                        "delete 1, keep 0 missing, skip 0")
    assert "  would update 1 document(s): projects/note-0.md" in lines
    assert "  would delete 1 document(s) the source does not have: projects/mine.md" in lines
    assert _everything(dst) == before
    missing = backend("none")
    fresh = run_cli("copy", src, missing, "--dry-run")
    assert fresh.stdout.startswith("dry run, nothing written: would add 8,")
    assert not backend.exists(missing)


def test_import_jsonl_dry_run(imported: Any, run_cli: Any, tmp_path: Path) -> None:
    location, _ = imported
    out = tmp_path / "kb.jsonl"
    assert run_cli("export", "--db", location, "--format", "jsonl", out).exit_code == 0
    lines = out.read_text().splitlines()
    first = json.loads(lines[0])
    first["body"] = "edited in the export"
    out.write_text("\n".join([json.dumps(first), *lines[1:], "not json"]) + "\n")
    before = _everything(location)
    assert _dry_lines(run_cli, "import-jsonl", "--db", location, out) == [
        "dry run, nothing written: would add 0, update 1, leave 7 unchanged, delete 0, keep 0 "
        "missing, skip 1",
        f"  would update 1 document(s): {first['path']}",
        f"  would skip {out}:9: not JSON (Expecting value)"]
    assert _everything(location) == before


def test_import_npz_and_watch_dry_runs(imported: Any, run_cli: Any, tmp_path: Path) -> None:
    import numpy as np

    location, ws = imported
    npz = tmp_path / "embeddings.npz"
    np.savez(npz, vectors=np.ones((1, 64), np.float32), doc_ids=np.array(["projects/new.md"]),
             content_hashes=np.array(["x"]))
    _edit(ws)
    before = _everything(location)
    expected = run_cli("import", "--db", location, ws, "--dry-run").stdout
    npz_dry = run_cli("import-npz", "--db", location, "--workspace", ws, npz, "--dry-run")
    # the import's plan, plus which documents the npz spares from embedding and why
    npz_lines = [line for line in npz_dry.stdout.splitlines()
                 if not line.startswith(("  would reuse ", "    embed "))]
    assert npz_dry.exit_code == 0 and "\n".join(npz_lines) + "\n" == expected
    assert "  would reuse 0 vector(s) from the file and embed 2 document(s)\n" in npz_dry.stdout
    assert "    embed 1: its body changed since the npz was written\n" in npz_dry.stdout
    watch_dry = run_cli("watch", ws, "--db", location, "--dry-run")
    assert watch_dry.exit_code == 0 and watch_dry.stdout == expected
    assert _everything(location) == before


def test_reembed_dry_run(imported: Any, run_cli: Any) -> None:
    location, _ = imported
    before = _everything(location)
    dry = run_cli("reembed", "--db", location, "--embedder", "fake", "--dim", "32", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.startswith("dry run, nothing written: would replace the vectors of 8 "
                                 "document(s)")
    assert "with fake:hashing-bow:32" in dry.stdout or "with fake" in dry.stdout
    assert _everything(location) == before


@pytest.mark.parametrize("command", ["import", "import-npz", "import-jsonl", "copy", "watch",
                                     "reembed"])
def test_every_deleting_or_replacing_command_has_a_dry_run(run_cli: Any, command: str) -> None:
    assert "--dry-run" in run_cli(command, "--help").stdout

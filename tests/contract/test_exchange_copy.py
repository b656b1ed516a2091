"""``kbstore copy`` between stores: what ``--prune`` deletes is listed first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbstore import FakeEmbedder, KnowledgeStore


def test_copy_prune_lists_what_it_deletes_before_deleting(tmp_path: Path, run_cli: Any) -> None:
    src, dst = tmp_path / "src.sqlite", tmp_path / "dst.sqlite"
    with KnowledgeStore.open(src, FakeEmbedder(16), hype=False) as store:
        store.upsert("projects/a.md", title="a", body="alpha")
    with KnowledgeStore.open(dst, FakeEmbedder(16), hype=False) as store:
        store.upsert("projects/old.md", title="old", body="only here")
    kept = run_cli("copy", src, dst)
    assert kept.exit_code == 0 and "kept; --prune deletes them" in kept.stderr
    with KnowledgeStore.open(dst, FakeEmbedder(16)) as store:
        assert store.paths() == ["projects/a.md", "projects/old.md"]
    pruned = run_cli("copy", src, dst, "--prune")
    assert pruned.exit_code == 0, pruned.output
    assert "deleting 1 document(s) the source does not have: projects/old.md" in pruned.stderr
    with KnowledgeStore.open(dst, FakeEmbedder(16)) as store:
        assert store.paths() == ["projects/a.md"]

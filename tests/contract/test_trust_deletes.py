"""Commands that delete: `copy --prune` follows import's removal rule (half
the destination or an empty source is refused unless --force), and names
what it deletes before deleting."""

from __future__ import annotations

from typing import Any

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.transfer import copy_store


def _fill(location: str, prefix: str, n: int) -> list[str]:
    with KnowledgeStore.open(location, FakeEmbedder(16), hype=False) as store:
        for i in range(n):
            store.upsert(f"projects/{prefix}-{i}.md", title=f"{prefix} {i}",
                         body=f"{prefix} note number {i}")
        return store.paths()


def _paths(location: str) -> list[str]:
    with KnowledgeStore.open(location, read_only=True) as store:
        return store.paths()


def test_copy_prune_refuses_to_delete_half_the_destination(backend: Any, run_cli: Any) -> None:
    src, dst = backend("src"), backend("dst")
    theirs, ours = _fill(src, "new", 10), _fill(dst, "old", 10)
    refused = run_cli("copy", src, dst, "--prune")
    assert refused.exit_code == 1
    assert "deleting" not in refused.stderr
    assert (f"kept 10 document(s) the source does not have (10 of 20 documents would be "
            f"deleted): {', '.join(ours)}\n  they were not deleted; rerun with --prune --force "
            "to delete them") in refused.stderr
    assert _paths(dst) == sorted(theirs + ours)  # copied, nothing deleted
    forced = run_cli("copy", src, dst, "--prune", "--force")
    assert forced.exit_code == 0, forced.output
    assert (f"deleting 10 document(s) the source does not have: {', '.join(ours)}"
            in forced.stderr)
    assert "deleted 10 document(s) the source does not have" in forced.stdout
    assert _paths(dst) == theirs


def test_copy_prune_from_an_empty_source_deletes_nothing(backend: Any, run_cli: Any) -> None:
    src, dst = backend("src"), backend("dst")
    KnowledgeStore.open(src, FakeEmbedder(16), hype=False).close()
    ours = _fill(dst, "old", 2)  # fewer than the mass-delete minimum: the empty source is why
    refused = run_cli("copy", src, dst, "--prune")
    assert refused.exit_code == 1 and "deleting" not in refused.stderr
    assert "kept 2 document(s) the source does not have (the source " in refused.stderr
    assert "holds no documents)" in refused.stderr
    assert _paths(dst) == ours


def test_copy_store_keeps_a_mass_removal_unless_forced(backend: Any) -> None:
    src, dst = backend("src"), backend("dst")
    theirs, ours = _fill(src, "new", 6), _fill(dst, "old", 6)
    seen: list[list[str]] = []
    report = copy_store(src, dst, prune=True, before_delete=seen.append)
    assert (report.pruned, seen, report.extra_in_destination) == (0, [], ours)
    assert report.kept_reason == "6 of 12 documents would be deleted"
    report = copy_store(src, dst, prune=True, force=True, before_delete=seen.append)
    assert (report.pruned, seen, report.extra_in_destination) == (6, [ours], [])
    assert _paths(dst) == theirs


def test_copy_prune_of_a_few_documents_still_deletes(backend: Any, run_cli: Any) -> None:
    src, dst = backend("src"), backend("dst")
    theirs = _fill(src, "new", 8)
    ours = _fill(dst, "old", 1)
    result = run_cli("copy", src, dst, "--prune")
    assert result.exit_code == 0, result.output
    assert f"deleting 1 document(s) the source does not have: {ours[0]}" in result.stderr
    assert _paths(dst) == theirs


def test_copy_force_needs_prune(backend: Any, run_cli: Any) -> None:
    src, dst = backend("src"), backend("dst")
    _fill(src, "new", 1)
    result = run_cli("copy", src, dst, "--force")
    assert result.exit_code == 2 and "--force only applies with --prune" in result.stderr
    assert not backend.exists(dst)

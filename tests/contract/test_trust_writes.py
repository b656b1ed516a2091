"""Commands that delete or replace: `copy --prune` follows import's removal
rule (half the destination or an empty source is refused unless --force) and
names what it deletes before deleting; `import-jsonl` never mixes vectors of
two embedders (a new store takes the export's, another chosen one is refused)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.transfer import copy_store

from .public import doc_vectors


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


# -- import-jsonl keeps the export's embedder -----------------------------------------


def _export(run_cli: Any, location: str, out: Any) -> str:
    result = run_cli("export", "--db", location, "--format", "jsonl", "--vectors", out)
    assert result.exit_code == 0, result.output
    return Path(out).read_text(encoding="utf-8")


def _status(run_cli: Any, location: str) -> dict[str, Any]:
    result = run_cli("status", "--db", location, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("via", ["file", "stdin"])
def test_import_jsonl_into_a_new_store_uses_the_exports_embedder(
        backend: Any, run_cli: Any, tmp_path: Path, via: str) -> None:
    src, dst = backend("src"), backend("dst")
    paths = _fill(src, "n", 5)
    text = _export(run_cli, src, tmp_path / "out.jsonl")
    args = ["import-jsonl", "--db", dst, "--json"]
    result = (run_cli(*args, tmp_path / "out.jsonl") if via == "file"
              else run_cli(*args, "-", input=text))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["reused_vectors"], report["embedded"], report["fingerprint_mismatch"]) == (
        5, 0, 0)
    assert _status(run_cli, dst)["embedder"] == _status(run_cli, src)["embedder"]
    with KnowledgeStore.open(src, read_only=True) as a, KnowledgeStore.open(
            dst, read_only=True) as b:
        assert doc_vectors(a) == doc_vectors(b) and b.paths() == paths


def test_import_jsonl_refuses_a_chosen_embedder_other_than_the_exports(
        backend: Any, run_cli: Any, tmp_path: Path) -> None:
    src, dst = backend("src"), backend("dst")
    _fill(src, "n", 3)
    _export(run_cli, src, tmp_path / "out.jsonl")
    result = run_cli("import-jsonl", "--db", dst, tmp_path / "out.jsonl", "--embedder", "minilm")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {tmp_path / 'out.jsonl'} holds vectors made by "
                                    "fake")
    assert "leave out --embedder" in result.stderr and "kbstore reembed" in result.stderr
    assert not backend.exists(dst)
    same = run_cli("import-jsonl", "--db", dst, tmp_path / "out.jsonl", "--embedder", "fake")
    assert same.exit_code == 0 and _status(run_cli, dst)["embedder"]["dim"] == 16


def test_import_jsonl_into_a_store_of_another_model_says_it_embedded_again(
        backend: Any, run_cli: Any, tmp_path: Path) -> None:
    src, dst = backend("src"), backend("dst")
    _fill(src, "n", 3)
    _export(run_cli, src, tmp_path / "out.jsonl")
    with KnowledgeStore.open(dst, FakeEmbedder(32), hype=False) as store:
        store.upsert("projects/mine.md", title="mine", body="my own note")
    result = run_cli("import-jsonl", "--db", dst, tmp_path / "out.jsonl", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["reused_vectors"], report["embedded"], report["fingerprint_mismatch"]) == (
        0, 3, 3)
    assert "the vectors of 3 record(s) were made by another embedder" in result.stderr
    assert _status(run_cli, dst)["embedder"]["dim"] == 32  # one model's vectors only


def test_copy_into_an_existing_store_of_another_embedder_keeps_its_own(
        backend: Any, run_cli: Any) -> None:
    """An existing destination keeps its own embedder (the documents are
    embedded again with it). Formerly the destination was opened with the
    source's embedder and the copy refused, telling the user to reembed
    the destination."""
    src, dst = backend("src"), backend("dst")
    with KnowledgeStore.open(src, FakeEmbedder(32), hype=False) as store:
        for i in range(4):
            store.upsert(f"projects/new-{i}.md", title=f"new {i}", body=f"new note {i}")
    ours = _fill(dst, "old", 4)
    result = run_cli("copy", src, dst)
    assert result.exit_code == 0, result.output
    assert "embedded 4 document(s)" in result.stdout and "reused 0 vectors" in result.stdout
    with KnowledgeStore.open(dst, read_only=True) as store:
        assert store.embedder.fingerprint() == FakeEmbedder(16).fingerprint()
        assert store.paths() == sorted([f"projects/new-{i}.md" for i in range(4)] + ours)
    refused = run_cli("copy", src, dst, "--embedder", "fake")  # asked for: a real mismatch
    assert refused.exit_code == 1 and "was embedded with fake:hashing-bow:16" in refused.stderr

"""Exports: markdown that re-imports to the same documents and writes
picobot's files back as they were, and exports that never overwrite a file
or leave a half-written one."""

from __future__ import annotations

import json

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.exchange import ExchangeError, export_jsonl, export_markdown

from .public import documents

# -- markdown ---------------------------------------------------------------------


def test_markdown_export_reimports_to_the_same_documents(tmp_path, backend, source):  # type: ignore[no-untyped-def]
    out = tmp_path / "exported"
    report = export_markdown(source, out)
    assert report.written == len(source) and report.outside_layout == []
    assert (out / "knowledge" / "projects" / "picobot-architecture.md").is_file()
    assert (out / "skills" / "deploy-service" / "SKILL.md").is_file()
    text = (out / "knowledge" / "projects" / "picobot-architecture.md").read_text("utf-8")
    assert text.startswith("---\ntitle: picobot architecture with adapters, an agent loop and "
                           "tools\ntopic: projects\ntags: [picobot, architecture, python]\n"
                           "created: 2026-08-04\nupdated: 2026-11-02\n---\n")
    with KnowledgeStore.open(backend("md"), FakeEmbedder(64), hype=False) as copy:
        copy.import_directory(out)
        assert documents(copy) == documents(source)
    with pytest.raises(ExchangeError, match="not an empty folder"):
        export_markdown(source, out)


def test_markdown_export_writes_picobots_skill_files_back_as_they_were(
        tmp_path, store, sample_workspace):  # type: ignore[no-untyped-def]
    """A SKILL.md keeps its own frontmatter (name, description): formerly the
    description moved into the body and `tags: []` was added."""
    store.import_directory(sample_workspace)
    export_markdown(store, tmp_path / "out")
    originals = sorted((sample_workspace / "skills").glob("*/SKILL.md"))
    assert len(originals) == 3
    for original in originals:
        exported = tmp_path / "out" / "skills" / original.parent.name / "SKILL.md"
        assert exported.read_text("utf-8") == original.read_text("utf-8"), original.parent.name
    for original in sorted((sample_workspace / "knowledge").rglob("*.md")):
        if original.name == "README.md":
            continue
        exported = tmp_path / "out" / original.relative_to(sample_workspace)
        assert exported.read_text("utf-8") == original.read_text("utf-8"), original.name


def test_markdown_reports_documents_outside_picobots_layout(tmp_path, store):  # type: ignore[no-untyped-def]
    store.upsert("notes/loose.md", title="Loose", body="Not in a topic folder.")
    report = export_markdown(store, tmp_path / "out")
    assert report.outside_layout == ["notes/loose.md"]
    assert (tmp_path / "out" / "knowledge" / "notes" / "loose.md").is_file()


# -- never overwriting ------------------------------------------------------------------


def test_export_never_overwrites_an_existing_file_unless_forced(tmp_path, location, store,
                                                                run):  # type: ignore[no-untyped-def]
    store.upsert("projects/a.md", title="A", body="exported")
    target = tmp_path / "notes.jsonl"
    target.write_text("my own notes\n", encoding="utf-8")
    with pytest.raises(ExchangeError, match="exists"):
        export_jsonl(store, target)
    refused = run("export", "--db", location, "--format", "jsonl", target)
    assert refused.exit_code == 1 and "--force" in refused.output
    assert target.read_text(encoding="utf-8") == "my own notes\n"
    assert not list(tmp_path.glob(".*.tmp"))  # no temp file left behind
    forced = run("export", "--db", location, "--format", "jsonl", target, "--force")
    assert forced.exit_code == 0 and "exported 1 document(s)" in forced.output
    assert json.loads(target.read_text(encoding="utf-8"))["body"] == "exported"
    assert export_jsonl(store, target, overwrite=True) == 1
    with pytest.raises(ExchangeError, match="folder"):
        export_jsonl(store, tmp_path / "missing" / "x.jsonl")
    with pytest.raises(ExchangeError, match="folder"):
        export_jsonl(store, tmp_path)
    stdout = run("export", "--db", location, "--format", "jsonl", "-")
    assert stdout.exit_code == 0 and json.loads(stdout.output)["path"] == "projects/a.md"


def test_a_failing_export_leaves_neither_a_half_file_nor_a_temp_file(tmp_path, store,
                                                                    monkeypatch):  # type: ignore[no-untyped-def]
    from kbstore import exchange

    for i in range(5):
        store.upsert(f"projects/{i}.md", title=f"T{i}", body=f"b{i}")
    real = exchange.document_records

    def breaks_half_way(*args, **kwargs):  # type: ignore[no-untyped-def]
        for n, record in enumerate(real(*args, **kwargs)):
            if n == 3:
                raise OSError("disk full")
            yield record

    monkeypatch.setattr(exchange, "document_records", breaks_half_way)
    with pytest.raises(OSError, match="disk full"):
        export_jsonl(store, tmp_path / "out.jsonl")
    assert list(tmp_path.iterdir()) == []

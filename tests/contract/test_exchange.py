"""Export/import round trips, exports that never overwrite, and the picobot
embeddings.npz migration.

"Zero embedding calls" is measured with FakeEmbedder.calls (texts embedded),
LLM calls with the fake_llm fixture.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.embed import embedding_text
from kbstore.exchange import ExchangeError, export_jsonl, export_markdown, import_jsonl
from kbstore.exchange_npz import import_npz
from kbstore.ingest import parse_file, scan_workspace

from .public import chunk_vectors, doc_vectors, documents, questions

QUERIES = ("how do I recover when a release breaks production?", "sourdough starter feeding",
           "sqlite full text search ranking", "deploy a service", "what does the user prefer")


def titled_questions(prompt: str) -> str:
    title = re.search(r"^Title: (.*)$", prompt, re.MULTILINE).group(1)
    return f"How do I apply {title}?\nWhat is {title} about?\nWhen should I read {title}?"


NOW = "2026-12-01T00:00:00+00:00"  # fixed, so journal decay is the same in both stores


def results(store: KnowledgeStore) -> list[list[tuple[str, float]]]:
    return [[(h.path, h.score) for h in store.search(q, limit=10, now=NOW)] for q in QUERIES]


@pytest.fixture
def source(backend, sample_workspace, fake_llm):  # type: ignore[no-untyped-def]
    """The sample knowledge base with HyPE questions, in a store."""
    fake_llm.answer = titled_questions
    with KnowledgeStore.open(backend("source"), FakeEmbedder(64), hype=True) as store:
        report = store.import_directory(sample_workspace)
        assert report.hype_generated == report.added == len(store)
        yield store


# -- JSONL ---------------------------------------------------------------------


def test_jsonl_round_trip_is_identical(tmp_path, backend, source, fake_llm):  # type: ignore[no-untyped-def]
    out = tmp_path / "kb.jsonl"
    assert export_jsonl(source, out) == len(source)
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert set(first) == {"path", "title", "tags", "topic", "doc_type", "created", "updated",
                          "body", "questions", "questions_model"}
    llm_calls = len(fake_llm.calls)
    embedder = FakeEmbedder(64)
    with KnowledgeStore.open(backend("copy"), embedder, hype=True) as copy:
        report = import_jsonl(copy, out)
        assert report.documents == report.write.added == len(source)
        assert len(fake_llm.calls) == llm_calls  # questions came along: no LLM
        assert documents(copy) == documents(source)
        assert questions(copy) == questions(source)
        # Without vectors in the file everything is embedded once: docs, their
        # chunks (documents past the fake's window) and questions.
        n_questions = sum(len(q) for q in questions(source).values())
        n_chunks = copy.status()["chunk_vectors"]
        assert n_chunks == source.status()["chunk_vectors"] > 0
        assert embedder.calls == len(source) + n_chunks + n_questions
        assert report.embedded == len(source)
        assert results(copy) == results(source)
        assert import_jsonl(copy, out).write.unchanged == len(source)  # idempotent


def test_jsonl_with_vectors_and_same_fingerprint_embeds_nothing(tmp_path, backend, source,
                                                                fake_llm):  # type: ignore[no-untyped-def]
    out = tmp_path / "kb.jsonl"
    export_jsonl(source, out, include_vectors=True)
    record = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert record["vectors"]["fingerprint"]["name"] == "fake"
    assert len(record["vectors"]["doc"]) == 64
    assert len(record["vectors"]["questions"]) == len(record["questions"]) == 3
    long_docs = [r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())
                 if "chunks" in r["vectors"]]
    assert long_docs and all(isinstance(r["vectors"]["chunks_hash"], str) for r in long_docs)
    embedder = FakeEmbedder(64)
    with KnowledgeStore.open(backend("copy"), embedder, hype=True) as copy:
        report = import_jsonl(copy, out)
        # Document, question and chunk vectors (long documents past the
        # embedder's window) all come from the file.
        assert embedder.calls == 0
        n_chunks = copy.status()["chunk_vectors"]
        assert n_chunks == source.status()["chunk_vectors"] > 0
        assert report.reused_vectors == len(source) and report.embedded == 0
        assert report.reused_chunk_vectors == n_chunks and report.embedded_chunks == 0
        assert doc_vectors(copy) == doc_vectors(source)
        assert chunk_vectors(copy) == chunk_vectors(source)
        assert results(copy) == results(source)


def test_jsonl_chunk_vectors_for_other_chunks_are_embedded_again(tmp_path, backend, source):  # type: ignore[no-untyped-def]
    """Chunk vectors are taken only for the chunks they were made from: a
    record whose body was edited after the export, or whose chunk list is
    short or broken, gets its chunks embedded."""
    out = tmp_path / "kb.jsonl"
    export_jsonl(source, out, include_vectors=True)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    long_ones = [r for r in records if "chunks" in r["vectors"]]
    assert len(long_ones) >= 4
    edited, short, broken, nan = long_ones[:4]
    edited["body"] += "\n\nOne more paragraph written after the export."
    short["vectors"]["chunks"] = short["vectors"]["chunks"][:-1]
    broken["vectors"]["chunks"][0] = [1.0] * 8
    nan["vectors"]["chunks"][-1] = [float("nan")] * 64
    out.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    embedder = FakeEmbedder(64)
    with KnowledgeStore.open(backend("copy"), embedder, hype=False) as copy:
        report = import_jsonl(copy, out)
        # the wrong-sized chunk list and the NaN one; the short list is a mismatch
        assert report.invalid_vectors == 2
        have = chunk_vectors(copy)
        want = chunk_vectors(source)
        redone = {edited["path"], short["path"], broken["path"], nan["path"]}
        assert report.embedded_chunks == sum(len(have[p]) for p in redone)
        assert report.reused_chunk_vectors == sum(len(v) for p, v in want.items()
                                                  if p not in redone)
        assert have[short["path"]] == want[short["path"]]  # made again, the same
        assert have[nan["path"]] == want[nan["path"]]
        assert all(have[p] == want[p] for p in want if p not in redone)


def test_jsonl_vectors_from_another_model_are_not_reused(tmp_path, backend, source):  # type: ignore[no-untyped-def]
    out = tmp_path / "kb.jsonl"
    export_jsonl(source, out, include_vectors=True)
    embedder = FakeEmbedder(32)  # another fingerprint (dimension)
    with KnowledgeStore.open(backend("copy"), embedder, hype=False) as copy:
        report = import_jsonl(copy, out)
        assert report.fingerprint_mismatch == len(source)
        assert report.reused_vectors == 0 and report.embedded == len(source)
        assert questions(copy) == questions(source)  # the text is still reused
        assert documents(copy) == documents(source)


def test_jsonl_bad_records_are_skipped_with_line_and_reason(tmp_path, store):  # type: ignore[no-untyped-def]
    """One bad record costs that record only (formerly the first one stopped
    the import after the batches before it were committed)."""
    bad = tmp_path / "bad.jsonl"
    good = [{"path": f"projects/g{i}.md", "title": f"G{i}", "body": f"good {i}"} for i in range(3)]
    lines = [json.dumps(good[0]), "{not json",
             json.dumps({"path": "../escape.md", "title": "x", "body": "y"}),
             json.dumps({"path": "projects/b.md", "body": "no title"}),
             json.dumps(good[1]),
             json.dumps({"path": "projects/q.md", "title": "Q", "body": "q", "questions": 5}),
             json.dumps({"path": "projects/t.md", "title": "T", "body": "t", "tags": {"a": 1}}),
             json.dumps({"path": "projects/v.md", "title": "V", "body": "v", "vectors": [1, 2]}),
             json.dumps({"path": "projects/e.md", "title": "E", "body": "e", "extra": "x"}),
             json.dumps([1, 2, 3]), "", json.dumps(good[2])]
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = import_jsonl(store, bad)
    reasons = {s.path: s.reason for s in report.skipped}
    assert set(reasons) == {f"{bad}:{n}" for n in (2, 3, 4, 6, 7, 8, 9, 10)}
    assert reasons[f"{bad}:2"].startswith("not JSON")
    assert "title" in reasons[f"{bad}:4"] and "questions" in reasons[f"{bad}:6"]
    assert "expected a JSON object" in reasons[f"{bad}:10"]
    assert report.documents == report.write.added == 3
    assert store.paths() == ["projects/g0.md", "projects/g1.md", "projects/g2.md"]


@pytest.mark.parametrize("kind", ["gzip", "zip", "sqlite"])
def test_jsonl_import_of_a_compressed_export_or_a_database_is_refused(  # type: ignore[no-untyped-def]
        tmp_path, store, kind):
    """A gzipped export (or a zip, or the SQLite file itself) was read line
    by line: thousands of 'not UTF-8 text' skips, 'imported 0', exit 0."""
    import gzip
    import sqlite3

    store.upsert("projects/kept.md", title="Kept", body="stays as it is")
    plain = tmp_path / "export.jsonl"
    export_jsonl(store, plain)
    target = tmp_path / f"export.{kind}"
    if kind == "gzip":
        target.write_bytes(gzip.compress(plain.read_bytes()))
    elif kind == "zip":
        with zipfile.ZipFile(target, "w") as archive:
            archive.write(plain, "export.jsonl")
    else:
        sqlite3.connect(target).execute("CREATE TABLE t (x)").connection.close()
    hint = {"gzip": "gunzip", "zip": "unzip", "sqlite": "kbstore copy"}[kind]
    with pytest.raises(ExchangeError, match=hint):
        import_jsonl(store, target)
    assert store.paths() == ["projects/kept.md"]


def test_jsonl_unusable_vectors_are_embedded_instead(tmp_path, source, backend):  # type: ignore[no-untyped-def]
    out = tmp_path / "kb.jsonl"
    export_jsonl(source, out, include_vectors=True)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    records[0]["vectors"]["doc"] = [float("nan")] * 64
    records[1]["vectors"]["doc"] = [0.0] * 64
    records[2]["vectors"]["doc"] = {"not": "a list"}
    records[3]["vectors"]["doc"] = [1.0] * 8
    out.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    embedder = FakeEmbedder(64)
    with KnowledgeStore.open(backend("copy"), embedder, hype=False) as copy:
        report = import_jsonl(copy, out)
        assert report.skipped == [] and report.documents == len(source)
        assert report.reused_vectors == len(source) - 4 and report.embedded == 4
        assert doc_vectors(copy) == doc_vectors(source)


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


# -- the picobot embeddings.npz sidecar ----------------------------------------------------


def knowledge_docs(workspace: Path) -> dict[str, object]:
    return {rel: parse_file(file, rel) for rel, file, _ in scan_workspace(workspace)
            if not rel.startswith("skills/")}


def write_npz(path: Path, docs: dict[str, object], embedder: FakeEmbedder, *,
              hype: dict[str, list[str]] | None = None, extra_ids: tuple[str, ...] = (),
              hashes: dict[str, str] | None = None,
              fingerprint: dict[str, object] | None | str = "embedder") -> None:
    """The seed 000 layout: vectors (N, D), doc_ids, content_hashes (md5 of
    the body), and optional hype_vectors, hype_doc_ids, hype_questions; plus
    the embedder's fingerprint (JSON text) unless ``fingerprint=None``
    (picobot's own sidecar records none)."""
    ids = list(docs)
    vectors = embedder.embed_documents([embedding_text(d.title, d.tags, d.body)
                                        for d in docs.values()])
    content_hashes = [(hashes or {}).get(i) or hashlib.md5(docs[i].body.encode()).hexdigest()
                      for i in ids]
    for extra in extra_ids:
        ids.append(extra)
        vectors = np.vstack([vectors, embedder.embed_documents([extra])])
        content_hashes.append(hashlib.md5(b"gone").hexdigest())
    arrays = {"vectors": vectors, "doc_ids": np.array(ids), "content_hashes":
              np.array(content_hashes)}
    if hype:
        qids = [doc for doc, qs in hype.items() for _ in qs]
        qtext = [q for qs in hype.values() for q in qs]
        arrays.update(hype_vectors=embedder.embed_documents(qtext), hype_doc_ids=np.array(qids),
                      hype_questions=np.array(qtext))
    if fingerprint == "embedder":
        fingerprint = embedder.fingerprint()
    if fingerprint is not None:
        arrays["fingerprint"] = np.array(json.dumps(fingerprint))
    np.savez_compressed(path, **arrays)


def test_npz_fresh_vectors_are_reused_and_stale_ones_reembedded(tmp_path, backend,
                                                               sample_workspace):  # type: ignore[no-untyped-def]
    docs = knowledge_docs(sample_workspace)
    hype = {"domains/docker-basics.md": ["How do I build an image?", "What is a volume?"],
            "self/memory-hygiene.md": ["When should I forget something?"]}
    npz = tmp_path / "embeddings.npz"
    write_npz(npz, docs, FakeEmbedder(64), hype=hype, extra_ids=("projects/deleted.md",))
    # Edit two bodies after the sidecar was written: their vectors are stale.
    stale = ["projects/picobot-architecture.md", "domains/git-workflows.md"]
    for rel in stale:
        file = sample_workspace / "knowledge" / rel
        file.write_text(file.read_text("utf-8") + "\nOne more line.\n", encoding="utf-8")

    embedder = FakeEmbedder(64)
    with KnowledgeStore.open(backend(), embedder, hype=False) as store:
        report = import_npz(store, sample_workspace, npz)
        skills = 3  # skills/ is not in picobot's sidecar
        assert report.entries == len(docs) + 1
        assert report.imported_vectors == len(docs) - len(stale)
        assert (report.stale, report.unknown, report.mismatched_dimension) == (2, 1, 0)
        assert report.not_in_npz == skills
        assert report.imported_questions == report.reused_question_vectors == 3
        # Exactly the stale documents and the uncovered skills were embedded,
        # plus the chunk vectors of long documents (no sidecar holds those).
        assert report.embedded == len(stale) + skills
        assert embedder.calls == report.embedded + store.status()["chunk_vectors"]
        assert report.reconcile.added == len(store) == len(docs) + skills
        assert questions(store) == hype

        with KnowledgeStore.open(backend("plain"), FakeEmbedder(64),
                                 hype=False) as plain:
            plain.import_directory(sample_workspace)
            assert doc_vectors(store) == doc_vectors(plain)
            assert documents(store) == documents(plain)
        calls = embedder.calls
        again = import_npz(store, sample_workspace, npz)  # idempotent
        assert embedder.calls == calls
        assert again.already_current == len(docs) - len(stale) and again.imported_vectors == 0
        assert store.import_directory(sample_workspace).embedded == 0


def test_npz_questions_spare_the_llm(tmp_path, backend, sample_workspace, fake_llm):  # type: ignore[no-untyped-def]
    docs = knowledge_docs(sample_workspace)
    hype = {rel: [f"What does {rel} say?"] for rel in list(docs)[:5]}
    npz = tmp_path / "embeddings.npz"
    write_npz(npz, docs, FakeEmbedder(64), hype=hype)
    with KnowledgeStore.open(backend(), FakeEmbedder(64), hype=True) as store:
        report = import_npz(store, sample_workspace, npz)
        asked = {re.search(r"^Title: (.*)$", c["messages"][0]["content"], re.M).group(1)
                 for c in fake_llm.calls}
        # One LLM call per document without sidecar questions, none for the five.
        assert len(fake_llm.calls) == len(store) - 5 == report.reconcile.hype_generated
        assert not asked & {docs[rel].title for rel in hype}


def test_npz_of_another_dimension_is_reported_and_embedded(tmp_path, backend, sample_workspace):  # type: ignore[no-untyped-def]
    docs = knowledge_docs(sample_workspace)
    npz = tmp_path / "embeddings.npz"
    write_npz(npz, docs, FakeEmbedder(32))
    embedder = FakeEmbedder(64)
    with KnowledgeStore.open(backend(), embedder, hype=False) as store:
        report = import_npz(store, sample_workspace, npz)
        assert report.mismatched_dimension == len(docs)
        assert report.imported_vectors == 0
        assert report.embedded == len(store)
        assert embedder.calls == len(store) + store.status()["chunk_vectors"]


class AsymmetricFake(FakeEmbedder):
    """Embeds queries and documents differently (like nomic's task prefixes)."""

    def fingerprint(self):
        return {**super().fingerprint(), "document_prefix": "doc:", "query_prefix": "query:"}


def test_npz_question_vectors_reembedded_for_an_asymmetric_model(tmp_path, backend,
                                                                 sample_workspace):  # type: ignore[no-untyped-def]
    docs = knowledge_docs(sample_workspace)
    hype = {"domains/docker-basics.md": ["How do I build an image?", "What is a volume?"]}
    npz = tmp_path / "embeddings.npz"
    write_npz(npz, docs, FakeEmbedder(64), hype=hype, fingerprint=AsymmetricFake(64).fingerprint())
    embedder = AsymmetricFake(64)
    with KnowledgeStore.open(backend(), embedder, hype=False) as store:
        report = import_npz(store, sample_workspace, npz)
        assert report.imported_questions == 2 and report.reused_question_vectors == 0
        # The sidecar's question vectors were made as documents; only the two
        # questions (as queries), the three skills and the chunk vectors of
        # long documents are embedded.
        assert embedder.calls == 2 + 3 + store.status()["chunk_vectors"]
        assert questions(store) == hype


def _archive_vectors(docs: dict[str, object], embedder: FakeEmbedder) -> dict[str, list[float]]:
    return {rel: embedder.embed_documents([embedding_text(d.title, d.tags, d.body)])[0].tolist()
            for rel, d in docs.items()}


def test_npz_without_fingerprint_is_reembedded_unless_trusted(tmp_path, backend,
                                                              sample_workspace):  # type: ignore[no-untyped-def]
    docs = knowledge_docs(sample_workspace)
    npz = tmp_path / "embeddings.npz"
    # vectors of an unknown model that happen to have the store's dimension
    other = FakeEmbedder(64)
    other._one = lambda text, _orig=other._one: -_orig(text)  # type: ignore[method-assign]
    hype = {"domains/docker-basics.md": ["How do I build an image?"]}
    write_npz(npz, docs, other, hype=hype, fingerprint=None)
    theirs = _archive_vectors(docs, other)
    embedder = FakeEmbedder(64)
    ours = _archive_vectors(docs, FakeEmbedder(64))
    with KnowledgeStore.open(backend(), embedder, hype=False) as store:
        report = import_npz(store, sample_workspace, npz)
        assert report.imported_vectors == 0 and report.untrusted == len(docs)
        assert "records no embedder" in report.untrusted_reason
        stored = doc_vectors(store)
        assert all(np.allclose(stored[rel], ours[rel], atol=1e-6) for rel in docs)
        assert not any(np.allclose(stored[rel], theirs[rel], atol=1e-6) for rel in docs)
        assert report.embedded == len(store)
        assert questions(store) == hype  # text, kept without an LLM call
    with KnowledgeStore.open(backend(), FakeEmbedder(64), hype=False) as store:
        report = import_npz(store, sample_workspace, npz, trust_vectors=True)
        assert report.imported_vectors == len(docs) and report.untrusted == 0
        stored = doc_vectors(store)
        assert all(np.allclose(stored[rel], theirs[rel], atol=1e-6) for rel in docs)


def test_npz_of_another_model_is_never_reused(tmp_path, backend, sample_workspace):  # type: ignore[no-untyped-def]
    docs = knowledge_docs(sample_workspace)
    npz = tmp_path / "embeddings.npz"
    write_npz(npz, docs, FakeEmbedder(64),
              fingerprint={**FakeEmbedder(64).fingerprint(), "model": "someone-else"})
    with KnowledgeStore.open(backend(), FakeEmbedder(64), hype=False) as store:
        report = import_npz(store, sample_workspace, npz, trust_vectors=True)
        assert report.imported_vectors == 0 and report.untrusted == len(docs)
        assert "someone-else" in report.untrusted_reason
        assert report.embedded == len(store)


def test_cli_npz_dry_run_names_the_documents_it_would_embed(tmp_path, backend,
                                                            sample_workspace, run):  # type: ignore[no-untyped-def]
    docs = knowledge_docs(sample_workspace)
    npz = tmp_path / "embeddings.npz"
    write_npz(npz, docs, FakeEmbedder(64), fingerprint=None)
    db = backend()
    args = ("import-npz", "--db", db, "--workspace", sample_workspace, npz, "--embedder",
            "fake", "--no-hype", "--dry-run")
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert "would reuse 0 vector(s) from the file and embed " f"{len(docs) + 3} document(s)" \
        in result.output
    assert f"embed {len(docs)}: the npz records no embedder" in result.output
    assert "embed 3: not in the npz" in result.output
    assert not backend.exists(db)  # a dry run writes nothing
    data = json.loads(run(*args, "--trust-vectors", "--json").output)
    assert data["reuse_vectors"] == len(docs) and data["embed"] == {"not in the npz": 3}
    assert not backend.exists(db)
    result = run(*args[:-1])  # the import itself agrees with the plan
    assert "untrusted " + str(len(docs)) in result.output
    assert f"embedded {len(docs) + 3}" in result.output


def test_npz_accepts_picobots_raw_body_hash(tmp_path, backend, sample_workspace):  # type: ignore[no-untyped-def]
    docs = knowledge_docs(sample_workspace)
    rel = "domains/docker-basics.md"
    raw = (sample_workspace / "knowledge" / rel).read_text("utf-8").split("---", 2)[2]
    npz = tmp_path / "embeddings.npz"
    write_npz(npz, docs, FakeEmbedder(64), hashes={rel: hashlib.md5(raw.encode()).hexdigest()})
    with KnowledgeStore.open(backend(), FakeEmbedder(64), hype=False) as store:
        report = import_npz(store, sample_workspace, npz)
        assert report.stale == 0 and report.imported_vectors == len(docs)


def test_npz_bad_files_are_refused(tmp_path, sample_workspace, store):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ExchangeError, match="not a readable npz"):
        import_npz(store, sample_workspace, bad)
    np.savez(bad, vectors=np.zeros((2, 64), np.float32), doc_ids=np.array(["a.md"]),
             content_hashes=np.array(["x", "y"]))
    with pytest.raises(ExchangeError, match="do not line up"):
        import_npz(store, sample_workspace, bad)
    np.savez(bad, vectors=np.zeros((1, 64), np.float32))
    with pytest.raises(ExchangeError, match="doc_ids, content_hashes"):
        import_npz(store, sample_workspace, bad)
    np.savez(bad, vectors=np.zeros((1, 64), np.float32),
             doc_ids=np.array(["projects/x.md"], dtype=object), content_hashes=np.array(["x"]))
    with pytest.raises(ExchangeError, match="allow-pickle"):
        import_npz(store, sample_workspace, bad)
    # A small file whose array header claims 400 MB is refused before numpy allocates it.
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (100_000_000,)})
    with zipfile.ZipFile(bad, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("vectors.npy", header.getvalue() + bytes(64))
        for name, value in (("doc_ids", np.array(["projects/x.md"])),
                            ("content_hashes", np.array(["x"]))):
            buffer = io.BytesIO()
            np.save(buffer, value)
            archive.writestr(f"{name}.npy", buffer.getvalue())
    with pytest.raises(ExchangeError, match="claims|expand"):
        import_npz(store, sample_workspace, bad)
    assert len(store) == 0  # nothing was written


# -- CLI ---------------------------------------------------------------------------------


@pytest.fixture
def run(run_cli):  # type: ignore[no-untyped-def]
    return run_cli


def test_cli_import_npz_export_and_import_jsonl(tmp_path, backend, sample_workspace, run):  # type: ignore[no-untyped-def]
    docs = knowledge_docs(sample_workspace)
    npz = tmp_path / "embeddings.npz"
    write_npz(npz, docs, FakeEmbedder(64), fingerprint=None)  # picobot's: no embedder
    db = backend()
    result = run("import-npz", "--db", db, "--workspace", sample_workspace, npz,
                 "--embedder", "fake", "--no-hype", "--trust-vectors")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1
    assert f"reused {len(docs)} vectors" in result.output and "embedded 3" in result.output
    # vectors taken on the user's word: said, not hidden
    assert result.stderr.startswith(f"note: --trust-vectors: {len(docs)} npz vector(s) were "
                                    "taken as hashing-bow vectors")

    out = tmp_path / "kb.jsonl"
    result = run("export", "--db", db, "--format", "jsonl", out, "--vectors")
    assert result.exit_code == 0 and f"exported {len(docs) + 3} document(s)" in result.output
    result = run("import-jsonl", "--db", backend("copy"), out, "--embedder", "fake",
                 "--no-hype", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["reused_vectors"] == len(docs) + 3 and data["embedded"] == 0

    result = run("export", "--db", db, "--format", "markdown", tmp_path / "md")
    assert result.exit_code == 0 and f"wrote {len(docs) + 3} file(s)" in result.output


def test_cli_errors_exit_1_with_one_line(tmp_path, backend, sample_workspace, run):  # type: ignore[no-untyped-def]
    db = backend()
    result = run("import-npz", "--db", db, "--workspace", sample_workspace, tmp_path / "no.npz")
    assert result.exit_code == 1 and "no npz file" in result.output
    assert not backend.exists(db)  # nothing created for a failed command
    (tmp_path / "bad.npz").write_bytes(b"junk")
    result = run("import-npz", "--db", db, "--workspace", sample_workspace,
                 tmp_path / "bad.npz", "--embedder", "fake", "--no-hype")
    assert result.exit_code == 1 and "not a readable npz" in result.output
    missing = backend.missing()
    result = run("export", "--db", missing, "--format", "jsonl", tmp_path / "x.jsonl")
    assert result.exit_code == 1 and "no database" in result.output
    assert not backend.exists(missing) and not (tmp_path / "x.jsonl").exists()
    result = run("export", "--db", db, "--format", "markdown", sample_workspace)
    assert result.exit_code == 1 and "not an empty folder" in result.output
    assert "--vectors" in run("export", "--help").output


def test_cli_import_jsonl_skips_a_bad_record_and_says_where(tmp_path, backend, run):  # type: ignore[no-untyped-def]
    db = backend()
    (tmp_path / "bad.jsonl").write_text(
        "{oops\n" + json.dumps({"path": "projects/a.md", "title": "A", "body": "a"}) + "\n",
        encoding="utf-8")
    result = run("import-jsonl", "--db", db, tmp_path / "bad.jsonl", "--embedder", "fake",
                 "--no-hype")
    assert result.exit_code == 0, result.output
    assert "skipped 1 record(s)" in result.stdout and "added 1" in result.stdout
    assert f"skipped {tmp_path / 'bad.jsonl'}:1: not JSON" in result.stderr
    piped = run("import-jsonl", "--db", db, "-", "--json",
                input=json.dumps({"path": "projects/b.md", "title": "B", "body": "b"}) + "\n")
    assert piped.exit_code == 0 and json.loads(piped.stdout)["write"]["added"] == 1


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


def test_jsonl_body_over_the_entry_limit_is_skipped_and_the_stored_one_kept(  # type: ignore[no-untyped-def]
        tmp_path, store):
    """import-jsonl applies the 2 MiB entry limit of upsert and of a file:
    a 3 MB body is skipped with its line (it was stored whole, and its
    markdown export became a file import skips)."""
    store.upsert("projects/big.md", title="Big", body="the small version")
    lines = [json.dumps({"path": "projects/big.md", "title": "Big", "body": "x" * 3_000_000}),
             json.dumps({"path": "projects/ok.md", "title": "OK", "body": "fits"})]
    file = tmp_path / "big.jsonl"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = import_jsonl(store, file)
    assert [(s.path, "2097152-byte limit" in s.reason) for s in report.skipped] == [
        (f"{file}:1", True)]
    assert store.get("projects/big.md").body == "the small version"
    assert store.paths() == ["projects/big.md", "projects/ok.md"]


def test_jsonl_nan_infinite_and_zero_document_vectors_are_counted_invalid(  # type: ignore[no-untyped-def]
        tmp_path, backend, source):
    """Vectors no model makes (NaN, a number too large for a float, all
    zeros) are not taken from the file: the report counts them as invalid
    and those documents get the store's own vectors."""
    out = tmp_path / "kb.jsonl"
    export_jsonl(source, out, include_vectors=True)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    nan, huge, zero = records[:3]
    nan["vectors"]["doc"][0] = float("nan")
    zero["vectors"]["doc"] = [0.0] * len(zero["vectors"]["doc"])
    huge["vectors"]["doc"] = huge["vectors"]["doc"][:-1]  # one number is put in front
    lines = [json.dumps(r) for r in records]
    # 1e400 is valid JSON and overflows to infinity in Python
    lines[1] = lines[1].replace('"doc": [', '"doc": [1e400, ', 1)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    embedder = FakeEmbedder(64)
    with KnowledgeStore.open(backend("copy"), embedder, hype=False) as copy:
        report = import_jsonl(copy, out)
        assert report.invalid_vectors == 3
        assert report.reused_vectors == len(records) - 3
        theirs, mine = doc_vectors(source), doc_vectors(copy)
        bad = {nan["path"], huge["path"], zero["path"]}
        assert all(np.isfinite(mine[p]).all() and np.any(mine[p]) for p in bad)
        assert all(mine[p] == theirs[p] for p in theirs if p not in bad)

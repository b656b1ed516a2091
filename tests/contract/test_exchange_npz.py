"""The picobot embeddings.npz migration (``kbstore import-npz``): fresh
vectors reused, stale ones and other models' embedded again, bad files
refused; and the exchange commands end to end through the CLI.

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

import numpy as np
import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.embed import embedding_text
from kbstore.exchange import ExchangeError
from kbstore.exchange_npz import import_npz
from kbstore.ingest import parse_file, scan_workspace

from .public import doc_vectors, documents, questions


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

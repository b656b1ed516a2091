"""import-jsonl and JSONL exports: round trips (with and without vectors),
vectors that are reused only when they are the store's own, and bad records
skipped with their line and reason.

"Zero embedding calls" is measured with FakeEmbedder.calls (texts embedded),
LLM calls with the fake_llm fixture; ``source`` is in conftest.py.
"""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.exchange import ExchangeError, export_jsonl, import_jsonl

from .public import chunk_vectors, doc_vectors, documents, questions

QUERIES = ("how do I recover when a release breaks production?", "sourdough starter feeding",
           "sqlite full text search ranking", "deploy a service", "what does the user prefer")

NOW = "2026-12-01T00:00:00+00:00"  # fixed, so journal decay is the same in both stores


def results(store: KnowledgeStore) -> list[list[tuple[str, float]]]:
    return [[(h.path, h.score) for h in store.search(q, limit=10, now=NOW)] for q in QUERIES]


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

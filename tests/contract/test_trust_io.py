"""Issue 10 through the importers, the HyPE job and picobot's adapter: a bad
record costs that record only, a hostile npz is refused before it costs
memory, HyPE reports agree, and the last writer of a file wins the index."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.cli import _register, cli
from kbstore.exchange import export_jsonl, import_jsonl

_register()


def run(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _records(n: int) -> list[dict]:
    return [{"path": f"projects/r{i}.md", "title": f"record {i}", "body": f"rollback {i}",
             "tags": ["ops"]} for i in range(n)]


BAD_RECORDS = [
    "not json at all",
    json.dumps([1, 2, 3]),
    json.dumps({"path": "projects/x.md", "title": "x"}),                       # no body
    json.dumps({"path": "../escape.md", "title": "x", "body": "y"}),
    json.dumps({"path": "projects/q.md", "title": "q", "body": "b", "questions": 5}),
    json.dumps({"path": "projects/t.md", "title": "t", "body": "b", "tags": {"a": 1}}),
    json.dumps({"path": "projects/v.md", "title": "v", "body": "b", "vectors": []}),
    json.dumps({"path": "projects/d.md", "title": "d", "body": "b", "created": "2024-02-30"}),
    json.dumps({"path": "projects/e.md", "title": "e", "body": "b", "extra": "no"}),
    json.dumps({"path": 7, "title": "x", "body": "y"}),
]


def test_bad_jsonl_records_are_skipped_with_their_line_and_the_rest_imported(
        tmp_path: Path) -> None:
    lines = [json.dumps(r) for r in _records(70)]
    for k, bad in enumerate(BAD_RECORDS):
        lines.insert(10 + 7 * k, bad)
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    db = tmp_path / "kb.sqlite"
    result = run("import-jsonl", "--db", db, src, "--embedder", "fake", "--no-hype")
    assert result.exit_code == 0, result.output
    with KnowledgeStore.open(db, read_only=True) as store:
        assert len(store) == 70
    skipped = [line for line in result.output.splitlines()
               if "skipped" in line and ".jsonl:" in line]
    assert len(skipped) == len(BAD_RECORDS)
    assert all("in.jsonl:" in line for line in skipped)


def test_unusable_vectors_in_jsonl_are_embedded_instead_of_stored(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    emb = FakeEmbedder(16)
    with KnowledgeStore.open(db, emb, hype=False) as store:
        fp = store.embedder.fingerprint()
        records = []
        for i, vec in enumerate(([float("nan")] * 16, [0.0] * 16, [1.0] * 3, {"x": 1},
                                 [1e39] * 16)):
            records.append({"path": f"projects/v{i}.md", "title": f"v {i}", "body": "b",
                            "vectors": {"fingerprint": fp, "doc": vec}})
        report = import_jsonl(store, io.StringIO("\n".join(map(json.dumps, records))))
        assert report.documents == 5 and report.reused_vectors == 0
        assert report.embedded == 5
        assert store.status()["doc_vectors"] == 5
    from kbstore.doctor import diagnose

    with KnowledgeStore.open(db, read_only=True) as store:
        assert diagnose(store).ok


def _npz_bomb(path: Path, rows: int) -> None:
    """A tiny file whose 'vectors' member inflates to rows x 768 float32 zeros."""
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.zeros((rows, 768), np.float32))
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("vectors.npy", buffer.getvalue())
        for name, value in (("doc_ids", np.array(["x"] * rows)),
                            ("content_hashes", np.array(["h"] * rows))):
            member = io.BytesIO()
            np.lib.format.write_array(member, value)
            archive.writestr(f"{name}.npy", member.getvalue())


def test_a_decompression_bomb_npz_is_refused_before_loading(tmp_path: Path) -> None:
    bomb = tmp_path / "embeddings.npz"
    _npz_bomb(bomb, rows=60_000)  # ~184 MB of zeros in well under 1 MB
    assert bomb.stat().st_size < 1_000_000
    ws = tmp_path / "ws" / "knowledge" / "projects"
    ws.mkdir(parents=True)
    (ws / "a.md").write_text("---\ntitle: a\n---\nbody\n")
    result = run("import-npz", "--db", tmp_path / "kb.sqlite", "--workspace", ws.parent.parent,
                 bomb, "--embedder", "fake", "--no-hype")
    assert result.exit_code == 1 and "refusing" in result.output


def test_hype_status_and_dry_run_agree_and_failures_exit_1(tmp_path: Path, fake_llm) -> None:
    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, FakeEmbedder(32), hype=False) as store:
        for r in _records(5):
            store.upsert(r["path"], title=r["title"], body=r["body"])
        assert store.status()["hype_pending"] == 5
    dry = run("hype", "--db", db, "--dry-run", "--json")
    assert dry.exit_code == 0 and json.loads(dry.output)["llm_calls"] == 5
    fake_llm.fail_with = RuntimeError("AuthenticationError: bad key")
    failed = run("hype", "--db", db, "--json")
    assert failed.exit_code == 1 and json.loads(failed.output)["failed"] == 5
    fake_llm.fail_with = None
    done = run("hype", "--db", db, "--json")
    assert done.exit_code == 0 and json.loads(done.output)["generated"] == 5
    with KnowledgeStore.open(db, read_only=True) as store:
        assert store.status()["hype_pending"] == 0 and store.status()["hype_failed"] == 0


def test_the_last_writer_of_a_file_wins_the_index(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Two picobot processes store the same title: A writes and parses its
    version, B writes, parses and indexes its own, then A indexes. The index
    must hold B's text, which is what the file says."""
    from kbstore.picobot import KnowledgeBase

    kwargs = {"workspace": tmp_path / "ws", "data_dir": tmp_path / "data",
              "embedder": FakeEmbedder(32), "hype": False}
    a, b = KnowledgeBase(**kwargs), KnowledgeBase(**kwargs)
    try:
        store_a = a.knowledge_store
        real = store_a.upsert_many
        state = {"raced": False}

        def b_wins_the_race(docs, **kw):
            if not state["raced"]:
                state["raced"] = True
                b.store("projects", "Deploy notes", "version from B")
            return real(docs, **kw)

        monkeypatch.setattr(store_a, "upsert_many", b_wins_the_race)
        a.store("projects", "Deploy notes", "version from A")
        on_disk = (tmp_path / "ws" / "knowledge" / "projects" / "deploy-notes.md").read_text()
        indexed = store_a.get("projects/deploy-notes.md")
        assert indexed is not None
        assert ("version from B" in on_disk) == ("version from B" in indexed.body)
        assert indexed.body.strip() in on_disk
    finally:
        a.close()
        b.close()


def test_export_then_import_round_trips_questions_and_vectors(tmp_path: Path, fake_llm) -> None:
    src, dst = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with KnowledgeStore.open(src, FakeEmbedder(32), hype=True) as store:
        for r in _records(4):
            store.upsert(r["path"], title=r["title"], body=r["body"], tags=r["tags"])
        export_jsonl(store, tmp_path / "kb.jsonl", include_vectors=True)
    calls = len(fake_llm.calls)
    emb = FakeEmbedder(32)
    with KnowledgeStore.open(dst, emb, hype=True) as store:
        report = import_jsonl(store, tmp_path / "kb.jsonl")
        assert report.documents == 4 and report.reused_vectors == 4 and report.embedded == 0
        assert emb.calls == 0 and len(fake_llm.calls) == calls  # nothing paid twice
        assert store.status()["hype_pending"] == 0


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("fmt, name", [("jsonl", "out.jsonl"), ("markdown", "out-md")])
def test_an_export_sweeps_what_a_killed_export_left_beside_its_target(
        tmp_path: Path, fmt: str, name: str) -> None:
    """A SIGKILL cannot clean up its temp file (or staging folder); the next
    export to the same target removes it -- unless its writer is alive."""
    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, FakeEmbedder(16), hype=False) as store:
        store.upsert("projects/a.md", title="a", body="alpha")
    dead = tmp_path / f".{name}.kbstore-{_dead_pid()}-abc123.tmp"
    (dead.mkdir() if fmt == "markdown" else dead.write_text("half"))
    live = tmp_path / f".{name}.kbstore-{os.getpid()}-def456.tmp"
    live.write_text("another export in progress")
    unrelated = tmp_path / f".{name}.mine.tmp"
    unrelated.write_text("not ours")
    result = run("export", "--db", db, "--format", fmt, tmp_path / name)
    assert result.exit_code == 0, result.output
    assert not dead.exists() and live.exists() and unrelated.exists()
    assert (tmp_path / name).exists()

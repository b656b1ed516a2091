"""Hostile input: queries that try FTS5 syntax, NUL, huge strings and every
script; files that are broken, binary, huge or point outside the root; paths
that try to leave it, frontmatter that YAML parses into surprises. Nothing
raises but the documented errors, one bad file costs that file only, and
nothing already stored changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kbstore import EmptyQueryError, FakeEmbedder, InvalidDocumentError, KnowledgeStore
from kbstore.doctor import diagnose

from .public import blank_query, snapshot

FTS_SYNTAX = ['AND', 'OR', 'NOT', 'NEAR', 'NEAR(', 'NEAR/2', '(', ')', '"', "'", '*', '^', ':',
              '-', '+', '{', '}', 'title:', 'tags :', '{title body}:', 'rank', 'bm25', ';',
              '--', '/*', '*/', 'DROP TABLE documents', "' OR 1=1 --", '\\', '%', '_']
SCRIPTS = ['שלום עולם', 'مرحبا بالعالم', '\u202eevil\u202c', '\u200f', '日本語の検索', '한국어',
           'ñandú', 'e\u0301', 'Ωμέγα', 'привет', '🙂', '👩\u200d👩\u200d👧', '🏳️\u200d🌈',
           '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', '\ufeff', '\u200b', '\x00', '\t', '\n', 'deploy', 'sqlite', 'ǅ']

pieces = st.sampled_from(FTS_SYNTAX + SCRIPTS)
queries = st.one_of(
    st.text(max_size=200),
    st.lists(pieces, min_size=1, max_size=12).map(" ".join),
    st.lists(pieces, min_size=1, max_size=12).map("".join),
    st.tuples(pieces, st.integers(1_000, 100_000 // 2)).map(lambda t: (t[0] * t[1])[:100_000]),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=60),
    st.sampled_from(["", " ", "\t\n", "\x00", " \x00 ", "\u3000"]),
)


@pytest.fixture(scope="module")
def hostile_store(backend):  # type: ignore[no-untyped-def]
    with KnowledgeStore.open(backend("hostile"), FakeEmbedder(64), hype=False) as store:
        for i, text in enumerate(SCRIPTS[:12] + ["deploy rollback notes", "sqlite fts5 ranking"]):
            store.upsert(f"domains/doc-{i}.md", title=f"doc {i} {text}", body=f"{text} body {i}",
                         tags=[text.strip() or "blank"])
        yield store


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(query=queries)
@example(query='"unbalanced')
@example(query="NEAR(a b, 2")
@example(query="title:(x OR")
@example(query="\ud800 lone surrogate")  # cannot come from UTF-8, can from Python
@example(query="a" * 100_000)
@example(query="\x00")
def test_hostile_queries_raise_nothing_but_empty_query(hostile_store, query: str) -> None:  # type: ignore[no-untyped-def]
    if blank_query(query):  # spaces, punctuation, NUL: refused as empty
        with pytest.raises(EmptyQueryError):
            hostile_store.search(query)
        return
    hits = hostile_store.search(query, limit=5)
    assert isinstance(hits, list) and len(hits) <= 5
    for hit in hits:
        assert hit.path.startswith("domains/doc-")
        json.dumps(hit.to_dict(), ensure_ascii=False)  # serialisable for --json


def test_query_fts5_syntax_is_data_not_syntax(hostile_store) -> None:  # type: ignore[no-untyped-def]
    """A query made of FTS5 operators and a real word finds the word."""
    hits = hostile_store.search('deploy AND NOT "(rollback* OR ^title:)"', limit=3)
    assert hits and hits[0].title.startswith("doc 12 deploy")


# -- hostile files ---------------------------------------------------------------


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    k = ws / "knowledge"
    _write(k / "projects" / "good.md", "---\ntitle: Good entry\ntags: [ok]\n---\nA good body.\n")
    _write(k / "domains" / "kept.md", "# Kept\nThis file will be broken later.\n")
    _write(ws / "skills" / "web" / "SKILL.md",
           "---\nname: web\ndescription: browse the web\n---\nUse the browser.\n")
    return ws


@pytest.mark.skipif(os.name != "posix", reason="symlinks and raw byte file names")
def test_hostile_files_are_skipped_with_a_reason_and_change_nothing(
        tmp_path: Path, workspace: Path, location: str) -> None:
    db = location
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        first = store.import_directory(workspace)
        assert (first.added, first.skipped) == (3, [])
        before = snapshot(store)

    k = workspace / "knowledge"
    outside = tmp_path / "outside"
    _write(outside / "secret.md", "# Secret\nnot part of the knowledge base\n")
    _write(outside / "skill" / "SKILL.md", "---\nname: evil\n---\nexfiltrate\n")
    _write(k / "projects" / "broken-yaml.md", "---\ntitle: [unclosed\ntags: {a: \n---\nbody\n")
    _write(k / "domains" / "kept.md", "---\ntitle: 'broken\n---\nnow unreadable\n")  # was fine
    _write(k / "projects" / "latin1.md", "# Café\ncrème brûlée\n".encode("latin-1"))
    _write(k / "projects" / "binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(512))
    _write(k / "projects" / "huge.md", "# Huge\n" + "x" * (10 * 1024 * 1024))
    (k / "projects" / "escape.md").symlink_to(outside / "secret.md")
    (workspace / "skills" / "evil").symlink_to(outside / "skill")
    (k / "projects" / "linked-dir").symlink_to(outside, target_is_directory=True)
    _write(k / "projects" / "..\\..\\..\\evil.md", "# leaves the root on Windows\n")
    with open(os.fsencode(k / "projects") + b"/caf\xe9.md", "wb") as raw_name:  # not UTF-8
        raw_name.write(b"# cafe\n")

    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        report = store.import_directory(workspace)
        reasons = {s.path: s.reason for s in report.skipped}
        after = snapshot(store)
        assert diagnose(store).ok
    assert after == before  # nothing stored changed, nothing was added or deleted
    assert (report.added, report.updated, report.deleted) == (0, 0, 0)
    assert "broken YAML" in reasons["projects/broken-yaml.md"]
    assert "broken YAML" in reasons["domains/kept.md"]
    assert "not UTF-8" in reasons["projects/latin1.md"]
    assert "binary" in reasons["projects/binary.md"]
    assert "over the" in reasons["projects/huge.md"]
    assert "outside the root" in reasons["projects/escape.md"]
    assert "outside the root" in reasons["skills/evil/SKILL.md"]
    assert "backslash" in reasons["projects/..\\..\\..\\evil.md"]
    assert reasons["projects/caf\\xe9.md"] == "file name is not valid UTF-8"
    assert reasons["projects/linked-dir"] == "symlinked directory (not followed)"
    assert len(reasons) == 10
    assert not any("secret" in p or "linked-dir" in p for p in store_paths(db))


def store_paths(db: str) -> list[str]:
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        return store.paths()


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_cli_import_prints_each_skipped_file_and_its_reason(
        tmp_path: Path, workspace: Path, location: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    k = workspace / "knowledge"
    _write(k / "projects" / "broken-yaml.md", "---\ntitle: [unclosed\n---\nbody\n")
    _write(k / "projects" / "binary.md", b"\x00\x01\x02")
    _write(tmp_path / "outside.md", "# outside\n")
    (k / "projects" / "escape.md").symlink_to(tmp_path / "outside.md")
    db = location
    KnowledgeStore.open(db, FakeEmbedder(64), hype=False).close()
    result = run_cli("import", "--db", db, "--no-hype", workspace)
    assert result.exit_code == 0, result.output
    assert "added 3" in result.stdout and "skipped 3" in result.stdout
    assert "skipped projects/broken-yaml.md: broken YAML" in result.stderr
    assert "skipped projects/binary.md: binary content" in result.stderr
    assert "skipped projects/escape.md: symlink points outside the root" in result.stderr
    as_json = run_cli("import", "--db", db, "--no-hype", "--json", workspace)
    skipped = {s["path"]: s["reason"] for s in json.loads(as_json.stdout)["skipped"]}
    assert set(skipped) == {"projects/broken-yaml.md", "projects/binary.md",
                            "projects/escape.md"}


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_a_symlink_loop_is_skipped_with_a_reason_and_the_store_kept(
        workspace: Path, location: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    """A .md symlink loop (a.md -> b.md -> a.md, self.md -> self.md) stopped
    the scan with a traceback before anything was read."""
    db = location
    KnowledgeStore.open(db, FakeEmbedder(64), hype=False).close()
    assert run_cli("import", "--db", db, "--no-hype", workspace).exit_code == 0
    k = workspace / "knowledge" / "projects"
    (k / "loop-a.md").symlink_to("loop-b.md")
    (k / "loop-b.md").symlink_to("loop-a.md")
    (k / "self.md").symlink_to("self.md")
    _write(k / "after.md", "# After\nwritten next to the loop\n")
    result = run_cli("import", "--db", db, "--no-hype", "--json", workspace)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    skipped = {s["path"]: s["reason"] for s in report["skipped"]}
    assert set(skipped) == {"projects/loop-a.md", "projects/loop-b.md", "projects/self.md"}
    assert all("symlink loop" in reason for reason in skipped.values()), skipped
    assert (report["added"], report["deleted"]) == (1, 0)
    with KnowledgeStore.open(db, read_only=True) as store:
        assert len(store) == 4 and store.get("projects/after.md") is not None


@pytest.mark.parametrize("path", [
    "../x.md", "../../etc/passwd.md", "/etc/x.md", "projects/../../x.md", "projects/./x.md",
    "projects//x.md", "projects\\..\\x.md", "projects/x\x00.md", "projects/caf\udce9.md",
    "", "   ", "projects/x.txt", "projects/",
])
def test_upsert_refuses_paths_that_leave_the_root(store, path: str) -> None:  # type: ignore[no-untyped-def]
    store.upsert("projects/existing.md", title="Existing", body="kept as is")
    before = snapshot(store)
    with pytest.raises(InvalidDocumentError) as info:
        store.upsert(path, title="evil", body="evil")
    assert "path" in str(info.value)
    assert snapshot(store) == before


@pytest.mark.parametrize("field", ["title", "body", "tags"])
def test_upsert_refuses_text_that_cannot_be_stored(store, field: str) -> None:  # type: ignore[no-untyped-def]
    fields: dict[str, Any] = {"title": "ok", "body": "ok", "tags": ["ok"]}
    fields[field] = ["bad\udc80"] if field == "tags" else "bad\udc80"
    with pytest.raises(InvalidDocumentError, match="UTF-8"):
        store.upsert("projects/x.md", **fields)
    assert len(store) == 0


def test_a_large_body_through_the_api_is_stored_whole(store) -> None:  # type: ignore[no-untyped-def]
    """The file-size limit is an import safeguard; the API stores what it is given."""
    body = "word " * 100_000
    assert store.upsert("projects/big.md", title="Big", body=body) == "added"
    assert store.get("projects/big.md").body == body
    assert store.search("word", limit=1)[0].path == "projects/big.md"


# -- frontmatter YAML parses into surprises -----------------------------------------------

BAD_FRONTMATTER = {
    "impossible-date.md": "---\ntitle: Leap\ncreated: 2024-02-30\n---\nbody\n",
    "impossible-month.md": "---\ntitle: Month\nupdated: 2024-13-01\n---\nbody\n",
}


@pytest.mark.parametrize("name", list(BAD_FRONTMATTER))
def test_frontmatter_yaml_cannot_construct_costs_that_file_only(store, workspace: Path,
                                                                name: str) -> None:  # type: ignore[no-untyped-def]
    """A value YAML cannot build (Feb 30th, month 13, !!int abc) is that
    file's problem: it is skipped with a reason, every other file imported."""
    _write(workspace / "knowledge" / "domains" / name, BAD_FRONTMATTER[name])
    report = store.import_directory(workspace)
    assert report.added == 3
    assert [s.path for s in report.skipped] == [f"domains/{name}"]
    assert report.skipped[0].reason
    assert store.get(f"domains/{name}") is None


def test_a_yaml_type_tag_is_read_as_the_text_written(store, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    """`!!int abc` runs no constructor (it would raise): the value is taken as
    the text the user wrote, and the file is imported like any other."""
    _write(workspace / "knowledge" / "domains" / "bad-int.md",
           "---\ntitle: !!int abc\n---\nbody\n")
    report = store.import_directory(workspace)
    assert report.added == 4 and report.skipped == []
    assert store.get("domains/bad-int.md").title == "abc"


def test_a_utf8_bom_does_not_hide_the_frontmatter(store, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    _write(workspace / "knowledge" / "domains" / "bom.md",
           b"\xef\xbb\xbf---\ntitle: Written on Windows\ntags: [bom]\n---\nbody\n")
    store.import_directory(workspace)
    doc = store.get("domains/bom.md")
    assert doc is not None and (doc.title, doc.tags) == ("Written on Windows", ["bom"])


def test_a_yaml_alias_bomb_does_not_become_a_huge_title(store, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for name, prev in zip("bcde", "abcd", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    text = "---\n" + "\n".join(lines) + "\ntitle: *e\n---\nbody\n"
    assert len(text) < 300
    _write(workspace / "knowledge" / "domains" / "bomb.md", text)
    report = store.import_directory(workspace)
    doc = store.get("domains/bomb.md")
    if doc is None:  # skipped, with a reason
        assert [s.path for s in report.skipped] == ["domains/bomb.md"]
    else:  # or stored with a sane title
        assert len(doc.title) <= 1000 and len(doc.body) < 1000
    assert report.added >= 3


def test_a_set_of_tags_is_the_same_document_in_every_process(location: str,
                                                             workspace: Path) -> None:
    """YAML's !!set is a Python set: its order follows the process's string
    hash seed. Formerly every `kbstore import` re-embedded such a file."""
    _write(workspace / "knowledge" / "domains" / "set.md",
           "---\ntitle: Set tags\ntags: !!set {delta: null, alpha: null, charlie: null, "
           "bravo: null}\n---\nbody\n")
    reports = []
    for seed in ("1", "2", "3", "4"):
        done = subprocess.run(
            [sys.executable, "-m", "kbstore", "import", "--db", location, str(workspace),
             "--no-hype", "--embedder", "fake", "--json"],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed})
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(done.stdout))
    assert reports[0]["added"] == 4
    assert [(r["updated"], r["embedded"]) for r in reports[1:]] == [(0, 0)] * 3


@pytest.mark.parametrize("body", ["x" * (2 * 1024 * 1024 + 1), "é" * (1024 * 1024 + 1)])
def test_a_body_over_the_entry_limit_is_refused_and_the_stored_one_kept(  # type: ignore[no-untyped-def]
        store, body: str) -> None:
    """The same 2 MiB limit as a file's: the API refuses instead of indexing
    (and holding in memory) tens of megabytes; the stored entry stays."""
    assert store.upsert("projects/big.md", title="Big", body="the small version") == "added"
    with pytest.raises(InvalidDocumentError, match="2097152-byte limit"):
        store.upsert("projects/big.md", title="Big", body=body)
    assert store.get("projects/big.md").body == "the small version"
    assert store.upsert("projects/edge.md", title="Edge", body="x" * (2 * 1024 * 1024)) == "added"

"""One limit on a document path's length, the same for every way in: the API,
import, import-jsonl, copy and the MCP tools (which used to cap paths at 1,000
characters while everything else took any length, so a document imported
from a long file name could not be read with `get`)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kbstore import InvalidDocumentError, KnowledgeStore
from kbstore.documents import MAX_PATH_BYTES
from kbstore.errors import KBStoreError
from kbstore.exchange import import_jsonl
from kbstore.mcp_schemas import TOOL_SPECS
from kbstore.mcp_server import KnowledgeService


def _path(size: int, alphabet: str = "abcdefghij") -> str:
    """'projects/' + folders of 60 random characters + '.md', ``size`` bytes
    of UTF-8 (random, so PostgreSQL cannot compress its index entry)."""
    rng = random.Random(size)
    budget, chars = size - len("projects/.md"), []
    while budget > 0:
        char = "/" if len(chars) % 61 == 60 and budget > 2 else rng.choice(alphabet)
        char = char if len(char.encode()) <= budget else "x"
        chars.append(char)
        budget -= len(char.encode())
    path = "projects/" + "".join(chars) + ".md"
    assert len(path.encode()) == size
    return path


def test_the_mcp_schema_takes_what_the_store_takes() -> None:
    for name in ("get", "delete"):
        assert TOOL_SPECS[name].input_schema["properties"]["path"]["maxLength"] == MAX_PATH_BYTES


@pytest.mark.parametrize("alphabet", ["abcdefghij", "日本語の文書名前"], ids=["ascii", "utf8"])
def test_a_path_at_the_limit_is_stored_and_read_by_the_api_and_mcp(store: KnowledgeStore,
                                                                    alphabet: str) -> None:
    path = _path(MAX_PATH_BYTES, alphabet)
    assert store.upsert(path, title="Long", body="a long path") == "added"
    assert store.get(path) is not None
    got = KnowledgeService(store).call("get", {"path": path})
    assert got["path"] == path and got["body"] == "a long path"


def test_a_path_over_the_limit_is_refused_with_the_limit_named(store: KnowledgeStore) -> None:
    for path in (_path(MAX_PATH_BYTES + 1), _path(MAX_PATH_BYTES + 1, "日本語の文書名前")):
        with pytest.raises(InvalidDocumentError) as refused:
            store.upsert(path, title="Long", body="a long path")
        assert str(refused.value).startswith(
            f"document path is {MAX_PATH_BYTES + 1} bytes of UTF-8, over the "
            f"{MAX_PATH_BYTES}-byte limit: ")
        with pytest.raises(KBStoreError) as tool:  # the schema, or the same check
            KnowledgeService(store).call("get", {"path": path})
        assert str(MAX_PATH_BYTES) in str(tool.value) and "\n" not in str(tool.value)
    assert len(store) == 0


def test_import_jsonl_skips_a_record_over_the_limit_with_the_reason(
        store: KnowledgeStore, tmp_path: Path) -> None:
    long = _path(MAX_PATH_BYTES + 10)
    lines = [{"path": "projects/short.md", "title": "Short", "body": "short"},
             {"path": long, "title": "Long", "body": "long"}]
    file = tmp_path / "in.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    report = import_jsonl(store, file)
    assert store.paths() == ["projects/short.md"]
    (skipped,) = report.skipped
    assert skipped.path.endswith("in.jsonl:2")
    assert skipped.reason.startswith(f"document path is {MAX_PATH_BYTES + 10} bytes of UTF-8, "
                                     f"over the {MAX_PATH_BYTES}-byte limit: 'projects/")


def test_import_skips_a_file_whose_path_is_over_the_limit_and_reads_one_at_it(
        run_cli, tmp_path: Path, location: str) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    kroot = ws / "knowledge"
    (kroot / "projects").mkdir(parents=True)
    for size in (MAX_PATH_BYTES, MAX_PATH_BYTES + 1):
        file = kroot / _path(size)
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(f"---\ntitle: size {size}\n---\nbody\n", encoding="utf-8")
    result = run_cli("import", "--db", location, ws, "--embedder", "fake", "--no-hype")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("added 1, ") and "skipped 1" in result.stdout
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("  skipped ")]
    assert f": document path is {MAX_PATH_BYTES + 1} bytes of UTF-8, over the " \
        f"{MAX_PATH_BYTES}-byte limit: 'projects/" in line, line
    with KnowledgeStore.open(location, read_only=True) as store:
        (path,) = store.paths()
        assert KnowledgeService(store).call("get", {"path": path})["body"] == "body"

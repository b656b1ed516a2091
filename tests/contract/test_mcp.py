"""`kbstore mcp`: a real server process driven by the MCP SDK's own client,
over stdio and over streamable HTTP, plus the tool contracts in-process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.mcp_schemas import TOOL_SPECS, ToolArgumentError, check_arguments
from kbstore.mcp_server import KnowledgeService, list_documents

TOOLS = {"search", "get", "store", "delete", "list", "status"}


@pytest.fixture
def indexed(sample_workspace: Path, tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        store.import_directory(sample_workspace)
    return db, sample_workspace


def _server_args(db: Path, *extra: str) -> list[str]:
    return ["-m", "kbstore", "mcp", "--db", str(db), "--no-hype", "--embedder", "fake", *extra]


def _stdio(db: Path, log: Any, *extra: str) -> Client:
    params = StdioServerParameters(command=sys.executable, args=_server_args(db, *extra))
    return Client(stdio_client(params, errlog=log))


def _one_line_error(result: Any) -> str:
    assert result.is_error, result
    text = result.content[0].text
    assert "\n" not in text and text.strip(), text
    return text


async def _all_resources(client: Client) -> list[Any]:
    out, cursor = [], None
    while True:
        page = await client.list_resources(cursor=cursor)
        out += page.resources
        cursor = page.next_cursor
        if not cursor:
            return out


# Bad arguments of every kind: each must be a one-line tool error, never a crash.
BAD_CALLS = [
    ("search", {"query": ""}, "must not be empty"),
    ("search", {"query": "   "}, "must not be empty"),
    ("search", {"query": "x", "limit": 10**12}, "'limit' must be from 1 to 100"),
    ("search", {"query": "x", "limit": 0}, "'limit' must be from 1 to 100"),
    ("search", {"query": "x", "limit": "ten"}, "'limit' must be an integer"),
    ("search", {"query": "x", "topic": "nope"}, "'topic' must be one of"),
    ("search", {"query": "x", "topic": ["user"]}, "'topic' must be a string"),
    ("search", {"query": "x", "min_similarity": 7}, "'min_similarity' must be from -1 to 1"),
    ("search", {"query": "x", "explain": "yes"}, "'explain' must be true or false"),
    ("search", {"qurey": "x"}, "unknown argument"),
    ("search", {}, "missing required argument 'query'"),
    ("get", {"path": "../../etc/passwd"}, "relative without '.' or '..'"),
    ("get", {"path": "/etc/passwd"}, "relative without"),
    ("get", {"path": "projects/does-not-exist.md"}, "no document at"),
    ("delete", {"path": "../../etc/passwd"}, "relative without '.' or '..'"),
    ("delete", {"path": "../secret.md"}, "relative without"),
    ("delete", {"path": "projects/does-not-exist.md"}, "no document at"),
    ("store", {"topic": "../..", "title": "x", "content": "y"}, "'topic' must be one of"),
    ("store", {"topic": "projects", "title": "../../etc/passwd", "content": "y"},
     "looks like a path"),
    ("store", {"topic": "projects", "title": "!!!", "content": "y"}, "no letters or digits"),
    ("store", {"topic": "projects", "title": "t", "content": "y", "tags": [1, 2]},
     "'tags[0]' must be a string"),
    ("store", {"topic": "projects", "title": "t"}, "missing required argument 'content'"),
    ("list", {"recent": -1}, "'recent' must be from 1 to 500"),
    ("status", {"verbose": True}, "unknown argument"),
    ("no_such_tool", {}, "unknown tool"),
]


async def _exercise(client: Client, workspace: Path, outside: Path) -> None:
    """The whole contract through one connection; asserts as it goes."""
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    for tool in listed.tools:
        assert tool.input_schema["type"] == "object" and tool.output_schema is not None
        assert len(tool.description or "") > 80  # written for a model deciding when to call

    stored = await client.call_tool("store", {
        "topic": "projects", "title": "Quetzal deploy checklist",
        "content": "Roll the quetzalcoatl service with the blue-green switch.",
        "tags": ["ops", "quetzal"]})
    assert not stored.is_error, stored
    note = stored.structured_content
    assert json.loads(stored.content[0].text) == note  # text mirrors the structured result
    path = note["path"]
    assert path == "projects/quetzal-deploy-checklist.md"
    file = workspace / "knowledge" / path
    assert file.is_file() and "title: Quetzal deploy checklist" in file.read_text()

    found = await client.call_tool("search", {"query": "quetzalcoatl blue-green", "limit": 5,
                                              "explain": True})
    assert not found.is_error
    hits = found.structured_content["hits"]
    assert hits[0]["path"] == path and hits[0]["tags"] == ["ops", "quetzal"]
    assert "quetzalcoatl" in hits[0]["snippet"] and "ranks" in hits[0]["explain"]

    got = await client.call_tool("get", {"path": path})
    assert got.structured_content["frontmatter"]["title"] == "Quetzal deploy checklist"
    assert "blue-green switch" in got.structured_content["body"]

    uris = {r.uri for r in await _all_resources(client)}
    assert f"kb://{path}" in uris and "kb://projects/picobot-memory-design.md" in uris
    read = await client.read_resource(f"kb://{path}")
    assert "tags: [ops, quetzal]" in read.contents[0].text
    assert "blue-green switch" in read.contents[0].text

    recent = await client.call_tool("list", {"topic": "projects", "recent": 100})
    assert path in [d["path"] for d in recent.structured_content["documents"]]
    one = await client.call_tool("list", {"recent": 1})
    assert one.structured_content["count"] == 1

    for tool, args, fragment in BAD_CALLS:
        text = _one_line_error(await client.call_tool(tool, args))
        assert fragment in text, (tool, args, text)
    assert outside.is_file()  # '../secret.md' touched nothing outside the workspace
    with pytest.raises(MCPError, match="no document at"):
        await client.read_resource("kb://projects/does-not-exist.md")

    deleted = await client.call_tool("delete", {"path": path})
    assert deleted.structured_content["file_deleted"] is True
    assert deleted.structured_content["deleted_from_index"] is True
    assert not file.exists()
    again = await client.call_tool("search", {"query": "quetzalcoatl blue-green"})
    assert path not in [h["path"] for h in again.structured_content["hits"]]
    assert "no document at" in _one_line_error(await client.call_tool("get", {"path": path}))

    status = await client.call_tool("status", {})  # still serving after all the bad calls
    assert status.structured_content["documents"] == 34
    assert status.structured_content["writable"] is True


def test_stdio_server_full_contract(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    db, workspace = indexed
    outside = tmp_path / "secret.md"
    outside.write_text("not yours")
    log_path = tmp_path / "server.log"

    async def main() -> None:
        with log_path.open("w") as log:
            async with _stdio(db, log, "--workspace", str(workspace)) as client:
                await _exercise(client, workspace, outside)

    anyio.run(main)
    log = log_path.read_text()
    assert "ready in" in log and "Traceback" not in log


def test_stdio_legacy_handshake_clients(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    """Clients on the 2025-11-25 initialize handshake (most desktop agents today)."""
    db, _ = indexed

    async def main() -> tuple[str, Any]:
        with (tmp_path / "server.log").open("w") as log:
            params = StdioServerParameters(command=sys.executable, args=_server_args(db))
            async with Client(stdio_client(params, errlog=log), mode="legacy") as client:
                result = await client.call_tool("search", {"query": "sourdough starter"})
                return client.protocol_version, result

    version, result = anyio.run(main)
    assert version == "2025-11-25"
    assert result.structured_content["hits"][0]["path"] == "domains/sourdough-starter-care.md"


def test_without_workspace_the_server_is_read_only(indexed: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    db, workspace = indexed

    async def main() -> list[Any]:
        with (tmp_path / "server.log").open("w") as log:
            async with _stdio(db, log) as client:
                return [await client.call_tool("store", {"topic": "user", "title": "t",
                                                         "content": "c"}),
                        await client.call_tool("delete", {"path": "user/hobbies-and-weekends.md"}),
                        await client.call_tool("search", {"query": "hiking weekends"}),
                        await client.call_tool("status", {})]

    store, delete, search, status = anyio.run(main)
    assert "--workspace" in _one_line_error(store)
    assert "--workspace" in _one_line_error(delete)
    assert (workspace / "knowledge/user/hobbies-and-weekends.md").is_file()
    assert search.structured_content["hits"][0]["path"] == "user/hobbies-and-weekends.md"
    assert status.structured_content["writable"] is False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_streamable_http_server_full_contract(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    db, workspace = indexed
    outside = tmp_path / "secret.md"
    outside.write_text("not yours")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with (tmp_path / "http.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, *_server_args(db, "--workspace", str(workspace),
                                                               "--http", "--port", str(port))],
                                stdout=subprocess.DEVNULL, stderr=log)
    try:
        async def connect_and_exercise() -> None:
            deadline = time.monotonic() + 60
            while True:  # the server needs a moment to bind its port
                try:
                    async with Client(url) as client:
                        await client.list_tools()
                    break
                except Exception:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise
                    await anyio.sleep(0.3)
            async with Client(url) as client:
                await _exercise(client, workspace, outside)

        anyio.run(connect_and_exercise)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    log = (tmp_path / "http.log").read_text()
    assert "streamable HTTP" in log and "Traceback" not in log


def test_missing_extra_gives_one_clear_line(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    for command, blocked in (("mcp", "mcp"), ("watch", "watchfiles")):
        argv = ["kbstore", command, "--db", str(db)] + ([str(tmp_path)] if command == "watch"
                                                         else [])
        code = (f"import sys; sys.modules[{blocked!r}] = None; sys.argv = {argv!r}; "
                "from kbstore.cli import main; main()")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 1
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "pip install 'kbstore[mcp]'" in lines[0], proc.stderr
    assert not db.exists()


def test_mistyped_db_without_workspace_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, *_server_args(tmp_path / "typo.sqlite")],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and "no database at" in proc.stderr
    assert not (tmp_path / "typo.sqlite").exists()


# -- in-process: the contracts themselves -------------------------------------------


def test_argument_check_rules() -> None:
    schema = TOOL_SPECS["search"].input_schema
    assert check_arguments("search", schema, {"query": "q", "limit": 5.0, "topic": None}) == {
        "query": "q", "limit": 5}  # an integral float is an integer; null means absent
    for bad in ({"query": "q", "limit": True}, {"query": "q", "min_similarity": float("nan")},
                {"query": "q", "min_similarity": float("inf")}, {"query": "x" * 4001}):
        with pytest.raises(ToolArgumentError) as info:
            check_arguments("search", schema, bad)
        assert "\n" not in str(info.value)
    with pytest.raises(ToolArgumentError, match="JSON object"):
        check_arguments("search", schema, ["query"])
    tags = check_arguments("store", TOOL_SPECS["store"].input_schema,
                           {"topic": "user", "title": "t", "content": "c", "tags": "a, b"})
    assert tags["tags"] == ["a", "b"]
    with pytest.raises(ToolArgumentError, match="at most 50"):
        check_arguments("store", TOOL_SPECS["store"].input_schema,
                        {"topic": "user", "title": "t", "content": "c", "tags": ["t"] * 51})


def test_every_tool_output_matches_its_schema(indexed: tuple[Path, Path]) -> None:
    db, workspace = indexed
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        service = KnowledgeService(store, workspace)
        note = service.call("store", {"topic": "journal", "title": "Met Ada", "content": "Chat."})
        results = {
            "store": note,
            "search": service.call("search", {"query": "deploy", "explain": True}),
            "get": service.call("get", {"path": note["path"]}),
            "list": service.call("list", {"topic": "journal"}),
            "status": service.call("status", {}),
            "delete": service.call("delete", {"path": note["path"]}),
        }
    for name, result in results.items():
        jsonschema.validate(result, TOOL_SPECS[name].output_schema)
    assert note["path"].startswith("journal/") and note["path"].endswith("-met-ada.md")
    assert results["list"]["documents"][0]["path"] == note["path"]  # newest first


def test_list_is_newest_first_per_topic(store: KnowledgeStore) -> None:
    store.upsert("journal/a.md", title="A", body="a", updated="2026-01-01")
    store.upsert("journal/b.md", title="B", body="b", updated="2026-03-01")
    store.upsert("user/c.md", title="C", body="c", updated="2026-02-01")
    assert [d["path"] for d in list_documents(store)] == ["journal/b.md", "user/c.md",
                                                          "journal/a.md"]
    assert [d["path"] for d in list_documents(store, "journal", 1)] == ["journal/b.md"]


def test_resources_are_paginated(indexed: tuple[Path, Path],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import kbstore.mcp_server as server

    monkeypatch.setattr(server, "RESOURCE_PAGE", 10)
    db, _ = indexed
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        service = KnowledgeService(store)
        seen, cursor, pages = [], None, 0
        while True:
            items, cursor = service.resource_page(cursor)
            seen += [i["uri"] for i in items]
            pages += 1
            if cursor is None:
                break
        assert pages == 4 and len(seen) == len(set(seen)) == 34
        with pytest.raises(ToolArgumentError):
            service.resource_page("not-a-number")


def test_delete_never_follows_a_symlink_out_of_the_workspace(indexed: tuple[Path, Path],
                                                             tmp_path: Path) -> None:
    db, workspace = indexed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.md").write_text("# keep me")
    os.symlink(elsewhere, workspace / "knowledge/projects/link")
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        service = KnowledgeService(store, workspace)
        with pytest.raises(ToolArgumentError, match="outside the workspace"):
            service.call("delete", {"path": "projects/link/x.md"})
    assert (elsewhere / "x.md").is_file()


@pytest.mark.integration
def test_the_model_loads_once_when_the_server_starts(copy_minilm_sample: Any,
                                                     tmp_path: Path) -> None:
    copy_minilm_sample(tmp_path / "kb.sqlite")  # the sample knowledge base, MiniLM vectors
    with KnowledgeStore.open(tmp_path / "kb.sqlite", "minilm", hype=False) as store:
        service = KnowledgeService(store)
        emb = store.embedder
        assert emb._session is None and emb._capi is None  # opening alone loads nothing
        service.warm()
        # a process that has not embedded documents runs queries on the C
        # library's session (embed_ort_capi), else on the module's
        session = emb._capi or emb._session
        assert session
        for query in ("deploy rollback", "sourdough", "what does the user like"):
            assert service.call("search", {"query": query})["count"] > 0
        assert (emb._capi or emb._session) is session  # the same warm model, never reloaded


def test_any_arguments_give_a_result_or_a_one_line_error(indexed: tuple[Path, Path]) -> None:
    """Fuzz: whatever a client sends, a tool answers with output matching its
    schema or refuses with one line; nothing else escapes (the server would
    report it as an internal error)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from kbstore.mcp_server import _expected_errors

    db, workspace = indexed
    expected = _expected_errors()
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                        st.floats(allow_nan=True, allow_infinity=True),
                        st.text(st.characters(codec=None), max_size=40),
                        st.sampled_from(["../../etc/passwd", "projects/picobot-memory-design.md",
                                         "user", "journal", "", " ", "\x00", "kb://x.md"]))
    values = st.one_of(scalars, st.lists(scalars, max_size=4),
                       st.dictionaries(st.text(max_size=5), scalars, max_size=2))

    @st.composite
    def calls(draw: Any) -> tuple[str, Any]:
        name = draw(st.sampled_from([*TOOL_SPECS, "bogus"]))
        keys = list(TOOL_SPECS[name].input_schema["properties"]) if name in TOOL_SPECS else []
        chosen = draw(st.lists(st.sampled_from(keys + ["extra"]), unique=True, max_size=5))
        args = {key: draw(values) for key in chosen}
        return name, draw(st.one_of(st.just(args), values)) if draw(st.booleans()) else args

    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        service = KnowledgeService(store, workspace)

        @settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(calls())
        def check(call: tuple[str, Any]) -> None:
            name, args = call
            try:
                result = service.call(name, args)
            except expected as exc:
                assert str(exc).strip() and "\n" not in str(exc).strip(), repr(exc)
                return
            jsonschema.validate(result, TOOL_SPECS[name].output_schema)

        check()


@pytest.mark.parametrize("error", ["expected", "internal"])
def test_a_tool_error_sent_to_the_agent_carries_no_secret(store: KnowledgeStore, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         error: str) -> None:
    """The agent's transcript (often logged, often sent to an LLM provider)
    gets the same redaction as kbstore's own log."""
    from kbstore.errors import KBStoreError
    from kbstore.mcp_server import build_server

    key = "sk-proj-" + "Zq8XbN3vLmP0tR7sW2yK5jH9dF4gA1cE6uI3oB8nM0qT"
    service = KnowledgeService(store, tmp_path)

    def fail(name: str, arguments: Any) -> Any:
        cls = KBStoreError if error == "expected" else RuntimeError
        raise cls(f"upstream said: Incorrect API key provided: {key} (postgresql://u:pw1234@h)")

    monkeypatch.setattr(service, "call", fail)

    async def call() -> Any:
        async with Client(build_server(service)) as client:
            return await client.call_tool("status", {})

    result = anyio.run(call)
    text = " ".join(getattr(part, "text", "") for part in result.content)
    assert result.is_error and "upstream said" in text
    assert key not in text and "pw1234" not in text and "[redacted]" in text

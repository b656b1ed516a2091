"""kbstore as an MCP server: the knowledge base for any agent that speaks MCP.

Built on the official ``mcp`` SDK's low-level ``Server`` so that every tool
has a hand-written JSON schema for its input and its structured output, and
every bad argument becomes a tool error of one line (the model reads it and
corrects itself) instead of a validation dump or a crashed server.

One server holds one open :class:`~kbstore.KnowledgeStore`: the embedding
model loads once, at start, and every query after that pays only the search.
Store calls run in a worker thread under one lock (a store is one SQLite
connection, for one thread at a time); an in-process watcher shares both.
Only kbstore's public API is used: the store's search/get/delete/paths/status
and picobot's ``KnowledgeBase.store`` for writing notes as markdown files.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from . import __version__
from .documents import MAX_FILE_BYTES, SKILLS_TOPIC, TOPICS, validate_path
from .errors import EmptyQueryError, KBStoreError
from .ingest import EXCLUDED_NAMES, knowledge_root
from .mcp_schemas import TOOL_SPECS, ToolArgumentError, check_arguments

log = logging.getLogger("kbstore.mcp")

URI_PREFIX = "kb://"
RESOURCE_PAGE = 500
# Room for the frontmatter picobot adds: the written file must still be under
# the importer's size limit, or it would be on disk but never indexed.
MAX_CONTENT_BYTES = MAX_FILE_BYTES - 64 * 1024
INSTRUCTIONS = (
    "kbstore is this user's long-term knowledge base: markdown notes about the user, their "
    "projects, general know-how, the agent itself and a dated journal, plus skills. Search it "
    "before answering questions about the user or their work; store durable facts, decisions "
    "and procedures you learn (one note per subject; storing the same title again updates it).")


def document_uri(path: str) -> str:
    return URI_PREFIX + quote(path, safe="/")


def list_documents(store: Any, topic: str | None = None, recent: int = 20) -> list[dict[str, Any]]:
    """The ``recent`` most recently updated documents (of one topic)."""
    docs = store.documents(topic=topic, limit=recent, recent=True)
    return [{"path": d.path, "uri": document_uri(d.path), "title": d.title, "tags": d.tags,
             "type": d.doc_type, "topic": d.topic, "date": d.updated or d.created}
            for d in docs]


def _first_line(exc: BaseException) -> str:
    """What a client is told about an error: its first line, redacted (an
    agent's transcript is logged and sent on like kbstore's own log)."""
    from .redact import redact

    text = str(exc).strip()
    return redact(text.splitlines()[0]) if text else type(exc).__name__


class KnowledgeService:
    """The tools' behaviour over one open store, independent of the transport.

    Methods take validated arguments and return JSON-ready dicts; expected
    failures raise KBStoreError/ValueError with a one-line message.
    """

    def __init__(self, store: Any, workspace: str | os.PathLike[str] | None = None, *,
                 watching: bool = False) -> None:
        self.store = store
        self.lock = threading.RLock()
        self.watching = watching
        self.workspace = Path(workspace).expanduser().resolve() if workspace else None
        self._kb: Any = None
        if self.workspace is not None:
            from .picobot import KnowledgeBase

            # A workspace has knowledge/ (picobot's layout); a folder that holds
            # topic folders directly is the knowledge folder itself.
            direct = knowledge_root(self.workspace) == self.workspace and any(
                (self.workspace / t).is_dir() for t in TOPICS)
            self._kb = (KnowledgeBase(base_path=self.workspace, store=store) if direct else
                        KnowledgeBase(workspace=self.workspace, store=store))

    # -- lifecycle -----------------------------------------------------------

    def warm(self) -> None:
        """Load the embedding model now, so the first query does not pay for it."""
        with self.lock:
            self.store.embedder.embed_queries(["warm up"])

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        """Validate ``arguments`` against tool ``name``'s schema and run it."""
        spec = TOOL_SPECS.get(name)
        if spec is None:
            raise ToolArgumentError(f"unknown tool {name!r}; tools: {', '.join(TOOL_SPECS)}")
        args = check_arguments(name, spec.input_schema, arguments)
        method: Callable[..., dict[str, Any]] = getattr(self, f"tool_{name}")
        with self.lock:
            return method(**args)

    # -- tools ---------------------------------------------------------------

    def tool_search(self, query: str, topic: str | None = None, limit: int = 10,
                    min_similarity: float | None = None, explain: bool = False) -> dict[str, Any]:
        try:
            hits = self.store.search(query, topic=topic, limit=limit, explain=explain,
                                     min_similarity=min_similarity)
        except EmptyQueryError:  # "???": refused as the schema refuses "" and "  "
            raise ToolArgumentError("'query' must not be empty") from None
        out = []
        for hit in hits:
            item = {"path": hit.path, "uri": document_uri(hit.path), "title": hit.title,
                    "tags": hit.tags, "type": hit.doc_type, "topic": hit.topic,
                    "date": hit.updated, "score": hit.score, "snippet": hit.snippet}
            if explain and hit.explain is not None:
                item["explain"] = hit.explain
            out.append(item)
        return {"query": query, "topic": topic, "count": len(out), "hits": out}

    def _document(self, path: str) -> Any:
        rel = validate_path(path)
        doc = self.store.get(rel)
        if doc is None:
            raise ToolArgumentError(f"no document at {rel!r}; find paths with the search or "
                                    "list tools")
        return doc

    def tool_get(self, path: str) -> dict[str, Any]:
        doc = self._document(path)
        return {"path": doc.path, "uri": document_uri(doc.path),
                "frontmatter": {"title": doc.title, "topic": doc.topic, "type": doc.doc_type,
                                "tags": doc.tags, "created": doc.created,
                                "updated": doc.updated},
                "body": doc.body}

    def _require_workspace(self, tool: str) -> Path:
        if self.workspace is None or self._kb is None:
            raise ToolArgumentError(
                f"{tool} needs a workspace: this server was started without --workspace, so "
                "it has no folder to keep notes in as markdown files")
        return self.workspace

    def tool_store(self, topic: str, title: str, content: str,
                   tags: list[str] | None = None) -> dict[str, Any]:
        self._require_workspace("store")
        if len(content.encode("utf-8", "surrogatepass")) > MAX_CONTENT_BYTES:
            raise ToolArgumentError(f"content is over {MAX_CONTENT_BYTES} bytes; split it into "
                                    "several notes")
        rel = self._kb.store(topic, title, content, tags)
        doc = self.store.get(rel)
        return {"path": rel, "uri": document_uri(rel), "file": str(self._file_for(rel)),
                "title": doc.title if doc else title, "topic": topic,
                "tags": doc.tags if doc else list(tags or [])}

    @staticmethod
    def _indexable(rel: str) -> bool:
        parts = rel.split("/")
        if parts[0] == SKILLS_TOPIC:
            return len(parts) == 3 and parts[2] == "SKILL.md"
        return len(parts) >= 2 and parts[0] in TOPICS and parts[-1].lower() not in EXCLUDED_NAMES

    def _file_for(self, rel: str) -> Path:
        assert self.workspace is not None
        if rel.startswith(SKILLS_TOPIC + "/"):
            return self.workspace / rel
        return Path(self._kb.base) / rel

    def tool_delete(self, path: str) -> dict[str, Any]:
        workspace = self._require_workspace("delete")
        rel = validate_path(path)
        indexed = self.store.get(rel) is not None
        file: Path | None = None
        if self._indexable(rel):
            candidate = self._file_for(rel)
            try:  # a symlinked folder must not take the unlink outside the workspace
                candidate.parent.resolve().relative_to(workspace)
            except (ValueError, OSError) as exc:
                raise ToolArgumentError(f"{rel!r} resolves outside the workspace") from exc
            if candidate.is_file() or candidate.is_symlink():
                file = candidate
        if not indexed and file is None:
            raise ToolArgumentError(f"no document at {rel!r}; find paths with the search or "
                                    "list tools")
        # The file first: it is the source of truth, so a failure in between
        # leaves a stale index entry the next reconcile removes, never a file
        # that comes back.
        if file is not None:
            file.unlink()
        removed = self.store.delete(rel) if indexed else False
        return {"path": rel, "deleted_from_index": bool(removed), "file_deleted": file is not None,
                "file": None if file is None else str(file)}

    def tool_list(self, topic: str | None = None, recent: int = 20) -> dict[str, Any]:
        docs = list_documents(self.store, topic=topic, recent=recent)
        return {"topic": topic, "count": len(docs), "documents": docs}

    def tool_status(self) -> dict[str, Any]:
        info = self.store.status()
        info.update(workspace=None if self.workspace is None else str(self.workspace),
                    watching=self.watching, writable=self.workspace is not None,
                    server_version=__version__)
        return info

    # -- resources -----------------------------------------------------------

    def resource_page(self, cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        try:
            start = int(cursor or 0)
        except ValueError as exc:
            raise ToolArgumentError(f"bad cursor {cursor!r}") from exc
        with self.lock:
            paths = self.store.paths()
            page = [d for d in (self.store.get(p) for p in paths[start:start + RESOURCE_PAGE])
                    if d is not None]
        items = [{"uri": document_uri(d.path), "name": d.path, "title": d.title,
                  "description": f"{d.doc_type} in {d.topic}; tags: {', '.join(d.tags) or '-'}"}
                 for d in page]
        nxt = start + RESOURCE_PAGE
        return items, (str(nxt) if nxt < len(paths) else None)

    def read_resource(self, uri: str) -> str:
        """The document as a markdown file with frontmatter."""
        from .picobot import render_markdown

        if not uri.startswith(URI_PREFIX):
            raise ToolArgumentError(f"not a kbstore resource: {uri!r} (expected {URI_PREFIX}"
                                    "<path>)")
        with self.lock:
            doc = self._document(unquote(uri[len(URI_PREFIX):]))
        meta = {"title": doc.title, "topic": doc.topic, "tags": doc.tags}
        meta.update({k: v for k, v in (("created", doc.created), ("updated", doc.updated)) if v})
        return render_markdown(meta, doc.body)


# -- the SDK glue ----------------------------------------------------------------


def _expected_errors() -> tuple[type[BaseException], ...]:
    from .cli.common import _database_errors

    return (KBStoreError, ValueError, TypeError, OSError, *_database_errors())


def build_server(service: KnowledgeService) -> Any:
    """The MCP ``Server`` with kbstore's tools and its documents as resources."""
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    expected = _expected_errors()
    tools = [types.Tool(name=s.name, title=s.title, description=s.description,
                        input_schema=s.input_schema, output_schema=s.output_schema,
                        annotations=types.ToolAnnotations(**s.annotations))
             for s in TOOL_SPECS.values()]

    def text(value: str) -> list[Any]:
        return [types.TextContent(type="text", text=value)]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        name = params.name
        try:
            result = await anyio.to_thread.run_sync(
                functools.partial(service.call, name, params.arguments))
        except expected as exc:
            log.info("tool %s refused: %s", name, _first_line(exc))
            return types.CallToolResult(content=text(f"{name}: {_first_line(exc)}"),
                                        is_error=True)
        except Exception as exc:  # a bug: keep serving, say what broke, log the trace
            log.exception("tool %s failed", name)
            return types.CallToolResult(
                content=text(f"{name}: internal error ({type(exc).__name__}: "
                             f"{_first_line(exc)})"), is_error=True)
        return types.CallToolResult(content=text(json.dumps(result, ensure_ascii=False)),
                                    structured_content=result)

    async def list_resources(ctx: Any, params: Any) -> Any:
        try:
            items, nxt = await anyio.to_thread.run_sync(
                service.resource_page, getattr(params, "cursor", None))
        except expected as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=_first_line(exc)) from exc
        return types.ListResourcesResult(
            resources=[types.Resource(mime_type="text/markdown", **item) for item in items],
            next_cursor=nxt)

    async def list_templates(ctx: Any, params: Any) -> Any:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            uri_template=URI_PREFIX + "{+path}", name="document", title="Knowledge document",
            description="A document by its path, e.g. kb://projects/picobot.md",
            mime_type="text/markdown")])

    async def read_resource(ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        try:
            body = await anyio.to_thread.run_sync(service.read_resource, uri)
        except expected as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=_first_line(exc),
                           data={"uri": uri}) from exc
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, text=body, mime_type="text/markdown")])

    return Server("kbstore", version=__version__, title="kbstore knowledge base",
                  instructions=INSTRUCTIONS,
                  get_tool_input_schema=lambda name: (TOOL_SPECS[name].input_schema
                                                      if name in TOOL_SPECS else None),
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_list_resource_templates=list_templates,
                  on_read_resource=read_resource)


async def serve_stdio(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Any, host: str, port: int) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp (DNS-rebinding protection on for
    loopback hosts, as the SDK sets it)."""
    import uvicorn

    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    log.info("serving MCP over streamable HTTP at http://%s:%d/mcp", host, port)
    await uvicorn.Server(config).serve()


@dataclass
class ServeOptions:
    db: str
    workspace: str | None = None
    embedder: str | None = None
    hype: bool | None = None
    http: bool = False
    host: str = "127.0.0.1"
    port: int = 8765
    watch: bool = False
    debounce_ms: int | None = None


def serve(options: ServeOptions) -> None:
    """Open the store (model loaded once), optionally start a watcher thread,
    and serve until the client disconnects (stdio) or the process is stopped."""
    import time

    import anyio

    from .store import KnowledgeStore
    from .watch import DEFAULT_DEBOUNCE_MS, Watcher

    started = time.perf_counter()
    store = KnowledgeStore.open(options.db, options.embedder, hype=options.hype)
    stop = threading.Event()
    thread: threading.Thread | None = None
    service: KnowledgeService | None = None
    try:
        service = KnowledgeService(store, options.workspace, watching=options.watch)
        service.warm()
        log.info("kbstore MCP server ready in %.1f s: %s (%d documents, embedder %s)",
                 time.perf_counter() - started, options.db, len(store),
                 store.embedder.name if store.embedder else "none")
        if options.watch:
            assert options.workspace is not None
            watcher = Watcher(options.workspace, store, lock=service.lock,
                              debounce_ms=options.debounce_ms or DEFAULT_DEBOUNCE_MS)
            thread = threading.Thread(target=_run_watcher, args=(watcher, stop),
                                      name="kbstore-watch", daemon=True)
            thread.start()
            # Serve only once events are collected: an edit right after the
            # client connects must not fall in the gap.
            watcher.ready.wait(timeout=10)
        server = build_server(service)
        if options.http:
            anyio.run(serve_http, server, options.host, options.port)
        else:
            anyio.run(serve_stdio, server)
    finally:
        stop.set()
        if thread is not None:
            thread.join(timeout=5)
        with (service.lock if service is not None else contextlib.nullcontext()):
            store.close()


def _run_watcher(watcher: Any, stop: threading.Event) -> None:
    try:
        watcher.run(stop)
    except Exception:  # the server keeps serving; the index just stops following edits
        log.exception("the workspace watcher stopped")

"""mcp, watch: the knowledge base for MCP agents, and an index that follows edits."""

from __future__ import annotations

import importlib
import logging
import os
import sys

import click

from ..embedders import EMBEDDER_NAMES
from .common import cli, db_option, friendly_errors

MISSING_EXTRA = "kbstore {command} needs the MCP extra: pip install 'kbstore[mcp]'"
WORKSPACE_ENV = "KBSTORE_WORKSPACE"


def _require(command: str, *modules: str) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise click.ClickException(MISSING_EXTRA.format(command=command)) from exc


def _log_to_stderr(quiet: bool) -> None:
    # stdout may be the MCP wire: everything human goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kbstore").setLevel(logging.WARNING if quiet else logging.INFO)


def _embedder_option(fn):  # type: ignore[no-untyped-def]
    return click.option("--embedder", type=click.Choice(EMBEDDER_NAMES), default=None,
                        help="Embedder (default: the one the database was made with; a new "
                             "database: nomic).")(fn)


def _hype_option(fn):  # type: ignore[no-untyped-def]
    return click.option("--hype/--no-hype", default=None,
                        help="HyPE questions for stored/changed notes (default: env "
                             "KBSTORE_HYPE, else on).")(fn)


def _debounce_option(fn):  # type: ignore[no-untyped-def]
    return click.option("--debounce-ms", type=click.IntRange(50, 60_000), default=None,
                        help="Longest a burst of file events is grouped before a reconcile "
                             "(default 2000).")(fn)


@cli.command("mcp")
@db_option
@click.option("--workspace", type=click.Path(exists=True, file_okay=False), default=None,
              envvar=WORKSPACE_ENV,
              help=f"picobot workspace where `store` writes notes (env {WORKSPACE_ENV}); "
                   "without it the server is read-only.")
@_embedder_option
@_hype_option
@click.option("--http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP address.")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True,
              help="HTTP port.")
@click.option("--watch", is_flag=True,
              help="Also follow edits in the workspace (like `kbstore watch`).")
@_debounce_option
@click.option("--quiet", is_flag=True, help="Log warnings only.")
@friendly_errors
def mcp(db_path: str, workspace: str | None, embedder: str | None, hype: bool | None,
        http: bool, host: str, port: int, watch: bool, debounce_ms: int | None,
        quiet: bool) -> None:
    """Serve the knowledge base to MCP clients (stdio, or --http).

    Tools: search, get, store, delete, list, status; documents are resources
    kb://<path>. The embedding model loads once, when the server starts.
    """
    _require("mcp", "mcp", *(("watchfiles",) if watch else ()))
    if watch and workspace is None:
        raise click.ClickException("--watch needs --workspace DIR (the folder to follow)")
    if workspace is None and not os.path.exists(db_path):
        # A mistyped --db must not quietly serve a new, empty knowledge base.
        raise click.ClickException(f"no database at {db_path}; create it with `kbstore import` "
                                   "or pass --workspace DIR to start one")
    from ..mcp_server import ServeOptions, serve

    _log_to_stderr(quiet)
    serve(ServeOptions(db=db_path, workspace=workspace, embedder=embedder, hype=hype, http=http,
                       host=host, port=port, watch=watch, debounce_ms=debounce_ms))


@cli.command("watch")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False))
@db_option
@_embedder_option
@_hype_option
@_debounce_option
@click.option("--initial-sync/--no-initial-sync", default=True, show_default=True,
              help="Reconcile the whole workspace first (catches edits made while not "
                   "watching).")
@click.option("--quiet", is_flag=True, help="Log warnings only.")
@click.option("--dry-run", is_flag=True,
              help="Only say what the initial sync would add, update and delete, then exit "
                   "(read-only; nothing is watched).")
@friendly_errors
def watch(workspace: str, db_path: str, embedder: str | None, hype: bool | None,
          debounce_ms: int | None, initial_sync: bool, quiet: bool, dry_run: bool) -> None:
    """Keep the index in step with WORKSPACE as its files are edited.

    Only changed paths are reconciled. A vanished knowledge folder, or more
    than half of the documents gone at once, deletes nothing (a warning says
    so); `kbstore import` removes them on purpose.
    """
    if dry_run:
        from ..plans import plan_import
        from .common import existing_store, print_plan

        with existing_store(db_path, embedder) as store:
            plan = plan_import(store, workspace, prune=None)
        print_plan(plan, False, "whose files are gone",
                   f"`kbstore import --db {db_path} --prune {workspace}` deletes them")
        return
    _require("watch", "watchfiles")
    import signal
    import threading

    from ..store import KnowledgeStore
    from ..watch import DEFAULT_DEBOUNCE_MS, Watcher

    _log_to_stderr(quiet)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with KnowledgeStore.open(db_path, embedder, hype=hype) as store:
        watcher = Watcher(workspace, store, debounce_ms=debounce_ms or DEFAULT_DEBOUNCE_MS)
        click.echo(f"watching {watcher.workspace} -> {db_path} (Ctrl-C to stop)", err=True)
        try:
            watcher.run(stop, initial_sync=initial_sync)
        except KeyboardInterrupt:
            pass
    click.echo(f"stopped after {watcher.reconciles} reconcile(s)", err=True)

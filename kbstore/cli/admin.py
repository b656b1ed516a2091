"""init, migrate, status, vec-path."""

from __future__ import annotations

from typing import Any

import click

from ..embedders import EMBEDDER_NAMES
from .common import cli, db_option, echo_json, friendly_errors, json_option, open_store


@cli.command()
@db_option
@click.option("--embedder", type=click.Choice(EMBEDDER_NAMES), default="nomic", show_default=True,
              help="Embedding model; its fingerprint is stored in the file.")
@click.option("--dim", type=int, default=None,
              help="Vector dimension (nomic: 768, 512, 256, 128, 64; fake: any multiple of 8).")
@click.option("--inference-mode", type=click.Choice(["local", "remote", "dynamic"]),
              default="local", show_default=True, help="nomic only.")
@friendly_errors
def init(db_path: str, embedder: str, dim: int | None, inference_mode: str) -> None:
    """Create a knowledge store (schema + vector table for the embedder).

    An existing store is left as it is (a store without documents takes the
    new embedder).
    """
    from ..embedders import get_embedder

    options: dict[str, Any] = {"dim": dim} if dim is not None else {}
    if embedder == "nomic":
        options["inference_mode"] = inference_mode
    chosen = get_embedder(embedder, **options)  # bad --dim fails before a file exists
    # A file this command made is removed again if opening it fails before its
    # schema is committed (the SQLite backend's open does it, for every command).
    with open_store(db_path, create=True, embedder=chosen) as store:
        info = store.status()
        made = store.created
    fp = info["embedder"]
    click.echo(f"{'initialised' if made else 'checked'} {info['path']}: schema "
               f"v{info['schema_version']}, embedder {fp['name']} ({fp['model']}, "
               f"{fp['dim']} dims), {info['documents']} document(s)")


@cli.command()
@db_option
@click.option("--list", "list_only", is_flag=True, help="Only list applied and pending steps "
              "(read-only).")
@friendly_errors
def migrate(db_path: str, list_only: bool) -> None:
    """Apply pending schema migrations (--list is read-only)."""
    from ..backends import schema_of

    before = schema_of(db_path)
    if list_only:
        for name in before.applied:
            if name not in before.unknown:  # listed below, once
                click.echo(f"applied  {name}")
        for name in before.pending:
            click.echo(f"pending  {name}")
        for name in before.unknown:
            click.echo(f"unknown  {name} (from a newer kbstore)")
        return
    from ..backends import open_backend

    open_backend(db_path, mode="write").close()  # opening for writing migrates
    applied = before.pending
    click.echo(f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied
                                                          else "; schema is current"))


@cli.command()
@db_option
@json_option
@friendly_errors
def status(db_path: str, as_json: bool) -> None:
    """Schema version, counts, embedder fingerprint and file size (read-only)."""
    with open_store(db_path, read_only=True) as store:
        info = store.status()
    if as_json:
        echo_json(info)
        return
    fp = info["embedder"] or {}
    click.echo(f"database        {info['path']} ({info['file_bytes']:,} bytes)")
    if info.get("knowledge_base"):
        click.echo(f"backend         {info['backend']}, knowledge base {info['knowledge_base']}")
    pending = info.get("pending_migrations") or []
    click.echo(f"schema version  {info['schema_version']}" + (
        f" ({len(pending)} migration(s) pending: `kbstore migrate` or any "
        "writing command applies them)" if pending else ""))
    click.echo(f"embedder        {fp.get('name')} {fp.get('model')} dim={fp.get('dim')} "
               f"prefixes={fp.get('document_prefix') or '-'}/{fp.get('query_prefix') or '-'}")
    click.echo(f"documents       {info['documents']}")
    chunks = info.get("chunk_vectors", 0)
    hype = info["vectors"] - info["doc_vectors"] - chunks
    click.echo(f"vectors         {info['vectors']} ({info['doc_vectors']} document, "
               f"{chunks} chunk, {hype} HyPE)")
    click.echo(f"HyPE questions  {info['hype_questions']} ({info['hype_pending']} documents "
               f"without current questions, {info['hype_failed']} failed)")
    if info.get("rebuild_in_progress"):
        click.echo("reembed         interrupted: run `kbstore reembed` again to finish")


@cli.command("vec-path")
def vec_path() -> None:
    """Print the sqlite-vec file to `.load` in the sqlite3 shell."""
    from ..backends.sqlite import vec_path as path

    click.echo(path())

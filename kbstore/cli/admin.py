"""init, migrate, status, vec-path."""

from __future__ import annotations

from typing import Any

import click

from .. import db as _db
from .. import migrations as _migrations  # type: ignore[attr-defined]  # package-dir mapped
from .. import schema
from ..embed import EMBEDDER_NAMES
from . import cli, db_option, echo_json, friendly_errors, json_option


@cli.command()
@db_option
@click.option("--embedder", type=click.Choice(EMBEDDER_NAMES), default="nomic", show_default=True,
              help="Embedding model; its fingerprint is stored in the file.")
@click.option("--dim", type=int, default=None,
              help="Vector dimension (nomic: 768, 512, 256; fake: any multiple of 8).")
@click.option("--inference-mode", type=click.Choice(["local", "remote", "dynamic"]),
              default="local", show_default=True, help="nomic only.")
@friendly_errors
def init(db_path: str, embedder: str, dim: int | None, inference_mode: str) -> None:
    """Create a knowledge store (schema + vector table for the embedder)."""
    from ..store import KnowledgeStore

    options: dict[str, Any] = {"dim": dim} if dim else {}
    if embedder == "nomic":
        options["inference_mode"] = inference_mode
    with KnowledgeStore.open(db_path, embedder, hype=False, **options) as store:
        fp = store.status()["embedder"]
    click.echo(f"initialised {db_path}: schema v{_migrations.SCHEMA_VERSION}, embedder "
               f"{fp['name']} ({fp['model']}, {fp['dim']} dims)")


@cli.command()
@db_option
@click.option("--list", "list_only", is_flag=True, help="Only list applied and pending steps.")
@friendly_errors
def migrate(db_path: str, list_only: bool) -> None:
    """Apply pending schema migrations (--list is read-only)."""
    conn = _db.connect(db_path, load_extension=not list_only)
    try:
        if list_only:
            current = schema.state(conn)
            for name in current.applied:
                click.echo(f"applied  {name}")
            for name in current.pending:
                click.echo(f"pending  {name}")
            for name in current.unknown:
                click.echo(f"unknown  {name} (from a newer kbstore)")
            return
        applied = schema.ensure_schema(conn)
    finally:
        conn.close()
    click.echo(f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied
                                                          else "; schema is current"))


@cli.command()
@db_option
@json_option
@friendly_errors
def status(db_path: str, as_json: bool) -> None:
    """Schema version, counts, embedder fingerprint and file size."""
    import os

    from ..store import KnowledgeStore

    if not os.path.exists(db_path):
        raise click.ClickException(f"no database at {db_path}; create it with `kbstore init`")
    with KnowledgeStore.open(db_path, hype=False) as store:
        info = store.status()
    if as_json:
        echo_json(info)
        return
    fp = info["embedder"] or {}
    click.echo(f"database        {info['path']} ({info['file_bytes']:,} bytes)")
    click.echo(f"schema version  {info['schema_version']}")
    click.echo(f"embedder        {fp.get('name')} {fp.get('model')} dim={fp.get('dim')} "
               f"prefixes={fp.get('document_prefix') or '-'}/{fp.get('query_prefix') or '-'}")
    click.echo(f"documents       {info['documents']}")
    click.echo(f"vectors         {info['vectors']} ({info['doc_vectors']} document, "
               f"{info['vectors'] - info['doc_vectors']} HyPE)")
    click.echo(f"HyPE questions  {info['hype_questions']} ({info['hype_pending']} documents "
               "pending)")


@cli.command("vec-path")
def vec_path() -> None:
    """Print the sqlite-vec file to `.load` in the sqlite3 shell."""
    click.echo(_db.vec_path())

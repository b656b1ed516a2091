"""import-npz, export, import-jsonl: moving knowledge in and out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..embedders import EMBEDDER_NAMES
from ..model import fingerprint_id, same_model
from .common import (
    Committed,
    announce_deletions,
    cli,
    db_option,
    dry_run_option,
    echo_json,
    existing_store,
    friendly_errors,
    json_option,
    open_store,
    print_plan,
    shown,
    some_paths,
)

_hype_option = click.option(
    "--hype/--no-hype", default=None,
    help="Ask the LLM for HyPE questions the file did not bring (default: env KBSTORE_HYPE, "
         "else on).")
_embedder_option = click.option(
    "--embedder", type=click.Choice(EMBEDDER_NAMES), default=None,
    help="Embedder for a new database (default: the stored one, else nomic).")


@cli.command("import-npz")
@db_option
@click.option("--workspace", required=True, type=click.Path(file_okay=False),
              help="The picobot workspace the npz was made from (documents come from here).")
@click.argument("npz", type=click.Path(dir_okay=False))
@click.option("--allow-pickle", is_flag=True,
              help="Accept pickled arrays in the npz (only for a file you made yourself).")
@click.option("--trust-vectors", is_flag=True,
              help="Reuse the vectors of an npz that records no embedder (picobot's sidecar "
                   "does not) as if this store's model made them. Without it they are not "
                   "used and the documents are embedded again. An npz naming another model "
                   "is never reused.")
@click.option("--prune/--no-prune", default=None,
              help="As for `kbstore import`: delete documents whose files are gone.")
@_hype_option
@_embedder_option
@dry_run_option
@json_option
@friendly_errors
def import_npz_cmd(db_path: str, workspace: str, npz: str, allow_pickle: bool,
                   trust_vectors: bool, prune: bool | None, hype: bool | None,
                   embedder: str | None, dry_run: bool, as_json: bool) -> None:
    """Import picobot's old embeddings.npz sidecar, reusing what it can.

    A vector is reused when the npz's embedder fingerprint is this store's
    (or it records none and --trust-vectors is given), its document's body
    still has the md5 recorded in the npz and its dimension is the store's;
    stale, unknown, mismatched and untrusted entries are reported and the
    workspace is then reconciled as `kbstore import` would (embedding what
    is left). HyPE questions in the npz are text and are always kept.
    """
    from ..exchange_npz import import_npz, read_npz

    # Check inputs before opening: opening creates the database.
    if not Path(npz).is_file():
        raise click.ClickException(f"no npz file at {npz}")
    if not Path(workspace).is_dir():
        raise click.ClickException(f"no workspace folder at {workspace}")
    if dry_run:  # the documents come from the workspace; the npz only saves embedding
        from ..embedders import DEFAULT_EMBEDDER, get_embedder
        from ..plans import plan_npz

        archive = read_npz(npz, allow_pickle)  # a bad npz fails the dry run as the import
        with existing_store(db_path, embedder) as store:
            chosen = (store.embedder if store is not None and store.embedder is not None
                      else get_embedder(embedder or DEFAULT_EMBEDDER))
            plan = plan_npz(store, workspace, archive, chosen.fingerprint(), int(chosen.dim),
                            trust_vectors=trust_vectors, prune=prune)
        print_plan(plan, as_json, "whose files are gone", "rerun with --prune to delete them")
        return
    committed = Committed()
    with committed.on_interrupt(), \
            open_store(db_path, create=True, hype=hype, embedder=embedder) as store:
        report = import_npz(store, workspace, npz, allow_pickle=allow_pickle,
                            trust_vectors=trust_vectors, prune=prune, progress=committed,
                            before_delete=lambda paths: announce_deletions(
                                paths, "whose files are gone"))
        ours = store.embedder.fingerprint() if store.embedder is not None else {}
    if as_json:
        echo_json(report.to_dict())
    else:
        click.echo(report.summary())
    if report.untrusted:
        click.echo(f"note: the npz vectors of {report.untrusted} fresh document(s) were not "
                   f"used: {report.untrusted_reason}; those documents were embedded with this "
                   "store's embedder", err=True)
    elif report.imported_vectors and not report.fingerprint:
        click.echo(f"note: --trust-vectors: {report.imported_vectors} npz vector(s) were taken "
                   f"as {ours.get('model')} vectors (this store's model); if they were not, run "
                   f"`kbstore reembed --db {db_path} --embedder {ours.get('name')}`", err=True)
    for skipped in report.reconcile.skipped:
        click.echo(f"  skipped {shown(skipped.path)}: {skipped.reason}", err=True)
    if report.reconcile.kept_missing:
        click.echo(f"kept {len(report.reconcile.kept_missing)} document(s) whose files are "
                   f"missing ({report.reconcile.kept_reason}); rerun with --prune to delete "
                   "them, or with --no-prune if they belong here without files", err=True)
        if prune is None:
            raise SystemExit(1)


@cli.command("export")
@db_option
@click.option("--format", "fmt", type=click.Choice(["jsonl", "markdown"]), required=True,
              help="jsonl: lossless, one document per line; markdown: a picobot workspace tree.")
@click.argument("out", type=click.Path())
@click.option("--vectors", is_flag=True,
              help="jsonl only: include vectors, tagged with the embedder fingerprint.")
@click.option("--force", is_flag=True, help="jsonl only: replace OUT if it exists.")
@friendly_errors
def export_cmd(db_path: str, fmt: str, out: str, vectors: bool, force: bool) -> None:
    """Export every document to OUT (a .jsonl file, '-' for stdout, or a new folder).

    Read-only: the database is never modified, and OUT is never the database
    itself; an existing OUT is kept unless --force.
    """
    from ..exchange import export_jsonl, export_markdown

    if vectors and fmt != "jsonl":
        raise click.UsageError("--vectors only applies to --format jsonl")
    with open_store(db_path, read_only=True) as store:
        if fmt == "jsonl":
            count = export_jsonl(store, out, include_vectors=vectors, overwrite=force)
            if out != "-":
                click.echo(f"exported {count} document(s) to {out}"
                           f"{' with vectors' if vectors else ''}")
            return
        report = export_markdown(store, out)
    click.echo(f"exported to {out}: {report.summary()}")


@cli.command("import-jsonl")
@db_option
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@_hype_option
@_embedder_option
@dry_run_option
@json_option
@friendly_errors
def import_jsonl_cmd(db_path: str, file: str, hype: bool | None, embedder: str | None,
                     dry_run: bool, as_json: bool) -> None:
    """Import a `kbstore export --format jsonl` FILE ('-' for stdin).

    Vectors are reused only if their fingerprint is this store's; HyPE
    questions are kept; anything missing is embedded. A bad record is skipped
    with its line number and reason; the others are imported.
    """
    from ..exchange import import_jsonl

    if file != "-" and not Path(file).is_file():
        raise click.ClickException(f"no file at {file}")
    source: Any = _spooled_stdin() if file == "-" else file
    chosen = _jsonl_embedder(db_path, source, file, embedder)
    if dry_run:
        from ..plans import plan_jsonl

        with existing_store(db_path, chosen) as store:
            plan = plan_jsonl(store, source)
        print_plan(plan, as_json, "")
        return
    committed = Committed()
    with committed.on_interrupt(), \
            open_store(db_path, create=True, hype=hype, embedder=chosen) as store:
        report = import_jsonl(store, source, progress=committed)
        ours = store.embedder.fingerprint() if store.embedder is not None else None
    if as_json:
        echo_json(report.to_dict())
    else:
        click.echo(report.summary())
    if report.fingerprint_mismatch and ours is not None:
        click.echo(f"note: the vectors of {report.fingerprint_mismatch} record(s) were made by "
                   f"another embedder than this store's ({fingerprint_id(ours)}); they were "
                   "not used, and those documents were embedded again with this store's",
                   err=True)
    for skipped in report.skipped:
        click.echo(f"  skipped {shown(skipped.path)}: {skipped.reason}", err=True)


def _spooled_stdin() -> Any:
    """stdin as a seekable text file (its header is read twice)."""
    import shutil
    import sys
    import tempfile

    spool = tempfile.SpooledTemporaryFile(max_size=64 << 20, mode="w+", encoding="utf-8",
                                          errors="surrogateescape")
    shutil.copyfileobj(sys.stdin, spool)
    spool.seek(0)
    return spool


def _jsonl_embedder(db_path: str, source: Any, file: str, embedder: str | None) -> Any:
    """The embedder an import of ``source`` uses: the export's own for a store
    without documents (so its vectors are reused and its fingerprint is
    recorded), the store's otherwise; a chosen --embedder that is not the
    export's is refused rather than mixing or silently dropping its vectors."""
    from ..backends import location_exists
    from ..embedders import embedder_from_fingerprint, get_embedder
    from ..exchange import export_fingerprint

    theirs = export_fingerprint(source)
    if theirs is None:
        return embedder
    if embedder is not None:
        chosen = get_embedder(embedder, **({"dim": theirs.get("dim")}
                                           if theirs.get("name") == embedder else {}))
        if not same_model(chosen.fingerprint(), theirs):
            raise click.ClickException(
                f"{file} holds vectors made by {fingerprint_id(theirs)}, not {embedder}: leave "
                f"out --embedder to import with the export's embedder (its vectors are reused), "
                f"then `kbstore reembed --db {db_path} --embedder {embedder}` if you want "
                f"{embedder}")
        return chosen
    if location_exists(db_path):
        with open_store(db_path, read_only=True) as store:
            if len(store):
                return None  # the store's own embedder (documents fix it)
    from ..settings import Settings

    return embedder_from_fingerprint(theirs, model_dir=Settings.from_env().nomic_model_dir)


@cli.command("copy")
@click.argument("source")
@click.argument("destination")
@click.option("--embedder", type=click.Choice(EMBEDDER_NAMES), default=None,
              help="Embedder for a new destination (default: the source's, so its vectors "
                   "are reused; another one embeds everything again).")
@click.option("--prune", is_flag=True,
              help="Delete destination documents the source does not have (listed first); a "
                   "removal that looks like a mistake (an empty source, half the destination) "
                   "is refused and exits 1 unless --force.")
@click.option("--force", is_flag=True,
              help="With --prune: delete them even when that removes most of the destination.")
@click.option("--batch-size", type=click.IntRange(1, 10_000), default=None,
              help="Documents per transaction.")
@dry_run_option
@json_option
@friendly_errors
def copy_cmd(source: str, destination: str, embedder: str | None, prune: bool,
             force: bool, batch_size: int | None, dry_run: bool, as_json: bool) -> None:
    """Copy a knowledge base to another location or backend, losslessly.

    SOURCE and DESTINATION are database files or postgresql:// URLs (with
    ?kb=NAME for a knowledge base other than the default). Documents, tags,
    dates, HyPE questions and -- with the same embedder -- vectors are
    copied; nothing is embedded again and no LLM is called. Run it again to
    resume a copy that stopped: what is already there is skipped.
    """
    from ..transfer import copy_store
    from .common import progress_bar

    if force and not prune:
        raise click.UsageError("--force only applies with --prune")
    if dry_run:
        from ..plans import plan_copy

        plan = plan_copy(source, destination, prune=prune, force=force)
        if not prune:
            plan.keep_reason = "no --prune"
        print_plan(plan, as_json, "the source does not have",
                   "rerun with --prune --force to delete them" if prune else "")
        return
    committed = Committed(done="copied")
    doomed = [0]

    def on_total(total: int) -> None:
        committed.total, committed.bar = total, progress_bar(total, "copy")

    def before_delete(paths: list[str]) -> None:
        announce_deletions(paths, "the source does not have")
        doomed[0] = len(paths)
        deleted(0)

    def deleted(count: int) -> None:  # what a Ctrl-C from now on reports
        committed.done = (f"copied; {count} of {doomed[0]} documents the source does not "
                          "have deleted")

    try:
        with committed.on_interrupt():
            report = copy_store(source, destination, embedder=embedder, prune=prune,
                                force=force, batch_size=batch_size, on_total=on_total,
                                progress=committed, before_delete=before_delete,
                                deleted=deleted)
    finally:
        if committed.bar is not None:
            committed.bar.close()
    if as_json:
        echo_json(report.to_dict())
    else:
        click.echo(report.summary())
        extra = report.extra_in_destination
        if extra and not prune:
            click.echo(f"the destination holds {len(extra)} document(s) the source does not "
                       "have (kept; --prune deletes them)", err=True)
    for skipped in report.jsonl.write.skipped + report.jsonl.skipped:
        click.echo(f"  skipped {shown(skipped.path)}: {skipped.reason}", err=True)
    if prune and report.extra_in_destination:
        click.echo(f"kept {len(report.extra_in_destination)} document(s) the source does not "
                   f"have ({report.kept_reason}): {some_paths(report.extra_in_destination)}\n"
                   "  they were not deleted; rerun with --prune --force to delete them",
                   err=True)
        raise SystemExit(1)

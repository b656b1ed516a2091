"""doctor: check a store and rebuild what can be derived."""

from __future__ import annotations

import click

from ..embedders import EMBEDDER_NAMES
from .common import cli, db_option, echo_json, friendly_errors, json_option, open_store, shown


@cli.command()
@db_option
@click.option("--fix", "do_fix", is_flag=True,
              help="Rebuild what can be derived: schema objects, FTS indexes, tag rows, "
                   "orphans, missing/stale vectors.")
@click.option("--embedder", type=click.Choice(EMBEDDER_NAMES), default=None,
              help="With --fix: the embedder to record when the file lost its fingerprint "
                   "(every vector is then re-made with it).")
@json_option
@friendly_errors
def doctor(db_path: str, do_fix: bool, embedder: str | None, as_json: bool) -> None:
    """Check integrity, schema, FTS indexes, vectors, hashes and the embedder.

    Without --fix it is read-only. Exits 1 while problems remain (pending
    HyPE questions are only noted).
    """
    from ..doctor import diagnose, fix
    from ..embedders import get_embedder

    if embedder and not do_fix:
        raise click.UsageError("--embedder only applies with --fix")
    with open_store(db_path, read_only=not do_fix) as store:
        report = fix(store, embedder=get_embedder(embedder) if embedder else None) \
            if do_fix else diagnose(store)
    if as_json:
        echo_json(report.to_dict())
    else:
        for action in report.fixed:
            click.echo(f"fixed  {action}")
        for check in report.checks:
            if check.skipped:
                click.echo(f"skip   {check.name}: {check.detail}")
                continue
            if check.count == 0:
                click.echo(f"ok     {check.name}" + (f": {check.detail}" if check.detail else ""))
                continue
            label = "FAIL " if check.problem else "note "
            sample = f" (e.g. {_samples(check.sample)})" if check.sample else ""
            hint = "" if check.fixable or not check.problem else " [not fixable by --fix]"
            click.echo(f"{label}  {check.name}: {check.count} - {check.detail}{sample}{hint}")
        if report.ok:
            click.echo("no problems found")
        else:
            fixable = any(c.fixable for c in report.problems)
            click.echo(f"{len(report.problems)} problem(s)"
                       + ("; run with --fix to repair" if fixable and not do_fix else ""),
                       err=True)
    if not report.ok:
        raise SystemExit(1)


def _samples(sample: list[object]) -> str:
    """Ids as they are; a path (a str) escaped, so the line stays one line."""
    return ", ".join(shown(s) if isinstance(s, str) else str(s) for s in sample)

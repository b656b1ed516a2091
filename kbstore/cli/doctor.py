"""doctor: check a store and rebuild what can be derived."""

from __future__ import annotations

import os

import click

from . import cli, db_option, echo_json, friendly_errors, json_option


@cli.command()
@db_option
@click.option("--fix", "do_fix", is_flag=True,
              help="Rebuild what can be derived: FTS index, orphans, missing/stale vectors.")
@json_option
@friendly_errors
def doctor(db_path: str, do_fix: bool, as_json: bool) -> None:
    """Check integrity, the FTS index, vectors, hashes and the embedder.

    Exits 1 while problems remain (pending HyPE questions are only noted).
    """
    from ..doctor import diagnose, fix
    from ..store import KnowledgeStore

    if not os.path.exists(db_path):
        raise click.ClickException(f"no database at {db_path}; create it with `kbstore init`")
    with KnowledgeStore.open(db_path, hype=False) as store:
        report = fix(store) if do_fix else diagnose(store)
    if as_json:
        echo_json(report.to_dict())
    else:
        for action in report.fixed:
            click.echo(f"fixed  {action}")
        for check in report.checks:
            if check.count == 0:
                click.echo(f"ok     {check.name}" + (f": {check.detail}" if check.detail else ""))
                continue
            label = "FAIL " if check.problem else "note "
            sample = f" (e.g. {', '.join(map(str, check.sample))})" if check.sample else ""
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

"""hype: (re)generate HyPE questions for documents already stored."""

from __future__ import annotations

import click

from .common import (
    cli,
    db_option,
    echo_json,
    friendly_errors,
    json_option,
    open_store,
    progress_bar,
)


@cli.command()
@db_option
@click.option("--pending", "mode", flag_value="pending", default=True,
              help="Documents whose HyPE failed, was never made or is stale (default).")
@click.option("--all", "mode", flag_value="all", help="Every document (e.g. after a model "
              "change).")
@click.option("--concurrency", type=click.IntRange(1, 64), default=4, show_default=True,
              help="LLM calls in flight at once.")
@click.option("--dry-run", is_flag=True, help="Only print how many LLM calls would be made.")
@click.option("--model", default=None,
              help="litellm model name (default: env KBSTORE_HYPE_MODEL, else openai/gpt-4o-mini).")
@json_option
@friendly_errors
def hype(db_path: str, mode: str, concurrency: int, dry_run: bool, model: str | None,
         as_json: bool) -> None:
    """Generate HyPE questions with the LLM for pending (or all) documents.

    Exits 1 when some documents are left pending (the LLM failed for them).
    --dry-run is read-only.
    """
    from ..hype_jobs import run_hype, select_targets

    # hype=True: this command is an explicit request, so KBSTORE_HYPE=0 does not veto it.
    with open_store(db_path, read_only=dry_run, hype=True, hype_model=model) as store:
        if dry_run:
            counts = run_hype(store, mode, dry_run=True)
        else:
            total = len(select_targets(store, mode))
            with progress_bar(total, "HyPE") as bar:
                counts = run_hype(store, mode, concurrency=concurrency, progress=bar.update)
        pending = store.status()["hype_pending"]
    counts["pending_after"] = pending
    if as_json:
        echo_json(counts)
        if counts["failed"]:
            raise SystemExit(1)
        return
    if dry_run:
        click.echo(f"dry run: {counts['llm_calls']} LLM call(s) would be made for "
                   f"{counts['documents']} {mode} document(s)")
        return
    click.echo(f"HyPE {mode}: {counts['generated']} generated ({counts['questions']} questions), "
               f"{counts['failed']} failed, {counts['changed']} changed meanwhile, "
               f"{counts['llm_calls']} LLM call(s) with {counts.get('model', '-')}; "
               f"{pending} pending" + ("; stopped early: the LLM kept failing"
                                      if counts["aborted"] else ""))
    if counts["failed"]:
        raise SystemExit(1)

"""import, search, reembed, demo."""

from __future__ import annotations

from typing import Any

import click

from ..embedders import EMBEDDER_NAMES
from .common import (
    Committed,
    announce_deletions,
    cli,
    db_option,
    dry_run_option,
    echo_json,
    existing_store,
    friendly_errors,
    hype_pending_hint,
    json_option,
    open_store,
    print_plan,
    progress_bar,
    shown,
    some_paths,
)


def _print_report(report: Any, as_json: bool) -> None:
    if as_json:
        echo_json(report.to_dict())
    else:
        click.echo(f"added {report.added}, updated {report.updated}, unchanged "
                   f"{report.unchanged}, deleted {report.deleted}, embedded {report.embedded}, "
                   f"HyPE generated {report.hype_generated}, HyPE pending "
                   f"{report.hype_pending}, skipped {len(report.skipped)}")
    for skipped in report.skipped:
        click.echo(f"  skipped {shown(skipped.path)}: {skipped.reason}", err=True)
    if report.kept_missing:
        click.echo(f"kept {len(report.kept_missing)} document(s) whose files are missing "
                   f"({report.kept_reason}): {some_paths(report.kept_missing)}\n"
                   "  they were not deleted; rerun with --prune to delete them, or with "
                   "--no-prune if they belong here without files (another folder imported "
                   "into this database)", err=True)


@cli.command("import")
@db_option
@click.argument("workspace", type=click.Path(exists=True, file_okay=False))
@click.option("--prune/--no-prune", default=None,
              help="Delete documents whose files are gone even when that removes most of the "
                   "store (--prune), or never (--no-prune). Default: delete them unless the "
                   "removal looks like a mistake (an empty folder, half the store).")
@click.option("--hype/--no-hype", default=None,
              help="Generate HyPE questions with the LLM (default: env KBSTORE_HYPE, else on).")
@click.option("--embedder", type=click.Choice(EMBEDDER_NAMES), default=None,
              help="Embedder for a new database (default: the stored one, else nomic).")
@dry_run_option
@json_option
@friendly_errors
def import_(db_path: str, workspace: str, prune: bool | None, hype: bool | None,
            embedder: str | None, dry_run: bool, as_json: bool) -> None:
    """Reconcile the store with a picobot WORKSPACE (by content hash).

    New and changed files are embedded, unchanged ones cost nothing.
    Documents whose file is gone are deleted (each one is listed first);
    a removal that looks like a mistake is refused and exits 1.
    """
    from ..ingest import scan_workspace

    if dry_run:
        from ..plans import plan_import

        with existing_store(db_path, embedder) as store:
            plan = plan_import(store, workspace, prune=prune)
        print_plan(plan, as_json, "whose files are gone", "rerun with --prune to delete them")
        return
    total = sum(1 for _ in scan_workspace(workspace))

    def announce(paths: list[str]) -> None:
        announce_deletions(paths, "whose files are gone")

    committed = Committed(total)
    with committed.on_interrupt(), \
            open_store(db_path, create=True, embedder=embedder, hype=hype) as store, \
            progress_bar(total, "importing") as committed.bar:
        report = store.import_directory(workspace, prune=prune, progress=committed,
                                        before_delete=announce)
    _print_report(report, as_json)
    if not total:
        _note_no_sections(workspace)
    if report.hype_pending and not as_json:
        hype_pending_hint(report.hype_pending, db_path)
    if report.kept_missing and prune is None:
        raise SystemExit(1)


def _note_no_sections(workspace: str) -> None:
    """A folder without any section folder is most likely the wrong folder
    (a section itself, a notes folder): say so rather than 'added 0'."""
    from pathlib import Path

    from ..documents import SKILLS_TOPIC, TOPICS
    from ..ingest import knowledge_root

    root = Path(workspace)
    kroot = knowledge_root(root)
    if any((kroot / topic).is_dir() for topic in TOPICS) or (root / SKILLS_TOPIC).is_dir():
        return
    folders = ", ".join(f"{name}/" for name in (*TOPICS, SKILLS_TOPIC))
    click.echo(f"note: {workspace} has none of the folders {folders} (nor knowledge/ holding "
               "them), so there is nothing to import from it; only markdown files inside those "
               "folders are documents", err=True)


class _SearchCommand(click.Command):
    """A query that starts with '-' reads as an option to click: say how to
    pass it (after ``--``) under click's own error."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # click's parser consumes the list
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            import shlex

            dashed = next((a for a in given if a.startswith("-") and a.split("=")[0] not in
                           {o for p in self.params for o in (*p.opts, *p.secondary_opts)}),
                          exc.option_name)
            hint = (f"\n  A query starting with '-' goes after '--': "
                    f"kbstore search -- {shlex.quote(dashed)}")
            raise click.NoSuchOption(exc.option_name, message=exc.message + hint,
                                     possibilities=exc.possibilities, ctx=exc.ctx) from None


@cli.command(cls=_SearchCommand)
@db_option
@click.argument("query")
@click.option("--topic", default=None, help="Only this topic (self, user, projects, ...).")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option("--fusion", type=click.Choice(["rrf", "convex"]), default=None,
              help="Fusion of the retrievers (default: the database's, rrf).")
@click.option("--min-similarity", type=float, default=None,
              help="Drop hits whose best vector similarity is below this (unless a tag/title "
                   "match). Default: the database's floor.")
@click.option("--explain", is_flag=True, help="Show each retriever's rank and every factor.")
@click.option("--shell", is_flag=True,
              help="Print a sqlite3-shell script that runs the same search statement.")
@json_option
@friendly_errors
def search(db_path: str, query: str, topic: str | None, limit: int, fusion: str | None,
           min_similarity: float | None, explain: bool, shell: bool, as_json: bool) -> None:
    """Hybrid search (frontmatter + FTS5 BM25 + vectors, fused). Read-only.

    QUERY is plain text: quotes, *, ^, AND/OR/NOT, NEAR( and column: are
    searched as words, never as FTS5 syntax. A QUERY starting with '-' goes
    after '--' (options first): kbstore search --db X -- "-x is a flag".
    """
    given: dict[str, Any] = {k: v for k, v in (("fusion", fusion),
                                               ("min_similarity", min_similarity))
                             if v is not None}
    with open_store(db_path, read_only=True) as store:
        if shell:
            click.echo(store.shell_script(query, topic=topic, limit=limit, **given), nl=False)
            return
        hits = store.search(query, topic=topic, limit=limit, explain=explain, **given)
        if not hits and topic is not None and not store.documents(topic=topic, limit=1):
            from ..documents import SKILLS_TOPIC, TOPICS

            click.echo(f"note: no document has topic {topic!r} (picobot's topics: "
                       f"{', '.join((*TOPICS, SKILLS_TOPIC))})", err=True)
    if as_json:
        for hit in hits:
            echo_json(hit.to_dict())
        return
    if not hits:
        click.echo("no results")
    for n, hit in enumerate(hits, start=1):
        click.echo(f"{n:2}. {hit.score:.4f}  {shown(hit.path)}  [{hit.doc_type}] {hit.title}")
        if explain and hit.explain:
            e = hit.explain
            ranks = ", ".join(f"{k}={v if v is not None else '-'}" for k, v in e["ranks"].items())
            rrf = ", ".join(f"{k}={v:.4f}" for k, v in e["rrf"].items())
            click.echo(f"      ranks: {ranks}")
            click.echo(f"      rrf: {rrf}; boost x{e['boost']:.2f}; decay x{e['decay']:.3f}")
            if e.get("matched_question"):
                click.echo(f"      matched HyPE question: {e['matched_question']}")
        click.echo(f"      {hit.snippet}")


@cli.command()
@db_option
@click.option("--embedder", type=click.Choice(EMBEDDER_NAMES), required=True)
@click.option("--dim", type=int, default=None, help="Vector dimension (nomic: 768/512/256).")
@click.option("--dry-run", is_flag=True,
              help="Only say how many documents' vectors would be replaced, and by which "
                   "model's (read-only).")
@friendly_errors
def reembed(db_path: str, embedder: str, dim: int | None, dry_run: bool) -> None:
    """Rebuild every vector with another embedder (keeps documents/questions).

    The old vectors keep serving until the new ones are complete; a failure
    or an interruption changes nothing (run it again to resume).
    """
    from ..embedders import get_embedder

    new = get_embedder(embedder, **({"dim": dim} if dim is not None else {}))
    if dry_run:
        from ..model import fingerprint_id

        with open_store(db_path, read_only=True) as store:
            info, count = store.status(), len(store)
        old = fingerprint_id(info["embedder"]) if info.get("embedder") else "none"
        click.echo(f"dry run, nothing written: would replace the vectors of {count} "
                   f"document(s) and their HyPE questions ({info['vectors']} vectors of "
                   f"{old}) with {fingerprint_id(new.fingerprint())} vectors; documents and "
                   "questions are kept")
        return
    committed = Committed(done="re-embedded", after="the old vectors still serve; run the "
                          "same command again to resume")
    with committed.on_interrupt(), open_store(db_path, hype=False) as store:
        committed.total = len(store)
        with progress_bar(len(store), "re-embedding") as committed.bar:
            done = store.reembed(new, progress=committed)
    click.echo(f"re-embedded {done} document(s) with {embedder}")


DEMO_QUERIES = (
    "how do I recover when a release breaks production?",
    "keeping API clients polite when the server says slow down",  # paraphrase
    "what does my human do for fun on saturdays",                 # paraphrase
    "sourdough starter feeding schedule",
    "sqlite full text search ranking",
    "how does Lena like her answers?",
)


@cli.command()
@click.option("--db", "db_path", default=None, type=click.Path(dir_okay=False),
              help="Where to write the demo database: a NEW file (default: a temporary one).")
@click.option("--embedder", type=click.Choice(EMBEDDER_NAMES), default="minilm",
              show_default=True, help="minilm runs offline from a package.")
@click.argument("queries", nargs=-1)
@friendly_errors
def demo(db_path: str | None, embedder: str, queries: tuple[str, ...]) -> None:
    """Index the bundled sample knowledge base and run a few searches."""
    import tempfile
    import time
    from pathlib import Path

    from ..backends import location_exists
    from ..errors import KBStoreError

    if db_path and location_exists(db_path):
        raise KBStoreError(f"{db_path} exists; the demo only writes a new database (it never "
                           "touches an existing one): choose a new path or omit --db")
    workspace = Path(__file__).resolve().parent.parent / "sample_kb"
    with tempfile.TemporaryDirectory() as tmp:
        path = db_path or str(Path(tmp) / "demo.sqlite")
        started = time.perf_counter()
        with open_store(path, create=True, embedder=embedder) as store:
            report = store.import_directory(workspace)
            took = time.perf_counter() - started
            click.echo(f"indexed the sample knowledge base into {path} in {took:.1f}s: "
                       f"{report.added} added, {report.embedded} embedded")
            for query in queries or DEMO_QUERIES:
                t0 = time.perf_counter()
                hits = store.search(query, limit=3, explain=True)
                ms = (time.perf_counter() - t0) * 1000
                click.echo(f"\n> {query}   ({ms:.0f} ms)")
                for n, hit in enumerate(hits, start=1):
                    ranks = hit.explain["ranks"] if hit.explain else {}
                    why = " ".join(f"{k}#{v}" for k, v in ranks.items() if v is not None)
                    click.echo(f"  {n}. {hit.title}  ({hit.path}, score {hit.score:.4f}; {why})")

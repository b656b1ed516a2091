"""import, search, reembed, demo."""

from __future__ import annotations

import click

from ..embed import EMBEDDER_NAMES
from . import cli, db_option, echo_json, friendly_errors, json_option, progress_bar


def _open(db_path: str, hype: bool | None = False, embedder: str | None = None):  # type: ignore[no-untyped-def]
    from ..store import KnowledgeStore

    return KnowledgeStore.open(db_path, embedder, hype=hype)


def _print_report(report, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    if as_json:
        echo_json(report.to_dict())
        return
    click.echo(f"added {report.added}, updated {report.updated}, unchanged {report.unchanged}, "
               f"deleted {report.deleted}, embedded {report.embedded}, HyPE generated "
               f"{report.hype_generated}, HyPE pending {report.hype_pending}, "
               f"skipped {len(report.skipped)}")
    for skipped in report.skipped:
        click.echo(f"  skipped {skipped.path}: {skipped.reason}", err=True)


@cli.command("import")
@db_option
@click.argument("workspace", type=click.Path(exists=True, file_okay=False))
@click.option("--hype/--no-hype", default=None,
              help="Generate HyPE questions with the LLM (default: env KBSTORE_HYPE, else on).")
@click.option("--embedder", type=click.Choice(EMBEDDER_NAMES), default=None,
              help="Embedder for a new database (default: the stored one, else nomic).")
@json_option
@friendly_errors
def import_(db_path: str, workspace: str, hype: bool | None, embedder: str | None,
            as_json: bool) -> None:
    """Reconcile the store with a picobot WORKSPACE (by content hash)."""
    from ..ingest import scan_workspace

    total = sum(1 for _ in scan_workspace(workspace))
    with _open(db_path, hype, embedder) as store, progress_bar(total, "importing") as bar:
        report = store.import_directory(workspace, progress=bar.update)
    _print_report(report, as_json)


@cli.command()
@db_option
@click.argument("query")
@click.option("--topic", default=None, help="Only this topic (self, user, projects, ...).")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option("--fusion", type=click.Choice(["rrf", "convex"]), default=None,
              help="Fusion of the retrievers (default rrf).")
@click.option("--min-similarity", type=float, default=None,
              help="Drop hits whose best vector similarity is below this (unless a tag/title "
                   "match).")
@click.option("--explain", is_flag=True, help="Show each retriever's rank and every factor.")
@click.option("--shell", is_flag=True,
              help="Print a sqlite3-shell script that runs the same search statement.")
@json_option
@friendly_errors
def search(db_path: str, query: str, topic: str | None, limit: int, fusion: str | None,
           min_similarity: float | None, explain: bool, shell: bool, as_json: bool) -> None:
    """Hybrid search (frontmatter + FTS5 BM25 + vectors, fused)."""
    if shell:
        from ..shell import shell_script

        with _open(db_path) as store:
            click.echo(shell_script(store, query, topic=topic, limit=limit, fusion=fusion,
                                    min_similarity=min_similarity), nl=False)
        return
    with _open(db_path) as store:
        hits = store.search(query, topic=topic, limit=limit, explain=explain, fusion=fusion,
                            min_similarity=min_similarity)
    if as_json:
        for hit in hits:
            echo_json(hit.to_dict())
        return
    if not hits:
        click.echo("no results")
    for n, hit in enumerate(hits, start=1):
        click.echo(f"{n:2}. {hit.score:.4f}  {hit.path}  [{hit.doc_type}] {hit.title}")
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
@friendly_errors
def reembed(db_path: str, embedder: str, dim: int | None) -> None:
    """Rebuild every vector with another embedder (keeps documents/questions)."""
    from .. import db as _db
    from .. import schema
    from ..store import KnowledgeStore

    conn = _db.connect(db_path)
    try:
        schema.ensure_schema(conn)
        stored = schema.get_meta(conn, "embedder")
        count = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
    finally:
        conn.close()
    if stored is None:
        raise click.ClickException(f"{db_path} is not initialised; run `kbstore init`")
    options = {"dim": dim} if dim else {}
    # Open with the stored embedder, then switch.
    with KnowledgeStore.open(db_path, hype=False) as store, \
            progress_bar(count, "re-embedding") as bar:
        done = store.reembed(embedder, progress=bar.update, **options)
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
              help="Where to write the demo database (default: a temporary file).")
@click.option("--embedder", type=click.Choice(EMBEDDER_NAMES), default="minilm",
              show_default=True, help="minilm runs offline from a package.")
@click.argument("queries", nargs=-1)
@friendly_errors
def demo(db_path: str | None, embedder: str, queries: tuple[str, ...]) -> None:
    """Index the bundled sample knowledge base and run a few searches."""
    import tempfile
    import time
    from importlib import resources
    from pathlib import Path

    from ..store import KnowledgeStore

    workspace = Path(str(resources.files("kbstore.sample_kb")))
    with tempfile.TemporaryDirectory() as tmp:
        path = db_path or str(Path(tmp) / "demo.sqlite")
        started = time.perf_counter()
        with KnowledgeStore.open(path, embedder, hype=False) as store:
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

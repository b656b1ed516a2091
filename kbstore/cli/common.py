"""What every command module shares: the click group, option decorators,
opening a store, one-line errors, JSON output, progress bars."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from ..errors import KBStoreError
from ..listing import SHOWN, shown, some_paths  # noqa: F401  (listings)
from ..settings import DB_ENV


def db_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--db", "db_path", envvar=DB_ENV, required=True,
                        help=f"Database file, or a postgresql:// URL (env {DB_ENV}).")(fn)


def open_store(db_path: str, *, read_only: bool = False, create: bool = False,
               embedder: Any = None, hype: bool | None = False,
               hype_model: str | None = None, **options: Any) -> Any:
    """The store for a command. Read commands open read-only (nothing is
    created or modified); only commands that make a knowledge base create one."""
    from ..store import KnowledgeStore

    return KnowledgeStore.open(db_path, embedder, read_only=read_only, create=create,
                               hype=hype, hype_model=hype_model, **options)


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def _database_errors() -> tuple[type[BaseException], ...]:
    """DB-API errors of the backends ('file is not a database', locked ...)."""
    from ..backends.sqlite.connection import database_errors

    errors = list(database_errors())
    psycopg = sys.modules.get("psycopg")  # only if a postgresql:// store was opened
    if psycopg is not None:
        errors.append(psycopg.Error)
    return tuple(errors)


def friendly_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn kbstore's own errors, database errors and bad arguments into
    one-line exits (status 1)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:
            raise
        except Exception as exc:
            # Database error classes are looked up only on failure (psycopg is
            # slow to import and most commands never need it).
            if not isinstance(exc, (KBStoreError, ValueError, OSError, *_database_errors())):
                raise
            from ..redact import redact

            named = _name_the_file(exc, kwargs.get("db_path"))
            text = str(named).splitlines()[0] if str(named).strip() else type(named).__name__
            raise click.ClickException(redact(text)) from exc

    return wrapper


def _name_the_file(exc: BaseException, db_path: Any) -> BaseException:
    """SQLite's 'attempt to write a readonly database' can come from any write;
    say which file and why (a read-only file or folder, an unwritable -shm)."""
    if isinstance(exc, KBStoreError) or not isinstance(db_path, str) or "://" in db_path:
        return exc
    from pathlib import Path

    from ..backends.sqlite.connection import write_refused

    return write_refused(exc, Path(db_path).expanduser())


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, sort_keys=True, default=str))


def progress_bar(total: int, label: str) -> Any:
    """A tqdm bar on stderr (hidden when stderr is not a terminal)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit="doc", file=sys.stderr,
                disable=None, leave=False)


# Command name -> the module that defines it. Only the invoked command's
# module is imported (`kbstore search` loads content.py, not the MCP server's
# or the exchange formats' modules); --help and listings import them all.
COMMAND_MODULES = {
    "init": "admin", "migrate": "admin", "status": "admin", "vec-path": "admin",
    "import": "content", "search": "content", "reembed": "content", "demo": "content",
    "doctor": "doctor",
    "import-npz": "exchange", "export": "exchange", "import-jsonl": "exchange",
    "copy": "exchange",
    "hype": "hype_cmd",
    "mcp": "mcp_cmd", "watch": "mcp_cmd",
}


class LazyGroup(click.Group):
    """A group whose commands register themselves when their module is
    imported, on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMAND_MODULES, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            import importlib

            importlib.import_module(f"{__package__}.{COMMAND_MODULES[cmd_name]}")
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kbstore")
@click.option("-v", "--verbose", is_flag=True, help="Log what kbstore does (to stderr).")
def cli(verbose: bool) -> None:
    """kbstore: an agent's knowledge base in ONE SQLite file.

    Markdown entries, skills and journal notes with an FTS5 index, sqlite-vec
    vectors (documents + HyPE questions) and hybrid search in one SQL statement.
    """
    import logging

    from .. import redact

    # Commands print their own reports; the library's warnings repeat them,
    # so they show only with --verbose. Errors always show (redacted). The
    # logger is put back as it was when the command ends.
    redact.install()
    logger = logging.getLogger("kbstore")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("kbstore: %(message)s"))
    before = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose else logging.ERROR)
    logger.propagate = False
    # ... except "waiting for another kbstore process": a queued writer says so.
    waiting = logging.getLogger("kbstore.wait")
    waiting_before = waiting.level
    waiting.setLevel(logging.WARNING)

    def restore() -> None:
        logger.removeHandler(handler)
        logger.level, logger.propagate = before
        waiting.setLevel(waiting_before)

    click.get_current_context().call_on_close(restore)


def hype_pending_hint(count: int, db_path: str) -> None:
    """Why documents are left without HyPE questions and what to do, once."""
    click.echo(f"  HyPE pending: the LLM gave no questions for {count} document(s) (no API "
               "key set? the model unreachable?); they are stored and searchable without "
               f"them. Retry: kbstore hype --db {db_path} --pending; skip HyPE: --no-hype "
               "or KBSTORE_HYPE=0", err=True)


def announce_deletions(paths: list[str], why: str) -> None:
    """Every command that deletes documents says which, before it does."""
    click.echo(f"deleting {len(paths)} document(s) {why}: {some_paths(paths)}", err=True)


class Committed:
    """Counts documents a write path reports done (its ``progress`` calls come
    after each commit), and turns Ctrl-C into a line saying how far it got
    and exit status 130 instead of click's bare 'Aborted!'."""

    def __init__(self, total: int | None = None, done: str = "committed",
                 after: str = "run the same command again to continue") -> None:
        self.total, self.done, self.after = total, done, after
        self.count = 0
        self.bar: Any = None

    def __call__(self, count: int) -> None:
        self.count += count
        if self.bar is not None:
            self.bar.update(count)

    @contextlib.contextmanager
    def on_interrupt(self) -> Iterator[Committed]:
        restore = _one_clean_stop()
        try:
            yield self
        except KeyboardInterrupt:
            restore = _ignore_ctrl_c()  # stopped: the process only reports and exits
            if self.bar is not None:
                self.bar.close()
            of = f" of {self.total}" if self.total is not None else ""
            click.echo(f"\nstopped: {self.count}{of} documents {self.done}; {self.after}",
                       err=True)
            raise SystemExit(130) from None
        finally:
            restore()


def _one_clean_stop() -> Callable[[], None]:
    """Ctrl-C during a long write: the first one raises KeyboardInterrupt (the
    open batch rolls back, the store closes, the command says how far it got);
    one pressed again while that stop runs is only acknowledged, so it can
    neither cut the clean-up short nor kill the process by the signal (exit
    -2). Returns what puts the previous handler back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    before = signal.getsignal(signal.SIGINT)
    if before in (signal.SIG_IGN, None):  # started with Ctrl-C ignored (nohup, a job)
        return lambda: None

    def again(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # say it once
        os.write(2, b"\nkbstore: already stopping; documents committed so far are kept\n")

    def first(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, again)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, first)

    def restore() -> None:
        signal.signal(signal.SIGINT, before)

    return restore


def _ignore_ctrl_c() -> Callable[[], None]:
    """From the stop's report to the exit, Ctrl-C is ignored: a Python handler
    would be dropped while the interpreter shuts down, and the signal's
    default would then end the process with -2 instead of 130."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return lambda: None


def dry_run_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--dry-run", is_flag=True,
                        help="Only say what would be added, updated and deleted: the store is "
                             "opened read-only (a missing one is not created).")(fn)


def existing_store(db_path: str, embedder: Any = None) -> Any:
    """A dry run's store: read-only, or None where there is none yet."""
    from ..backends import location_exists

    if not location_exists(db_path):
        return contextlib.nullcontext(None)
    return open_store(db_path, read_only=True, embedder=embedder)


def print_plan(plan: Any, as_json: bool, why: str, keep_hint: str = "") -> None:
    """A dry run's report: the counts, then every path it would touch
    (``SHOWN`` of each list; --json lists them all)."""
    if as_json:
        echo_json(plan.to_dict())
        return
    click.echo(plan.summary())
    for label, paths in (("add", plan.add), ("update", plan.update)):
        if paths:
            click.echo(f"  would {label} {len(paths)} document(s): {some_paths(paths)}")
    if plan.reuse_vectors or plan.embed:
        click.echo(f"  would reuse {plan.reuse_vectors} vector(s) from the file and embed "
                   f"{sum(plan.embed.values())} document(s)")
        for reason, count in sorted(plan.embed.items(), key=lambda kv: -kv[1]):
            click.echo(f"    embed {count}: {reason}")
    if plan.delete:
        click.echo(f"  would delete {len(plan.delete)} document(s) {why}: "
                   f"{some_paths(plan.delete)}")
    if plan.keep:
        click.echo(f"  would keep {len(plan.keep)} document(s) {why} ({plan.keep_reason}): "
                   f"{some_paths(plan.keep)}" + (f"; {keep_hint}" if keep_hint else ""))
    for skipped in plan.skipped:
        click.echo(f"  would skip {shown(skipped.path)}: {skipped.reason}")

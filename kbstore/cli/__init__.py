"""The ``kbstore`` command line. Each concern registers its commands from
its own module; errors are one line on stderr and exit 1."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from ..errors import KBStoreError

DB_ENV = "KBSTORE_DB"


def db_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--db", "db_path", envvar=DB_ENV, required=True,
                        type=click.Path(dir_okay=False),
                        help=f"Database file (env {DB_ENV}).")(fn)


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def _database_errors() -> tuple[type[BaseException], ...]:
    """DB-API errors of both bindings ('file is not a database', locked ...)."""
    import sqlite3

    errors: list[type[BaseException]] = [sqlite3.Error]
    try:
        import sqlean  # type: ignore[import-untyped]

        errors.append(sqlean.Error)
    except ImportError:
        pass
    return tuple(errors)


def friendly_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn kbstore's own errors, database errors and bad arguments into
    one-line exits (status 1)."""

    expected: tuple[type[BaseException], ...] = (KBStoreError, ValueError, OSError,
                                                 *_database_errors())

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except expected as exc:
            raise click.ClickException(str(exc).splitlines()[0] if str(exc) else
                                       type(exc).__name__) from exc

    return wrapper


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, sort_keys=True, default=str))


def progress_bar(total: int, label: str) -> Any:
    """A tqdm bar on stderr (hidden when stderr is not a terminal)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit="doc", file=sys.stderr,
                disable=None, leave=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kbstore")
def cli() -> None:
    """kbstore: an agent's knowledge base in ONE SQLite file.

    Markdown entries, skills and journal notes with an FTS5 index, sqlite-vec
    vectors (documents + HyPE questions) and hybrid search in one SQL statement.
    """


def _register() -> None:
    from . import admin, content  # noqa: F401  (commands register on import)
    for optional in ("hype_cmd", "exchange", "doctor", "mcp_cmd"):
        try:
            __import__(f"{__name__}.{optional}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{optional}":
                raise


def main() -> None:
    _register()
    cli(prog_name="kbstore")

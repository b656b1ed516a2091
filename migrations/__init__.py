"""kbstore's schema migrations (installed as ``kbstore.migrations``).

Each step is a readable .sql file in this folder. They run through
sqlite-utils' ``Migrations`` (bookkeeping in ``_sqlite_migrations``); the
runner in :mod:`kbstore.schema` wraps all pending steps in one
``BEGIN IMMEDIATE`` so a step and its bookkeeping row commit together, and
processes racing to create a new file serialize. sqlite-utils is imported
only when something is pending: it costs ~0.7 s of start-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MIGRATION_SET = "kbstore"

# (name, file). Append only: never edit or reorder a released step.
STEPS: list[tuple[str, str]] = [
    ("0001_initial", "0001_initial.sql"),
]
SCHEMA_VERSION = len(STEPS)


def step_sql(filename: str) -> str:
    return (Path(__file__).parent / filename).read_text(encoding="utf-8")


def migration_set() -> Any:
    """The sqlite-utils ``Migrations`` object for kbstore's steps."""
    from sqlite_utils.migrations import Migrations

    migrations = Migrations(MIGRATION_SET)
    for version, (name, filename) in enumerate(STEPS, start=1):

        def run(db: Any, filename: str = filename, version: int = version) -> None:
            db.executescript(step_sql(filename))
            # user_version lets the sqlite3 shell (and a fast open) see the version.
            db.execute(f"PRAGMA user_version = {int(version)}")

        run.__name__ = name
        migrations(name=name)(run)
    return migrations

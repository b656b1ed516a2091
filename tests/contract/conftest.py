"""The ``backend`` fixture: every contract test gets its store locations from
it, so the whole suite runs once per backend.

Contract tests use kbstore's public API only -- ``KnowledgeStore``, the CLI,
``kbstore.picobot.KnowledgeBase``, ``kbstore.doctor``, ``kbstore.exchange``,
``kbstore.hype_jobs`` -- never SQL and never ``store.backend``. They never
assume a location is a file: a new store's location is ``backend()``.

Adding a backend = one more entry in ``BACKENDS`` whose locations object has:

- ``kind``: the backend's name (``status()['backend']``);
- ``__call__(name='kb')``: the location of a NEW store, nothing there yet
  (a file path for SQLite; a ``postgresql://`` URL to a fresh schema);
- ``missing()``: a location where no store exists, which read commands must
  refuse with "no database" and must not create;
- ``exists(location)``: whether a store (or anything) exists there now.

The exchange tests (test_exchange_*.py) share ``source``, the sample
knowledge base with HyPE questions, and ``run``, the CLI.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from kbstore import FakeEmbedder, KnowledgeStore


class Locations(Protocol):
    kind: str

    def __call__(self, name: str = "kb") -> str: ...

    def missing(self) -> str: ...

    def exists(self, location: str) -> bool: ...


class SQLiteLocations:
    """SQLite stores are files in one temporary folder."""

    kind = "sqlite"

    def __init__(self, root: Path) -> None:
        self.root = root
        self._numbers = itertools.count()

    def __call__(self, name: str = "kb") -> str:
        return str(self.root / f"{name}-{next(self._numbers)}.sqlite")

    def missing(self) -> str:
        return str(self.root / f"missing-{next(self._numbers)}.sqlite")

    def exists(self, location: str) -> bool:
        return Path(location).exists()


class PostgresLocations:
    """PostgreSQL stores are knowledge bases (schemas) in one database of the
    session's server: ``<database URL>&kb=<unique name>``."""

    kind = "postgres"

    def __init__(self, url: str) -> None:
        self.url = url
        self._numbers = itertools.count()

    def __call__(self, name: str = "kb") -> str:
        clean = re.sub(r"[^a-z0-9_]", "_", name.lower()).strip("_")[:16] or "kb"
        kb = f"{clean if clean[0].isalpha() else 'kb_' + clean}_{next(self._numbers)}"
        return f"{self.url}{'&' if '?' in self.url else '?'}kb={kb}"

    def missing(self) -> str:
        return self(f"missing_{uuid.uuid4().hex[:8]}")

    def exists(self, location: str) -> bool:
        import psycopg

        from kbstore.backends.postgres.connection import parse

        target = parse(location)
        with psycopg.connect(target.conninfo, autocommit=True) as conn:
            return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE "
                                     "nspname = %s)", (target.schema,)).fetchone()[0])


BACKENDS: dict[str, type] = {"sqlite": SQLiteLocations, "postgres": PostgresLocations}


@pytest.fixture(scope="session", params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Locations]:
    if request.param == "postgres":
        # One database on the session's server; every store is a new schema in it.
        yield PostgresLocations(request.getfixturevalue("pg_url"))
        return
    yield BACKENDS[request.param](tmp_path_factory.mktemp(f"stores-{request.param}"))


@pytest.fixture
def location(backend: Locations) -> str:
    """A new store's location (what a test used to call ``db_path``)."""
    return backend()


@pytest.fixture
def store(location: str, embedder: FakeEmbedder) -> Iterator[KnowledgeStore]:
    with KnowledgeStore.open(location, embedder, hype=False) as s:
        yield s


# -- the exchange tests (test_exchange_*.py) ------------------------------------------------


def titled_questions(prompt: str) -> str:
    title = re.search(r"^Title: (.*)$", prompt, re.MULTILINE).group(1)
    return f"How do I apply {title}?\nWhat is {title} about?\nWhen should I read {title}?"


@pytest.fixture
def source(backend, sample_workspace, fake_llm):  # type: ignore[no-untyped-def]
    """The sample knowledge base with HyPE questions, in a store."""
    fake_llm.answer = titled_questions
    with KnowledgeStore.open(backend("source"), FakeEmbedder(64), hype=True) as store:
        report = store.import_directory(sample_workspace)
        assert report.hype_generated == report.added == len(store)
        yield store


@pytest.fixture
def run(run_cli):  # type: ignore[no-untyped-def]
    return run_cli

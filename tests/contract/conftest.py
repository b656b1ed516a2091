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
"""

from __future__ import annotations

import itertools
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


BACKENDS: dict[str, type] = {"sqlite": SQLiteLocations}


@pytest.fixture(scope="session", params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Locations]:
    yield BACKENDS[request.param](tmp_path_factory.mktemp(f"stores-{request.param}"))


@pytest.fixture
def location(backend: Locations) -> str:
    """A new store's location (what a test used to call ``db_path``)."""
    return backend()


@pytest.fixture
def store(location: str, embedder: FakeEmbedder) -> Iterator[KnowledgeStore]:
    with KnowledgeStore.open(location, embedder, hype=False) as s:
        yield s

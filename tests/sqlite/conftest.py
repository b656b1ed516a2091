"""Fixtures for the SQLite backend's own tests: stores are files, and the
tests may read and damage them with raw SQL."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore

from .util import LEGACY_V1


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "kb.sqlite"


@pytest.fixture
def store(db_path: Path, embedder: FakeEmbedder) -> Iterator[KnowledgeStore]:
    with KnowledgeStore.open(db_path, embedder, hype=False) as s:
        yield s


@pytest.fixture
def legacy_v1(tmp_path: Path) -> Path:
    """A copy of the committed schema-v1 file made by kbstore 0.1 (the
    committed file itself is never opened)."""
    # A failure here means a schema change broke files made by released code.
    # Add a migration step (migrations/sqlite/NNNN_*.sql) instead of editing an
    # old one; only before the first release may the fixture be regenerated
    # (tests/fixtures/make_legacy_db.py).
    assert LEGACY_V1.exists(), "regenerate with tests/fixtures/make_legacy_db.py"
    copy = tmp_path / "kb-v1.sqlite"
    shutil.copyfile(LEGACY_V1, copy)
    return copy

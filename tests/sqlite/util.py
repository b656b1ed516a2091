"""Helpers for the SQLite backend's own tests: raw connections, the legacy
fixture, the file's bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbstore import KnowledgeStore
from kbstore.backends.sqlite.connection import connect

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEGACY_V1 = FIXTURES / "kb-v1.sqlite"
SLOTS = 32  # vector_id = doc_id * SLOTS + slot (kbstore/backends/sqlite/vectors.py)


def raw(store: KnowledgeStore) -> Any:
    """The store's own SQLite connection (only the SQLite tests look inside)."""
    return store.backend.conn


def connect_file(path: str | Path, mode: str = "write") -> Any:
    """A connection from the one connection factory, sqlite-vec loaded."""
    return connect(path, mode=mode)


def doc_id(store: KnowledgeStore, path: str) -> int:
    return int(raw(store).execute("SELECT id FROM documents WHERE path = ?",
                                  (path,)).fetchone()[0])


def file_state(path: str | Path) -> dict[str, bytes | None]:
    """The database file and its companions, byte for byte (None: absent)."""
    return {suffix: (Path(f"{path}{suffix}").read_bytes()
                     if Path(f"{path}{suffix}").exists() else None)
            for suffix in ("", "-wal", "-shm", "-journal")}

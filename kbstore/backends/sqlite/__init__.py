"""The SQLite backend: one knowledge base in one file (FTS5 + sqlite-vec)."""

from .backend import SQLiteBackend
from .connection import vec_path

__all__ = ["SQLiteBackend", "vec_path"]

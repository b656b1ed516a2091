"""Small files kbstore keeps under the user's cache directory, never in a
knowledge-base file: the MiniLM model with its embedding tables gathered
before dequantization (see embed_onnx_graph.py) and a table of query vectors
for query texts embedded before.

A read command (``kbstore search``) may write here, never into the database.
Everything here can be deleted at any time; it is rebuilt on demand. Failing
to read or write the cache only costs speed, never a result.

``KBSTORE_CACHE_DIR`` moves the directory; ``KBSTORE_QUERY_CACHE=0`` turns
the query-vector table off.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from pathlib import Path

from .settings import CACHE_DIR_ENV, QUERY_CACHE_ENV, Settings  # noqa: F401  (names documented)

QUERY_CACHE_FILE = "query-vectors.sqlite"
MAX_QUERY_VECTORS = 20_000  # ~1.5 KB each at 384-d: ~30 MB at most
PRUNE_TO = 15_000


def cache_dir() -> Path:
    """Where derived model files and the query-vector cache live (Settings)."""
    return Path(Settings.from_env().cache_dir)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the whole file or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def query_cache_enabled() -> bool:
    return Settings.from_env().query_cache


class QueryVectorCache:
    """float32 query vectors by (model key, query text).

    The key is a sha256 of the model key and the text, so query texts are not
    stored in clear. The table is pruned oldest-first when it grows past
    MAX_QUERY_VECTORS; a hit costs one indexed read and writes nothing.
    """

    def __init__(self, model_key: str, directory: Path | None = None) -> None:
        self.model_key = model_key
        self.path = (directory or cache_dir()) / QUERY_CACHE_FILE
        self._conn: sqlite3.Connection | None = None
        self._broken = False
        self._lock = threading.Lock()  # one connection, shared by the store's threads

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_key}\x1f{text}".encode()).hexdigest()

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._conn is not None or self._broken:
            return self._conn
        if not create and not self.path.exists():
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._open()
        except sqlite3.OperationalError:  # locked, unreadable, read-only ...
            self._broken = True
            return None
        except sqlite3.DatabaseError:
            # Not a database or damaged (it is never fsynced, below): start afresh once.
            try:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                conn = self._open()
            except (sqlite3.Error, OSError):
                self._broken = True
                return None
        except (sqlite3.Error, OSError):
            self._broken = True  # an unwritable cache: run without it
            return None
        self._conn = conn
        return conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=0.5, isolation_level=None,
                               check_same_thread=False)
        try:
            # No fsync, ever: a commit or the checkpoint at close cost 12-36 ms
            # of fsync per new query here. A power cut can damage the file;
            # it is then rebuilt (above), which only costs speed.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("CREATE TABLE IF NOT EXISTS query_vectors ("
                         "key TEXT PRIMARY KEY, vector BLOB NOT NULL, added REAL NOT NULL)")
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def get(self, text: str) -> bytes | None:
        with self._lock:
            conn = self._connect(create=False)
            if conn is None:
                return None
            try:
                row = conn.execute("SELECT vector FROM query_vectors WHERE key = ?",
                                   (self._key(text),)).fetchone()
            except sqlite3.Error:
                return None
            return bytes(row[0]) if row else None

    def put(self, text: str, vector: bytes) -> None:
        with self._lock:
            self._put(text, vector)

    def _put(self, text: str, vector: bytes) -> None:
        conn = self._connect(create=True)
        if conn is None:
            return
        try:
            conn.execute("INSERT OR REPLACE INTO query_vectors (key, vector, added) "
                         "VALUES (?, ?, ?)", (self._key(text), vector, time.time()))
            (count,) = conn.execute("SELECT count(*) FROM query_vectors").fetchone()
            if count > MAX_QUERY_VECTORS:
                conn.execute("DELETE FROM query_vectors WHERE key IN (SELECT key FROM "
                             "query_vectors ORDER BY added LIMIT ?)", (count - PRUNE_TO,))
        except sqlite3.Error:
            pass  # locked by another process or read-only: skip caching this one

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

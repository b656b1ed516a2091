"""SQLiteBackend: a knowledge base in one SQLite file. Owns every SQL
statement and storage detail of the file; the rest of kbstore talks to it
through the methods of :class:`kbstore.backends.base.Backend`. Opening,
meta, reads, search and doctor are here; the write path is in write.py and
the reembed staging in rebuild.py (mixins of this class)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import (
    NotAKnowledgeBaseError,
    ReadOnlyError,
    SchemaOutdatedError,
)
from ...model import (
    CHUNK_VECTORS,
    DOC_VECTOR,
    HYPE_QUESTIONS,
    HYPE_VECTORS,
    OK,
    PENDING,
    Check,
    Derived,
    Document,
    Hit,
    SearchRequest,
    Stored,
)
from ...settings import Settings
from . import migrations as _migrations
from . import search as _search
from . import vectors as _vectors
from .bits_scan import BitsScan, has_indexes
from .connection import (
    Connection,
    close_failed_open,
    connect,
    database_errors,
    enable_writes,
    snapshot,
    transaction,
    write_refused,
)
from .rebuild import RebuildStaging
from .write import WritePath

if TYPE_CHECKING:
    from ..base import Stamp

_DOC_COLUMNS = "id, path, title, body, tags, topic, doc_type, created, updated, extra"


def _doc(row: Sequence[Any]) -> Document:
    return Document(path=row[1], title=row[2], body=row[3], tags=json.loads(row[4]),
                    topic=row[5], doc_type=row[6], created=row[7], updated=row[8],
                    extra=json.loads(row[9]) if row[9] else {})


class SQLiteBackend(WritePath, RebuildStaging):
    """See :class:`kbstore.backends.base.Backend` for the contract."""

    kind = "sqlite"
    max_questions = _vectors.MAX_QUESTIONS

    def __init__(self, conn: Connection, path: Path, read_only: bool) -> None:
        self.conn = conn
        self.path = path
        self.location = str(path)
        self.read_only = read_only
        self._has_bits: bool | None = None
        self.bits_scan = BitsScan()  # search's in-memory sign bits

    @classmethod
    def open(cls, location: str | os.PathLike[str], *, mode: str = "create",
             settings: Settings | None = None, stamp: Stamp | None = None) -> SQLiteBackend:
        path = Path(location).expanduser()

        def stamp_new(new: Connection) -> None:  # in the transaction that makes the schema
            if stamp is not None:
                cls(new, path, read_only=False).initialize(*stamp())

        made_here = mode == "create" and not os.path.lexists(path)
        conn = connect(path, mode=mode, settings=settings)
        try:
            _migrations.check_ours(conn, str(path))
            current = _migrations.state(conn)
            _migrations.refuse_if_newer(conn, current)
            if mode == "write" and not current.applied:
                # A zero-byte or empty SQLite file is what a missing file is to a
                # command that never creates one (a truncated store, a `touch`).
                raise NotAKnowledgeBaseError(f"{path} is empty, not a kbstore database yet; "
                                             "create it with `kbstore init`")
            if mode != "read":
                try:
                    enable_writes(conn, settings)
                except database_errors() as exc:
                    raise write_refused(exc, path) from exc
                if _migrations.migrate(conn, str(path), on_create=stamp_new):
                    # The connection that ran the migration runner re-prepares
                    # the search statement at every execution inside a
                    # transaction (~22,000 authorizer calls, 50-100 ms per
                    # search on a new file); a new connection prepares it once.
                    conn.close()
                    conn = connect(path, mode="write", settings=settings)
                    enable_writes(conn, settings)
            elif not current.applied:
                raise NotAKnowledgeBaseError(f"{path} is empty, not a kbstore database yet; "
                                             "create it with `kbstore init`")
            elif current.pending and current.version < _migrations.READABLE_FROM:
                raise SchemaOutdatedError(
                    f"{path} has schema version {current.version}; this kbstore needs "
                    f"{_migrations.SCHEMA_VERSION}. Read commands never modify a file: run "
                    f"`kbstore migrate --db {path}` first")
        except BaseException:
            close_failed_open(conn, path, made_here)
            raise
        return cls(conn, path, read_only=mode == "read")

    @classmethod
    def schema_of(cls, location: str | os.PathLike[str],
                  settings: Settings | None = None) -> _migrations.SchemaState:
        """Migration state without migrating (``kbstore migrate --list``)."""
        path = Path(location).expanduser()
        conn = connect(path, mode="read", settings=settings, load_extension=False)
        try:
            _migrations.check_ours(conn, str(path))
            return _migrations.state(conn)
        finally:
            conn.close()

    def close(self) -> None:
        self.conn.close()  # the last connection to close checkpoints and removes the WAL

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError(f"{self.location} was opened read-only")

    def checkpoint(self) -> None:
        """Fold the WAL back into the file and truncate it (after bulk writes;
        a reader still holding an old snapshot just makes this partial)."""
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except Exception as exc:  # busy: the next checkpoint catches up
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise

    def schema_state(self) -> _migrations.SchemaState:
        return _migrations.state(self.conn)

    # -- meta ------------------------------------------------------------------------

    def get_meta(self, key: str) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        self._writable()
        with transaction(self.conn):
            self._set_meta(key, value)

    def _set_meta(self, key: str, value: Any) -> None:
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value, sort_keys=True)))

    def fingerprint(self) -> dict[str, Any] | None:
        value = self.get_meta("embedder")
        return value if isinstance(value, dict) else None

    def vector_dim(self) -> int | None:
        return _vectors.table_dim(self.conn) if _vectors.table_exists(self.conn) else None

    def initialize(self, fingerprint: dict[str, Any], defaults: dict[str, Any], *,
                   replace_if_empty: bool = False) -> dict[str, Any]:
        """Stamp the embedder and create the vector table if the file has no
        fingerprint yet -- or, with ``replace_if_empty``, if it holds no
        documents (an empty file accepts the first embedder that works).
        Returns the fingerprint now stored."""
        self._writable()
        dim = _vectors.check_dim(fingerprint.get("dim"))
        with transaction(self.conn):
            stored = self.fingerprint()
            empty = self._count() == 0
            if stored is None and not empty:
                return {}  # documents without a fingerprint: damage, for doctor
            if stored is not None and not (replace_if_empty and empty and stored != fingerprint):
                return stored
            self._set_meta("embedder", fingerprint)
            fusion = self.get_meta("fusion")
            if not isinstance(fusion, dict):
                self._set_meta("fusion", defaults)
            elif stored is not None and "min_similarity" in defaults:
                # another embedder on an empty file: its own confidence floor
                self._set_meta("fusion", {**fusion, "min_similarity": defaults["min_similarity"]})
            _vectors.create_table(self.conn, dim)
            self._forget_vectors()
            _vectors.stage_drop(self.conn)
        return fingerprint

    def _forget_vectors(self) -> None:
        """Every vector and chunk row gone, with the hash rows that claim them."""
        self.conn.execute("DELETE FROM vector_data")
        self.conn.execute("DELETE FROM document_chunks")
        self.conn.execute("DELETE FROM derived WHERE kind IN (?, ?, ?)",
                          (DOC_VECTOR, HYPE_VECTORS, CHUNK_VECTORS))

    # -- reading ---------------------------------------------------------------------

    def get(self, path: str) -> Document | None:
        row = self.conn.execute(f"SELECT {_DOC_COLUMNS} FROM documents WHERE path = ?",
                                (path,)).fetchone()
        return None if row is None else _doc(row)

    def documents(self, *, topic: str | None = None, limit: int | None = None,
             recent: bool = False) -> list[Document]:
        order = "coalesce(updated, created, '') DESC, path DESC" if recent else "path"
        rows = self.conn.execute(
            f"SELECT {_DOC_COLUMNS} FROM documents WHERE ? IS NULL OR topic = ? "
            f"ORDER BY {order} LIMIT ?", (topic, topic, -1 if limit is None else limit))
        return [_doc(r) for r in rows]

    def paths(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT path FROM documents ORDER BY path")]

    def count(self) -> int:
        return self._count()

    def _count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM documents").fetchone()[0])

    def stored(self, paths: Sequence[str]) -> dict[str, Stored]:
        """What the file holds for ``paths`` (three queries per batch)."""
        rows = self.conn.execute(
            "SELECT id, path, content_hash, topic, doc_type FROM documents "
            "WHERE path IN (SELECT value FROM json_each(?))", (json.dumps(list(paths)),)
        ).fetchall()
        derived: dict[int, dict[str, Derived]] = {}
        for doc_id, kind, chash, model, status in self.conn.execute(
                "SELECT doc_id, kind, content_hash, model, status FROM derived "
                "WHERE doc_id IN (SELECT value FROM json_each(?))",
                (json.dumps([r[0] for r in rows]),)):
            derived.setdefault(doc_id, {})[kind] = Derived(chash, model, status)
        return {path: Stored(int(doc_id), chash, topic, dtype, derived.get(doc_id, {}))
                for doc_id, path, chash, topic, dtype in rows}

    def questions(self, path: str) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT q.question FROM hype_questions q JOIN documents d ON d.id = q.doc_id "
            "WHERE d.path = ? ORDER BY q.position", (path,))]

    def iter_documents(self, batch_size: int) -> Iterator[list[tuple[Document, Stored]]]:
        """Every document with its stored state, in id order, one read
        snapshot per batch (writers may commit between batches)."""
        last = 0
        while True:
            with snapshot(self.conn):
                rows = self.conn.execute(
                    f"SELECT {_DOC_COLUMNS} FROM documents WHERE id > ? ORDER BY id LIMIT ?",
                    (last, batch_size)).fetchall()
                if not rows:
                    return
                docs = [_doc(r) for r in rows]
                state = self.stored([d.path for d in docs])
            last = int(rows[-1][0])
            yield [(d, state[d.path]) for d in docs if d.path in state]

    def vectors_of(self, path: str) -> tuple[bytes | None, list[bytes | None]]:
        """(document vector, question vectors in position order) as float32 bytes."""
        row = self.conn.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()
        if row is None:
            return None, []
        doc_id = int(row[0])
        positions = [int(r[0]) for r in self.conn.execute(
            "SELECT position FROM hype_questions WHERE doc_id = ? ORDER BY position", (doc_id,))]
        return (_vectors.float_vector(self.conn, doc_id, 0),
                [_vectors.float_vector(self.conn, doc_id, p) for p in positions])

    def chunk_vectors_of(self, path: str) -> list[bytes | None]:
        """The document's chunk vectors in position order as float32 bytes
        (None for a chunk without its vector)."""
        return [None if r[0] is None else bytes(r[0]) for r in self.conn.execute(
            "SELECT v.embedding FROM documents AS d JOIN document_chunks AS c ON c.doc_id = d.id "
            "LEFT JOIN vector_data AS v ON v.vector_id = c.vector_id "
            "WHERE d.path = ? ORDER BY c.position", (path,))]

    def status(self) -> dict[str, Any]:
        conn = self.conn
        current = _migrations.state(conn)

        def count(sql: str, *args: Any) -> int:
            return int(conn.execute(sql, args).fetchone()[0])

        has_vec = _vectors.table_exists(conn)
        return {
            "backend": self.kind,
            "path": self.location,
            "read_only": self.read_only,
            "schema_version": current.version,
            "pending_migrations": current.pending,
            "documents": self._count(),
            "vectors": count(f"SELECT count(*) FROM {_vectors.TABLE}") if has_vec else 0,
            "doc_vectors": count("SELECT count(*) FROM derived WHERE kind = ?", DOC_VECTOR),
            "chunk_vectors": count("SELECT count(*) FROM document_chunks"),
            "hype_questions": count("SELECT count(*) FROM hype_questions"),
            # One definition with `kbstore hype --pending`: documents without
            # questions that are current ('ok' rows always match the content).
            "hype_pending": count(
                "SELECT count(*) FROM documents d WHERE NOT EXISTS (SELECT 1 FROM derived h "
                "WHERE h.doc_id = d.id AND h.kind = ? AND h.status = ?)", HYPE_QUESTIONS, OK),
            "hype_failed": count("SELECT count(*) FROM derived WHERE kind = ? AND status = ?",
                                 HYPE_QUESTIONS, PENDING),
            "rebuild_in_progress": _vectors.stage_exists(conn),
            "embedder": self.fingerprint(),
            "file_bytes": sum(os.path.getsize(p) for p in
                              (self.location, f"{self.location}-wal") if os.path.exists(p)),
        }

    # -- search ----------------------------------------------------------------------

    def search(self, request: SearchRequest) -> list[Hit]:
        return _search.run(self.conn, request, self._dim_for_search(), self._bits_index(),
                           self.bits_scan)

    def prepare_search(self, request: SearchRequest) -> None:
        _search.prepare(self.conn, request, self._dim_for_search(), self._bits_index())

    def shell_script(self, request: SearchRequest, vector: list[float] | None) -> str:
        return _search.shell_script(request, self._dim_for_search(), vector, self.location,
                                    self._bits_index())

    def _bits_index(self) -> bool:
        if self._has_bits is None:  # read once per connection
            self._has_bits = has_indexes(self.conn)
        return self._has_bits

    def _dim_for_search(self) -> int:
        fp = self.fingerprint() or {}
        return int(fp.get("dim") or self.vector_dim() or 8)

    # -- doctor ------------------------------------------------------------------------

    def diagnose(self, fingerprint_id: str | None) -> list[Check]:
        from . import doctor as _doctor  # only `kbstore doctor` needs it

        return _doctor.diagnose(self.conn, fingerprint_id, writable=not self.read_only)

    def repair(self, problems: set[str], defaults: dict[str, Any]) -> list[str]:
        self._writable()
        from . import doctor as _doctor

        return _doctor.repair(self.conn, problems, defaults)


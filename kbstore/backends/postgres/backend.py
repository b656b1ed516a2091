"""PostgresBackend: a knowledge base in one schema of a PostgreSQL database,
shared by any number of processes on any number of machines. Same contract
and semantics as the SQLite backend (:class:`kbstore.backends.base.Backend`);
the locking rules are in connection.py, the schema in migrations/postgres/,
the design in DESIGN.md."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

# Imported here, not lazily: without the optional extra, opening a URL fails
# at once with the factory's message naming it (kbstore.backends).
import pgvector.psycopg  # noqa: F401
import psycopg  # noqa: F401

from ...errors import (
    DatabaseNotFoundError,
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
    Applied,
    Change,
    Check,
    Chunks,
    Document,
    Hit,
    SearchRequest,
    Stored,
)
from ...settings import Settings
from . import doctor as _doctor
from . import migrate as _migrate
from . import query as _query
from . import read as _read
from . import rebuild as _rebuild
from . import write as _write
from .connection import (
    Target,
    connect,
    parse,
    schema_exists,
    snapshot,
    use_knowledge_base,
    write_transaction,
)

if TYPE_CHECKING:
    from ..base import Stamp

MAX_QUESTIONS = 31  # hype_questions.position 1..31, as in SQLite


def _known_tables(conn: Any, schema: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'p') ORDER BY 1 LIMIT 5",
        (schema,)).fetchall()]


class PostgresBackend:
    """See :class:`kbstore.backends.base.Backend` for the contract."""

    kind = "postgres"
    max_questions = MAX_QUESTIONS

    def __init__(self, conn: Any, target: Target, read_only: bool) -> None:
        self.conn = conn
        self.target = target
        self.schema = target.schema
        self.location = target.location
        self.read_only = read_only

    @classmethod
    def open(cls, location: str, *, mode: str = "create", settings: Settings | None = None,
             stamp: Stamp | None = None) -> PostgresBackend:
        target = parse(location)
        conn = connect(target, read_only=mode == "read", settings=settings)

        def stamp_new(new: Any) -> None:  # in the transaction that makes the schema
            if stamp is not None:
                cls(new, target, read_only=False).initialize(*stamp())

        try:
            cls._prepare(conn, target, mode, stamp_new)
            use_knowledge_base(conn, target.schema)
        except BaseException:
            conn.close()
            raise
        return cls(conn, target, read_only=mode == "read")

    @staticmethod
    def _prepare(conn: Any, target: Target, mode: str, on_create: Any) -> None:
        """Refuse what is not ours or too new; migrate unless read-only."""
        where = f"{target.location} (knowledge base {target.kb!r}, schema {target.schema})"
        exists = schema_exists(conn, target.schema)
        if not exists and mode != "create":
            raise DatabaseNotFoundError(f"no database at {where}; create it with "
                                        "`kbstore init` (or `kbstore import`)")
        current = _migrate.state(conn, target.schema)
        if exists and not current.applied and _known_tables(conn, target.schema):
            raise NotAKnowledgeBaseError(
                f"schema {target.schema} in {target.location} holds tables kbstore did not "
                f"create ({', '.join(_known_tables(conn, target.schema))}); refusing to touch "
                "it. Choose another knowledge base with ?kb=<name>.")
        _migrate.refuse_if_newer(target.schema, current)
        if mode != "create" and not current.applied:  # an empty schema: none yet
            raise NotAKnowledgeBaseError(f"{where} is empty, not a kbstore knowledge base yet; "
                                         "create it with `kbstore init`")
        if mode != "read":
            _migrate.ensure_schema(conn, target.schema, on_create=on_create)
        elif current.pending:
            raise SchemaOutdatedError(
                f"{where} has schema version {current.version}; this kbstore needs "
                f"{_migrate.SCHEMA_VERSION}. Read commands never modify a knowledge base: run "
                f"`kbstore migrate --db {target.location}` first")

    @classmethod
    def schema_of(cls, location: str, settings: Settings | None = None) -> _migrate.SchemaState:
        target = parse(location)
        conn = connect(target, read_only=True, settings=settings)
        try:
            if not schema_exists(conn, target.schema):
                raise DatabaseNotFoundError(f"no database at {target.location} (knowledge base "
                                            f"{target.kb!r} does not exist)")
            return _migrate.state(conn, target.schema)
        finally:
            conn.close()

    def close(self) -> None:
        self.conn.close()  # psycopg: closing twice is harmless

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError(f"{self.location} was opened read-only")

    def checkpoint(self) -> None:
        """Nothing to fold back: the server checkpoints on its own."""

    def schema_state(self) -> _migrate.SchemaState:
        return _migrate.state(self.conn, self.schema)

    # -- meta ------------------------------------------------------------------------

    def get_meta(self, key: str) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: Any) -> None:
        self._writable()
        with write_transaction(self.conn, self.schema, exclusive=True):
            self._set_meta(key, value)

    def _set_meta(self, key: str, value: Any) -> None:
        from psycopg.types.json import Jsonb

        self.conn.execute("INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) "
                          "DO UPDATE SET value = excluded.value", (key, Jsonb(value)))

    def fingerprint(self) -> dict[str, Any] | None:
        value = self.get_meta("embedder")
        return value if isinstance(value, dict) else None

    def vector_dim(self) -> int | None:
        return _read.vector_dim(self.conn)

    def initialize(self, fingerprint: dict[str, Any], defaults: dict[str, Any], *,
                   replace_if_empty: bool = False) -> dict[str, Any]:
        """As SQLiteBackend.initialize. The common case (already stamped with
        this embedder) reads and returns without taking any lock."""
        self._writable()
        dim = _rebuild.check_dim(fingerprint.get("dim"))

        def decided() -> dict[str, Any] | None:
            stored, empty = self.fingerprint(), self.count() == 0
            if stored is None and not empty:
                return {}  # documents without a fingerprint: damage, for doctor
            if stored is not None and not (replace_if_empty and empty and stored != fingerprint):
                return stored
            return None

        answer = decided()
        if answer is not None:
            return answer
        with write_transaction(self.conn, self.schema, exclusive=True):
            answer = decided()  # again, under the lock
            if answer is not None:
                return answer
            stored = self.fingerprint()
            self._set_meta("embedder", fingerprint)
            fusion = self.get_meta("fusion")
            if not isinstance(fusion, dict):
                self._set_meta("fusion", defaults)
            elif stored is not None and "min_similarity" in defaults:
                # another embedder on an empty knowledge base: its own confidence floor
                self._set_meta("fusion", {**fusion, "min_similarity": defaults["min_similarity"]})
            self._reshape(dim)
            self.conn.execute(f"DROP TABLE IF EXISTS {_write.STAGING}")
        return fingerprint

    def _reshape(self, dim: int) -> None:
        self.conn.execute("SELECT set_vector_dimension(%s)", (dim,))
        # set_vector_dimension also empties document_chunks
        self.conn.execute("DELETE FROM derived WHERE kind IN (%s, %s, %s)",
                          (DOC_VECTOR, HYPE_VECTORS, CHUNK_VECTORS))

    # -- reading ---------------------------------------------------------------------

    def get(self, path: str) -> Document | None:
        return _read.get(self.conn, path)

    def documents(self, *, topic: str | None = None, limit: int | None = None,
             recent: bool = False) -> list[Document]:
        return _read.list_documents(self.conn, topic, limit, recent)

    def paths(self) -> list[str]:
        return _read.paths(self.conn)

    def count(self) -> int:
        return _read.count(self.conn)

    def stored(self, paths: Sequence[str]) -> dict[str, Stored]:
        return _read.stored_state(self.conn, paths)

    def questions(self, path: str) -> list[str]:
        return _read.questions(self.conn, path)

    def iter_documents(self, batch_size: int) -> Iterator[list[tuple[Document, Stored]]]:
        """Every document with its stored state in key order, one statement
        (one snapshot) per batch; writers may commit between batches."""
        last = 0
        while True:
            batch = _read.document_batch(self.conn, last, batch_size)
            if not batch:
                return
            last = batch[-1][1].key
            yield batch

    def vectors_of(self, path: str) -> tuple[bytes | None, list[bytes | None]]:
        return _read.vectors_of(self.conn, path)

    def chunk_vectors_of(self, path: str) -> list[bytes | None]:
        return _read.chunk_vectors_of(self.conn, path)

    def status(self) -> dict[str, Any]:
        with snapshot(self.conn) as conn:
            current = _migrate.state(conn, self.schema)
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM vectors), "
                "(SELECT count(*) FROM derived WHERE kind = %(dv)s), "
                "(SELECT count(*) FROM hype_questions), "
                "(SELECT count(*) FROM documents AS d WHERE NOT EXISTS (SELECT 1 FROM derived "
                "  AS h WHERE h.doc_id = d.id AND h.kind = %(hq)s AND h.status = %(ok)s)), "
                "(SELECT count(*) FROM derived WHERE kind = %(hq)s AND status = %(pending)s), "
                "(SELECT count(*) FROM document_chunks)",
                {"dv": DOC_VECTOR, "hq": HYPE_QUESTIONS, "ok": OK, "pending": PENDING}
            ).fetchone()
            rebuilding = _write.staging_exists(conn, self.schema)
            fingerprint = self.fingerprint()
            size = _read.schema_bytes(conn, self.schema)
        return {
            "backend": self.kind,
            "path": self.location,
            "knowledge_base": self.target.kb,
            "read_only": self.read_only,
            "schema_version": current.version,
            "pending_migrations": current.pending,
            "documents": int(counts[0]),
            "vectors": int(counts[1]),
            "doc_vectors": int(counts[2]),
            "chunk_vectors": int(counts[6]),
            "hype_questions": int(counts[3]),
            "hype_pending": int(counts[4]),
            "hype_failed": int(counts[5]),
            "rebuild_in_progress": rebuilding,
            "embedder": fingerprint,
            "file_bytes": size,  # the schema's tables and indexes on the server
        }

    # -- the one write path ------------------------------------------------------------

    def apply(self, changes: Sequence[Change], fingerprint_id: str | None = None) -> Applied:
        """Apply planned changes in ONE transaction (see write.py): a change
        whose ``expected`` state is no longer what the database holds comes
        back in ``stale``; vectors are refused (EmbedderChangedError) when the
        stored embedder is no longer ``fingerprint_id``."""
        self._writable()
        return _write.apply(self.conn, self.schema, changes, fingerprint_id,
                            self.max_questions, self.location)

    def write_lock(self) -> Any:
        """Hold the exclusive knowledge base lock across planning and applying:
        every other writer waits (readers do not)."""
        self._writable()
        return write_transaction(self.conn, self.schema, exclusive=True)

    # -- search ----------------------------------------------------------------------

    def search(self, request: SearchRequest) -> list[Hit]:
        return _query.run(self.conn, request)

    def prepare_search(self, request: SearchRequest) -> None:
        """Nothing to do: the server plans the statement."""

    def shell_script(self, request: SearchRequest, vector: list[float] | None) -> str:
        params = _query.compile_params(request)
        if vector is not None:
            params["qvec"] = _query.vector_text(vector)
        return (f"-- kbstore search for {request.text!r} in {self.location}\n"
                f"-- run with:  psql '<the database URL>' -f this-file\n"
                + _query.psql_script(params, self.schema))

    # -- rebuilding every vector (reembed) -----------------------------------------------

    def rebuild_begin(self, fingerprint_id: str) -> dict[int, dict[int, str]]:
        self._writable()
        return _rebuild.begin(self.conn, self.schema, fingerprint_id)

    def rebuild_stage(self, items: Sequence[tuple[Stored, str, Any, list[Any], Chunks | None]],
                      fingerprint_id: str) -> int:
        self._writable()
        return _rebuild.stage(self.conn, self.schema, items, fingerprint_id)

    def rebuild_finish(self, fingerprint: dict[str, Any], fingerprint_id: str) -> list[int]:
        self._writable()
        return _rebuild.finish(self.conn, self.schema, fingerprint, fingerprint_id,
                               self._set_meta)

    def rebuild_abort(self) -> None:
        self._writable()
        _rebuild.abort(self.conn, self.schema)

    # -- doctor ------------------------------------------------------------------------

    def diagnose(self, fingerprint_id: str | None) -> list[Check]:
        return _doctor.diagnose(self.conn, self.schema, fingerprint_id, self.vector_dim())

    def repair(self, problems: set[str], defaults: dict[str, Any]) -> list[str]:
        self._writable()
        return _doctor.repair(self.conn, self.schema, problems, defaults)

"""The storage seam: what a backend must implement for kbstore to run on it.

A backend owns ALL SQL and storage details (connections, migrations, the
search statement, vector storage, doctor checks). Everything above it --
the store, the write path, the search pipeline, the CLI, the picobot
adapter -- works only with these methods and the types in kbstore.model.

Contract (tested by tests/contract/ against every backend):
- ``apply`` is the only way documents and derived data change: one
  transaction; a change whose ``expected`` state is not what the backend
  holds under the write lock is skipped and returned in ``stale``; vectors
  are refused (EmbedderChangedError) if the stored fingerprint is not the
  writer's.
- Document keys are never reused.
- A backend opened read-only never creates, converts or modifies anything.
- Creating a database (``open`` in mode 'create' on nothing) is atomic: the
  schema and, when ``stamp`` is given, the embedder fingerprint, fusion
  defaults and vector table commit together (a killed ``kbstore init``
  leaves nothing or a whole store).
- ``search`` runs ONE statement; ``shell_script`` prints what a user can
  run in the backend's own shell to get the same ranking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..model import Applied, Change, Check, Chunks, Document, Hit, SearchRequest, Stored

# What a new database is stamped with when ``open`` creates it: called only
# then, it returns (embedder fingerprint, fusion defaults).
Stamp = Callable[[], "tuple[dict[str, Any], dict[str, Any]]"]


class Backend(Protocol):
    kind: str                 # 'sqlite' | 'postgres'
    location: str             # a path, or a URL without its password
    read_only: bool
    max_questions: int        # HyPE questions stored per document

    # -- lifecycle and schema ---------------------------------------------------
    def close(self) -> None: ...
    def schema_state(self) -> Any: ...       # .version, .applied, .pending, .unknown
    def checkpoint(self) -> None: ...        # after bulk writes (may do nothing)

    # -- meta and the embedder fingerprint -----------------------------------------
    def get_meta(self, key: str) -> Any: ...
    def set_meta(self, key: str, value: Any) -> None: ...
    def fingerprint(self) -> dict[str, Any] | None: ...
    def vector_dim(self) -> int | None: ...
    def initialize(self, fingerprint: dict[str, Any], defaults: dict[str, Any], *,
                   replace_if_empty: bool = False) -> dict[str, Any]: ...

    # -- reading ----------------------------------------------------------------
    def get(self, path: str) -> Document | None: ...
    def documents(self, *, topic: str | None = None, limit: int | None = None,
             recent: bool = False) -> list[Document]: ...
    def paths(self) -> list[str]: ...
    def count(self) -> int: ...
    def stored(self, paths: Sequence[str]) -> dict[str, Stored]: ...
    def questions(self, path: str) -> list[str]: ...
    def iter_documents(self, batch_size: int) -> Iterator[list[tuple[Document, Stored]]]: ...
    def vectors_of(self, path: str) -> tuple[bytes | None, list[bytes | None]]: ...
    def chunk_vectors_of(self, path: str) -> list[bytes | None]: ...
    def status(self) -> dict[str, Any]: ...

    # -- the one write path -----------------------------------------------------------
    def apply(self, changes: Sequence[Change], fingerprint_id: str | None = None
              ) -> Applied: ...
    def write_lock(self) -> AbstractContextManager[Any]: ...

    # -- search -------------------------------------------------------------------
    def search(self, request: SearchRequest) -> list[Hit]: ...
    # Compile the search statement ahead of a model load (SQLite: its
    # planner's transient memory is then reused by the model; no-op elsewhere).
    def prepare_search(self, request: SearchRequest) -> None: ...
    def shell_script(self, request: SearchRequest, vector: list[float] | None) -> str: ...

    # -- rebuilding every vector with another model (reembed) ----------------------------
    # Slots: 0 the document vector, 1..max_questions its questions, above
    # that its chunks (staged together with slot 0).
    def rebuild_begin(self, fingerprint_id: str) -> dict[int, dict[int, str]]: ...
    def rebuild_stage(self, items: Sequence[tuple[Stored, str, Any, list[Any], Chunks | None]],
                      fingerprint_id: str) -> int: ...
    def rebuild_finish(self, fingerprint: dict[str, Any], fingerprint_id: str) -> list[int]: ...
    def rebuild_abort(self) -> None: ...

    # -- doctor --------------------------------------------------------------------
    def diagnose(self, fingerprint_id: str | None) -> list[Check]: ...
    def repair(self, problems: set[str], defaults: dict[str, Any]) -> list[str]: ...

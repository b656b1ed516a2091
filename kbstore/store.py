"""KnowledgeStore: the public entry point (open, upsert, import, search).

It holds a backend (SQLite file or PostgreSQL), an embedder and the HyPE
settings, and routes every write through the one write path
(:mod:`kbstore.writer`) and every search through the one search pipeline
(:mod:`kbstore.query` -> the backend's statement). No SQL here.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import query as _query
from .backends import open_backend
from .embed import Embedder, fingerprint_id, same_model
from .embedders import DEFAULT_EMBEDDER, embedder_from_fingerprint, get_embedder
from .errors import (
    EmbedderChangedError,
    EmbedderMismatchError,
    NotInitializedError,
)
from .model import Document, Hit, ImportReport
from .settings import Settings
from .vectors import query_blob

if TYPE_CHECKING:
    # The write path, ingest and HyPE are imported when a store first writes:
    # a search process (`kbstore search`) never loads them.
    from .backends.base import Backend
    from .hype import HypeConfig
    from .writer import Outcome, Progress, Provided, Writer

log = logging.getLogger("kbstore")


class KnowledgeStore:
    """An agent's knowledge base. Use :meth:`open`; the store is a context
    manager and is meant for one thread at a time."""

    def __init__(self, backend: Backend, embedder: Embedder | None, hype: HypeConfig,
                 settings: Settings, *, follow_fingerprint: bool = False) -> None:
        self.backend = backend
        self.embedder = embedder       # None: a damaged file without a fingerprint
        self.hype = hype
        self.settings = settings
        # The embedder came from the stored fingerprint: follow it when
        # another process re-embeds the database.
        self._follow = follow_fingerprint
        self._fp = fingerprint_id(embedder.fingerprint()) if embedder is not None else None
        self._search_prepared = False  # SQLite: statement compiled before the model loads
        self.created = False  # this open made the database, or stamped an unstamped one
        stored = backend.get_meta("fusion")
        if stored is not None and not isinstance(stored, dict):
            log.warning("%s: stored fusion defaults are malformed (ignored; `kbstore doctor "
                        "--fix` rewrites them)", backend.location)
            stored = None
        self.search_defaults = _query.stored_defaults(stored, embedder)

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    def open(cls, location: str | os.PathLike[str], embedder: Embedder | str | None = None, *,
             read_only: bool = False, create: bool = True, hype: bool | None = None,
             hype_model: str | None = None, settings: Settings | None = None,
             **embedder_options: Any) -> KnowledgeStore:
        """Open the store at ``location`` (a file path, or a ``postgresql://``
        URL), creating and migrating it if needed.

        ``embedder``: an Embedder or a name ('nomic', 'minilm', 'fake'); by
        default the one the database was made with, else 'nomic'. Another
        model than the stored one is refused -- unless the database holds no
        documents yet, which then takes the new one. ``read_only`` never
        creates, converts or modifies anything; ``create=False`` refuses a
        missing database.
        """
        settings = settings or Settings.from_env()
        mode = "read" if read_only else "create" if create else "write"
        options = {"model_dir": settings.nomic_model_dir, **embedder_options}
        made: list[Embedder] = []

        def stamp() -> tuple[dict[str, Any], dict[str, Any]]:
            # a new database: stamped in the transaction that makes its schema
            made.append(cls._choose(embedder, options))
            return made[0].fingerprint(), _query.new_database_defaults(made[0])

        backend = open_backend(location, mode=mode, settings=settings, stamp=stamp)
        try:
            from .hype import HypeConfig

            unstamped = not read_only and backend.fingerprint() is None
            resolved, follow = cls._resolve(backend, made[0] if made else embedder, options,
                                            read_only)
            config = HypeConfig(enabled=settings.hype_enabled if hype is None else bool(hype),
                                model=hype_model or settings.hype_model)
            store = cls(backend, resolved, config, settings, follow_fingerprint=follow)
            # made here, or stamped here (an empty file; an older init's half-made store)
            store.created = bool(made) or (unstamped and backend.fingerprint() is not None)
            return store
        except BaseException:
            backend.close()
            raise

    @staticmethod
    def _choose(embedder: Embedder | str | None, options: dict[str, Any]) -> Embedder:
        if isinstance(embedder, Embedder):
            return embedder
        return get_embedder(embedder or DEFAULT_EMBEDDER, **options)

    @staticmethod
    def _resolve(backend: Backend, embedder: Embedder | str | None, options: dict[str, Any],
                 read_only: bool) -> tuple[Embedder | None, bool]:
        stored = backend.fingerprint()
        if embedder is None and stored is not None:
            return embedder_from_fingerprint(stored, **options), True
        if embedder is None and backend.count() > 0:
            log.warning("%s has documents but no embedder fingerprint: searching text only; "
                        "`kbstore doctor --fix --embedder NAME` repairs it", backend.location)
            return None, False
        if read_only and stored is None and backend.vector_dim() is None:
            # only a store made before init was atomic can be left like this
            raise NotInitializedError(
                f"{backend.location} holds kbstore's schema but no embedder and no vector "
                "table (a `kbstore init` that did not finish); read commands never modify a "
                f"store: run `kbstore init --db {backend.location}` to finish it")
        chosen = KnowledgeStore._choose(embedder, options)
        if read_only:
            if stored is not None and not same_model(stored, chosen.fingerprint()):
                raise EmbedderMismatchError(_mismatch(backend.location, stored, chosen))
            return chosen, False
        now = backend.initialize(chosen.fingerprint(), _query.new_database_defaults(chosen),
                                 replace_if_empty=True)
        if not now:  # documents but no fingerprint: only doctor --fix may stamp one
            return chosen, False
        if not same_model(now, chosen.fingerprint()):
            raise EmbedderMismatchError(_mismatch(backend.location, now, chosen))
        return chosen, False

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> KnowledgeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def location(self) -> str:
        return self.backend.location

    @property
    def path(self) -> Path:
        return Path(self.backend.location)

    # -- reading ---------------------------------------------------------------------

    def get(self, path: str) -> Document | None:
        return self.backend.get(path)

    def documents(self, *, topic: str | None = None, limit: int | None = None,
             recent: bool = True) -> list[Document]:
        """Documents (of ``topic``), newest first (``recent``) or by path."""
        return self.backend.documents(topic=topic, limit=limit, recent=recent)

    def paths(self) -> list[str]:
        return self.backend.paths()

    def __len__(self) -> int:
        return self.backend.count()

    def status(self) -> dict[str, Any]:
        return self.backend.status()

    # -- writing ---------------------------------------------------------------------

    def writer(self, hype: HypeConfig | None = None) -> Writer:
        """The write path bound to this store's backend and embedder."""
        if self.embedder is None or self._follow_reembed() is None:
            raise NotInitializedError(
                f"{self.location} has documents but no embedder fingerprint, so nothing can "
                "be embedded; run `kbstore doctor --fix --embedder NAME` first")
        from .writer import Writer

        return Writer(self.backend, self.embedder, hype or self.hype, self.settings.batch_size)

    def upsert(self, path: str, *, title: str, body: str, tags: Sequence[str] | str = (),
               topic: str | None = None, doc_type: str | None = None, created: Any = None,
               updated: Any = None) -> str:
        """Store one document; returns 'added', 'updated' or 'unchanged'.
        topic/doc_type are derived from the path when omitted."""
        from .documents import make_document

        doc = make_document(path, title=title, body=body, tags=tags, topic=topic,
                            doc_type=doc_type, created=created, updated=updated)
        report = self.upsert_many([doc])
        return "added" if report.added else "updated" if report.updated else "unchanged"

    def upsert_many(self, docs: Iterable[Document], *, batch_size: int | None = None,
                    progress: Progress | None = None,
                    provided: dict[str, Provided] | None = None) -> ImportReport:
        """Store documents in batches; a batch (documents, vectors, HyPE,
        hashes) commits whole or not at all, alone or with the batches
        produced just before it (at most ~1 s of quick work, 512 documents:
        kbstore/writer.py), so a failure loses little."""
        return self.write(docs, batch_size=batch_size, progress=progress,
                          provided=provided).report

    def write(self, docs: Iterable[Document], *, batch_size: int | None = None,
              progress: Progress | None = None,
              provided: dict[str, Provided] | None = None) -> Outcome:
        writer = self.writer()
        if batch_size:
            writer.batch_size = batch_size
        return writer.upsert(docs, progress, provided=provided)

    def delete(self, path: str) -> bool:
        """Remove a document and everything derived from it."""
        return self.delete_many([path]) > 0

    def delete_many(self, paths: Sequence[str]) -> int:
        """Remove documents (by path) and everything derived from them;
        returns how many were stored. Refuses, before deleting anything, a
        single string or a path that is not text."""
        from .writer import Writer

        if isinstance(paths, (str, bytes)):
            raise TypeError(f"delete_many takes a list of paths, not one {type(paths).__name__}")
        bad = next((p for p in paths if not isinstance(p, str)), None)
        if bad is not None or None in paths:
            raise TypeError(f"delete_many takes paths as text; got {type(bad).__name__} "
                            f"{bad!r:.80}")
        paths = list(dict.fromkeys(paths))  # a path named twice is deleted (and counted) once
        return Writer(self.backend, self.embedder or _NoEmbedder(), self.hype,
                      self.settings.batch_size).delete(paths)

    def import_directory(self, workspace: str | os.PathLike[str], *,
                         prune: bool | None = None, batch_size: int | None = None,
                         progress: Progress | None = None,
                         before_delete: Callable[[list[str]], None] | None = None
                         ) -> ImportReport:
        """Reconcile the store with a picobot workspace by content hash.

        New and changed files are (re)embedded, unchanged ones cost nothing,
        unreadable files are skipped with a reason (their stored copy, if
        any, is kept). Documents whose file is gone are deleted -- unless
        that looks like a mistake (the folder holds no documents at all, or
        the removal would take at least half of a store's documents): then
        they are kept and listed in ``report.kept_missing``. ``prune=True``
        deletes them anyway, ``prune=False`` never deletes. ``before_delete``
        sees the paths about to be deleted.
        """
        return self.reconcile(workspace, prune=prune, batch_size=batch_size, progress=progress,
                              before_delete=before_delete).report

    def reconcile(self, workspace: str | os.PathLike[str], *, prune: bool | None = None,
                  batch_size: int | None = None, progress: Progress | None = None,
                  before_delete: Callable[[list[str]], None] | None = None,
                  provided: dict[str, Provided] | None = None) -> Outcome:
        """:meth:`import_directory` with vectors/questions that came with the
        files (``provided``), returning the write path's whole outcome."""
        from .ingest import workspace_documents
        from .removal import plan_missing
        from .writer import Outcome

        root = Path(workspace).expanduser()
        outcome = Outcome()
        report = outcome.report
        seen: set[str] = set()
        outcome.add(self.write(workspace_documents(root, seen, report.skipped),
                               batch_size=batch_size, progress=progress, provided=provided))
        self.backend.checkpoint()  # a bulk write: fold the WAL back (and truncate it)
        removal = plan_missing(root, self.paths(), seen, report.skipped, prune=prune)
        if removal.keep:
            report.kept_missing, report.kept_reason = removal.keep, removal.reason
            log.warning("kept %d document(s) missing from %s (%s); pass prune=True "
                        "(`kbstore import --prune`) to delete them", len(removal.keep), root,
                        removal.reason)
        gone = removal.delete
        if not gone:
            return outcome
        if before_delete is not None:
            before_delete(gone)
        report.deleted += self.delete_many(gone)
        self.backend.checkpoint()
        return outcome

    def reembed(self, embedder: Embedder | str, *, batch_size: int | None = None,
                progress: Progress | None = None, **options: Any) -> int:
        """Rebuild every vector with another embedder (and the vector table's
        dimension) in one switch: until it completes, the old vectors serve
        and a failure changes nothing. Returns documents embedded."""
        from .reembed import reembed

        new = get_embedder(embedder, **{"model_dir": self.settings.nomic_model_dir,
                                        **options}) if isinstance(embedder, str) else embedder
        old_floor = _query.embedder_defaults(self.embedder)["min_similarity"]
        done = reembed(self.backend, new, batch_size=batch_size or self.settings.batch_size,
                       progress=progress)
        stored = self.backend.get_meta("fusion")
        if isinstance(stored, dict) and stored.get("min_similarity") == old_floor:
            # the old model's floor means nothing for the new one's similarities
            self.backend.set_meta("fusion", {
                **stored, "min_similarity": _query.embedder_defaults(new)["min_similarity"]})
        self._set_embedder(new, follow=False)
        self.backend.checkpoint()
        return done

    def restamp(self, embedder: Embedder) -> int:
        """Record ``embedder`` for a file whose fingerprint was lost and embed
        every document with it (documents and questions are kept). The new
        vectors and the fingerprint are switched in together, as by
        :meth:`reembed`: a failure or a kill until then leaves the file as it was."""
        from .reembed import reembed

        done = reembed(self.backend, embedder, batch_size=self.settings.batch_size)
        self._set_embedder(embedder, follow=False)
        self.backend.checkpoint()
        return done

    def refresh(self, progress: Progress | None = None) -> int:
        """Make every document's derived data current without the LLM (missing
        or stale vectors, question vectors; stale questions dropped). Returns
        document vectors embedded."""
        writer = self.writer()
        done = 0
        for batch in self.backend.iter_documents(self.settings.batch_size):
            done += writer.derive(batch).report.embedded
            if progress:
                progress(len(batch))
        return done

    # -- searching -------------------------------------------------------------------

    def search(self, query: str, *, topic: str | None = None, limit: int = 10,
               explain: bool = False, query_vector: Any = None, now: Any = None,
               **settings: Any) -> list[Hit]:
        """Hybrid search; see kbstore/backends/sqlite/search.sql for the ranking.

        ``settings`` override fusion parameters (fusion='rrf'|'convex', k_rrf,
        w_fm/w_fts/w_vec, boosts, half_life_days (None or 0: no decay),
        min_similarity, ...) over the database's stored defaults.
        """
        request, _ = self._request(query, topic, limit, explain, query_vector, now, settings)
        return self.backend.search(request)

    def shell_script(self, query: str, *, topic: str | None = None, limit: int = 10,
                     now: Any = None, **settings: Any) -> str:
        """A script for the backend's own shell that runs the same statement
        with the same parameters as :meth:`search`."""
        request, vector = self._request(query, topic, limit, False, None, now, settings)
        return self.backend.shell_script(request, vector)

    def _request(self, query: Any, topic: Any, limit: Any, explain: bool, query_vector: Any,
                 now: Any, settings: dict[str, Any]) -> tuple[Any, list[float] | None]:
        resolved = _query.resolve_settings(self.search_defaults, settings)
        # Analysed (and so validated) before paying for its embedding.
        request = _query.analyse(query, None, topic=topic, limit=limit, now=now,
                                 settings=resolved, explain=explain)
        stored = self._follow_reembed()  # the embedder record, read once per search
        dim = int((stored or {}).get("dim") or (self.embedder.dim if self.embedder else 0))
        vector: list[float] | None = None
        blob = None
        if query_vector is not None:
            blob = query_blob(query_vector, dim)
        elif self.embedder is not None and stored is not None:
            if not self._search_prepared:  # compiled before a model can load
                self.backend.prepare_search(request)
                self._search_prepared = True
            one = getattr(self.embedder, "query_vector_blob", None)
            if callable(one):  # float32 bytes, from a cache without numpy when seen before
                blob = query_blob(one(query), dim)
            else:
                vector = [float(x) for x in self.embedder.embed_queries([query])[0]]
                blob = query_blob(vector, dim)
        request = dataclasses.replace(request, vector=blob)
        if vector is None and blob is not None:
            import array

            vector = list(array.array("f", blob))
        return request, vector

    def _follow_reembed(self) -> dict[str, Any] | None:
        """Another process may have re-embedded the database since this store
        opened: follow it (embedder from the fingerprint) or refuse clearly.
        Returns the stored embedder record (None: no vectors yet)."""
        stored = self.backend.fingerprint()
        if stored is None or self._fp is None or fingerprint_id(stored) == self._fp:
            return stored
        if not self._follow:
            raise EmbedderChangedError(_mismatch(self.location, stored, self.embedder)
                                       + " (it was re-embedded by another process)")
        self._set_embedder(embedder_from_fingerprint(
            stored, model_dir=self.settings.nomic_model_dir), follow=True)
        return stored

    def _set_embedder(self, embedder: Embedder, *, follow: bool) -> None:
        self.embedder = embedder
        self._fp = fingerprint_id(embedder.fingerprint())
        self._follow = follow
        stored = self.backend.get_meta("fusion")
        self.search_defaults = _query.stored_defaults(
            stored if isinstance(stored, dict) else None, embedder)


def _mismatch(location: str, stored: dict[str, Any], embedder: Any) -> str:
    theirs = fingerprint_id(embedder.fingerprint()) if embedder is not None else "none"
    return (f"{location} was embedded with {fingerprint_id(stored)}, not {theirs}; open it "
            f"with its own embedder or rebuild every vector with `kbstore reembed --db "
            f"{location} --embedder {getattr(embedder, 'name', 'NAME')}`")


class _NoEmbedder:
    """Stands in where only deletions happen (no vector is ever made)."""

    name, dim = "none", 0

    def fingerprint(self) -> dict[str, Any]:
        return {"name": "none"}

    def embed_documents(self, texts: Sequence[str]) -> Any:
        raise NotInitializedError("no embedder")

    embed_queries = embed_documents


__all__ = ["ImportReport", "KnowledgeStore"]

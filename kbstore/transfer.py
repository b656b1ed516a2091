"""``kbstore copy SRC DST``: a knowledge base from one backend to another
(SQLite file -> PostgreSQL and back, or any other pair).

Lossless: documents with their tags, dates and extra frontmatter, HyPE
questions (with the model that wrote them), and -- when the destination's
embedder is the source's (the default for a new destination) -- the vectors
themselves, so nothing is embedded again and no LLM is called. The
destination's hash rows are recomputed from the same content, so they come
out equal. Everything enters through the one write path, batch by batch,
each batch one transaction: a copy stopped at any moment is resumed by
running it again (documents already there and current are skipped).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .embedders import embedder_from_fingerprint
from .errors import KBStoreError
from .exchange import JsonlReport, _record, document_records, write_records
from .model import Document, Skipped
from .removal import plan_removal
from .writer import Provided, batches

META_COPIED = ("fusion",)  # stored search defaults a user may have tuned


@dataclass
class CopyReport:
    source: str
    destination: str
    documents: int = 0
    embedder: str = ""
    jsonl: JsonlReport = field(default_factory=JsonlReport)
    pruned: int = 0
    extra_in_destination: list[str] = field(default_factory=list)  # kept
    kept_reason: str = ""  # why --prune kept them ('' when it was not asked to delete)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "jsonl"}
        data.update(self.jsonl.to_dict())
        data["extra_in_destination"] = self.extra_in_destination[:20]
        data["extra_in_destination_count"] = len(self.extra_in_destination)
        return data

    def summary(self) -> str:
        w, j = self.jsonl.write, self.jsonl
        text = (f"copied {self.documents} document(s) from {self.source} to {self.destination}: "
                f"added {w.added}, updated {w.updated}, unchanged {w.unchanged}; reused "
                f"{j.reused_vectors} vectors, {j.reused_question_vectors} question vectors and "
                f"{j.reused_chunk_vectors} chunk vectors, {j.imported_questions} HyPE "
                f"questions; embedded {j.embedded} document(s) and {j.embedded_chunks} "
                f"chunk(s) with {self.embedder}; skipped {len(j.skipped)}")
        if self.pruned:
            text += f"; deleted {self.pruned} document(s) the source does not have"
        return text


def _same_location(src: str, dst: str) -> bool:
    if "://" in src or "://" in dst:
        return src == dst
    return os.path.realpath(os.path.expanduser(src)) == os.path.realpath(
        os.path.expanduser(dst))


def _fingerprinted(location: str) -> bool:
    """Does ``location`` hold a store with an embedder fingerprint (which it
    keeps: it is opened with its own embedder)? False where there is none yet,
    or where it cannot be read (the copy's own open says why)."""
    from .backends import location_exists
    from .store import KnowledgeStore

    if not location_exists(location):
        return False
    try:
        with KnowledgeStore.open(location, read_only=True, hype=False) as dst:
            return dst.backend.fingerprint() is not None
    except KBStoreError:
        return False


def copy_store(source: str | os.PathLike[str], destination: str | os.PathLike[str], *,
               embedder: Any = None, prune: bool = False, force: bool = False,
               batch_size: int | None = None,
               progress: Callable[[int], None] | None = None,
               on_total: Callable[[int], None] | None = None,
               before_delete: Callable[[list[str]], None] | None = None,
               deleted: Callable[[int], None] | None = None) -> CopyReport:
    """Copy every document of ``source`` into ``destination`` (created if
    missing). ``embedder``: for a new destination only (default: the
    source's, so vectors are reused); an existing destination keeps its own.
    ``prune`` deletes destination documents the source does not have
    (``before_delete`` sees them first; ``deleted`` is told after each
    batch's transaction how many went) -- unless that looks like a mistake
    (:mod:`kbstore.removal`: an empty source, half the destination): then
    they are kept, with the reason in ``kept_reason``; ``force`` deletes
    them anyway."""
    from .store import KnowledgeStore

    src_loc, dst_loc = str(source), str(destination)
    if _same_location(src_loc, dst_loc):
        raise KBStoreError("source and destination are the same knowledge base")
    with KnowledgeStore.open(src_loc, read_only=True, hype=False) as src:
        theirs = src.backend.fingerprint()
        if embedder is None and theirs is not None and not _fingerprinted(dst_loc):
            embedder = embedder_from_fingerprint(theirs,
                                                 model_dir=src.settings.nomic_model_dir)
        with KnowledgeStore.open(dst_loc, embedder, hype=False) as dst:
            report = CopyReport(src.location, dst.location)
            report.embedder = dst.embedder.name if dst.embedder is not None else "none"
            if on_total is not None:
                on_total(len(src))
            new_destination = len(dst) == 0
            if new_destination:
                for key in META_COPIED:
                    value = src.backend.get_meta(key)
                    if value is not None:
                        dst.backend.set_meta(key, value)
            seen = _copy_documents(src, dst, report, batch_size, progress)
            stored = dst.paths()
            extra = [p for p in stored if p not in seen]
            removal = plan_removal(None, extra, len(stored), folder_empty=not seen,
                                   prune=(True if force else None) if prune else False,
                                   empty_reason=f"the source {src.location} holds no documents")
            report.extra_in_destination = removal.keep
            if prune:
                report.kept_reason = removal.reason
            if removal.delete:
                if before_delete is not None:
                    before_delete(removal.delete)
                for batch in batches(removal.delete, dst.settings.batch_size):
                    report.pruned += dst.delete_many(batch)
                    if deleted is not None:
                        deleted(report.pruned)
            dst.backend.checkpoint()
    return report


def _copy_documents(src: Any, dst: Any, report: CopyReport, batch_size: int | None,
                    progress: Callable[[int], None] | None) -> set[str]:
    if dst.embedder is None:
        raise KBStoreError(f"{dst.location} has documents but no embedder fingerprint; "
                           "repair it with `kbstore doctor --fix --embedder NAME` first")
    fingerprint = dst.embedder.fingerprint()
    dim = int(dst.embedder.dim)
    writer = dst.writer()
    jsonl = report.jsonl
    seen: set[str] = set()

    def records() -> Iterator[tuple[Document, Provided]]:
        for record in document_records(src, include_vectors=True):
            seen.add(record["path"])
            try:
                yield _record(record, fingerprint, dim, jsonl)
            except KBStoreError as exc:  # a document the destination cannot hold
                jsonl.skipped.append(Skipped(record["path"], str(exc)))

    before = jsonl.documents
    write_records(writer, records(), batch_size or dst.settings.batch_size, jsonl, progress)
    report.documents += jsonl.documents - before
    return seen

"""Dry runs: what a writing command would add, update, delete or keep,
worked out from a read-only store (or none, for a store not made yet), so
nothing is written. The decisions are the write path's own: content hashes
say what changed, :mod:`kbstore.removal` what would be deleted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .errors import ExchangeError, KBStoreError
from .model import Document, Skipped
from .removal import plan_missing, plan_removal
from .writer import batches

BATCH = 256


@dataclass
class WritePlan:
    add: list[str] = field(default_factory=list)
    update: list[str] = field(default_factory=list)
    unchanged: int = 0
    delete: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)  # would be deleted but are held back
    keep_reason: str = ""
    skipped: list[Skipped] = field(default_factory=list)
    # import-npz: added/updated documents whose vector the archive provides,
    # and why each other one would be embedded (reason -> documents)
    reuse_vectors: int = 0
    embed: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "skipped"}
        data["skipped"] = [{"path": s.path, "reason": s.reason} for s in self.skipped]
        data["dry_run"] = True
        return data

    def summary(self) -> str:
        return (f"dry run, nothing written: would add {len(self.add)}, update "
                f"{len(self.update)}, leave {self.unchanged} unchanged, delete "
                f"{len(self.delete)}, keep {len(self.keep)} missing, skip {len(self.skipped)}")


def compare(store: Any, docs: Iterable[Document], plan: WritePlan) -> None:
    """Sort ``docs`` into added, updated and unchanged against ``store``
    (None: a store that does not exist yet). A path given twice counts once."""
    planned: set[str] = set()
    for batch in batches(docs, BATCH):
        unique = [d for d in {d.path: d for d in batch}.values() if d.path not in planned]
        stored = store.backend.stored([d.path for d in unique]) if store is not None else {}
        for doc in unique:
            planned.add(doc.path)
            old = stored.get(doc.path)
            if old is None:
                plan.add.append(doc.path)
            elif old.content_hash != doc.content_hash():
                plan.update.append(doc.path)
            else:
                plan.unchanged += 1


def plan_import(store: Any, workspace: str | os.PathLike[str], *,
                prune: bool | None = None) -> WritePlan:
    """What ``import_directory(workspace, prune=prune)`` would do."""
    from .ingest import workspace_documents

    root = Path(workspace).expanduser()
    plan = WritePlan()
    seen: set[str] = set()
    compare(store, workspace_documents(root, seen, plan.skipped), plan)
    stored = store.paths() if store is not None else []
    _removal(plan, plan_missing(root, stored + plan.add, seen, plan.skipped, prune=prune))
    return plan


def plan_npz(store: Any, workspace: str | os.PathLike[str], archive: Any,
             ours: dict[str, Any], dim: int, *, trust_vectors: bool = False,
             prune: bool | None = None) -> WritePlan:
    """What ``import_npz(store, workspace, npz, trust_vectors=)`` would do:
    ``plan_import``'s counts, and for every document it would add or update
    whether the archive's vector is reused or why it would be embedded.
    ``ours``/``dim``: the fingerprint and dimension of the store's embedder."""
    from .exchange_npz import NpzReport, sort_entries, workspace_files

    plan = plan_import(store, workspace, prune=prune)
    reasons: dict[str, str] = {}
    provided = sort_entries(archive, workspace_files(workspace), ours, dim, trust_vectors,
                            NpzReport(), reasons)
    for path in plan.add + plan.update:
        given = provided.get(path)
        if given is not None and given.vector is not None:
            plan.reuse_vectors += 1
        else:
            reason = reasons.get(path, "not in the npz")
            plan.embed[reason] = plan.embed.get(reason, 0) + 1
    return plan


def plan_jsonl(store: Any, file: str | os.PathLike[str] | IO[str]) -> WritePlan:
    """What ``import_jsonl(store, file)`` would write (it deletes nothing)."""
    from .exchange import JsonlReport, _read_jsonl, _record

    plan = WritePlan()
    report = JsonlReport()

    def docs() -> Iterable[Document]:
        for where, record in _read_jsonl(file, report):
            try:
                yield _record(record, {}, 0, report)[0]
            except ExchangeError as exc:
                plan.skipped.append(Skipped(where, str(exc)))

    compare(store, docs(), plan)
    plan.skipped = report.skipped + plan.skipped
    return plan


def plan_copy(source: str, destination: str, *, prune: bool = False,
              force: bool = False) -> WritePlan:
    """What ``copy_store(source, destination, prune=, force=)`` would do;
    both are opened read-only and a missing destination is not created."""
    from .backends import location_exists
    from .exchange import JsonlReport, _record, document_records
    from .store import KnowledgeStore
    from .transfer import _same_location

    if _same_location(source, destination):
        raise KBStoreError("source and destination are the same knowledge base")
    plan = WritePlan()
    seen: set[str] = set()
    with KnowledgeStore.open(source, read_only=True, hype=False) as src:
        dst = (KnowledgeStore.open(destination, read_only=True, hype=False)
               if location_exists(destination) else None)
        try:
            def docs() -> Iterable[Document]:
                for record in document_records(src):
                    seen.add(record["path"])
                    try:
                        yield _record(record, {}, 0, JsonlReport())[0]
                    except KBStoreError as exc:
                        plan.skipped.append(Skipped(record["path"], str(exc)))

            compare(dst, docs(), plan)
            stored = (dst.paths() if dst is not None else []) + plan.add
            extra = [p for p in stored if p not in seen]
            location = src.location
        finally:
            if dst is not None:
                dst.close()
    _removal(plan, plan_removal(None, extra, len(stored), folder_empty=not seen,
                                prune=(True if force else None) if prune else False,
                                empty_reason=f"the source {location} holds no documents"))
    return plan


def _removal(plan: WritePlan, removal: Any) -> None:
    plan.delete, plan.keep, plan.keep_reason = removal.delete, removal.keep, removal.reason

"""The one rule for deleting documents whose files are gone (import, the
picobot adapter's sync and the watcher all use it) or that a copy's source
does not have (``copy --prune``): nothing is deleted that looks like a
mistake rather than a decision.

A removal is held back, and listed, when the folder holds no documents at
all, when it would take at least half of the store (and at least
MASS_DELETE_MIN documents), or -- for the documents of a section whose folder
is absent (the knowledge folder given instead of the workspace, an unmounted
journal/), and of a folder the scan could not list or does not follow (no
read permission, a symlink) -- because that folder was never looked at (workspaces
only). ``prune=True`` deletes them anyway; ``prune=False`` never deletes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .ingest import section_folder, section_missing
from .model import Skipped

MASS_DELETE_SHARE = 0.5
MASS_DELETE_MIN = 5


@dataclass
class Removal:
    delete: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)
    reason: str = ""  # why ``keep`` was held back ('' when nothing was)


def plan_removal(workspace: str | os.PathLike[str] | None, gone: list[str], stored: int, *,
                 folder_empty: bool, prune: bool | None,
                 empty_reason: str = "", unread: Iterable[str] = (),
                 recently_deleted: int = 0, recent: str = "") -> Removal:
    """Split ``gone`` (stored documents whose files were not found) into what
    to delete and what to keep. ``stored``: documents in the store;
    ``folder_empty``: the folder holds no documents (or is missing), said
    as ``empty_reason`` when given; ``unread``: folders (as document-path
    prefixes, 'projects/work') the scan did not look into -- unreadable or
    symlinked -- whose documents are therefore not known to be gone;
    ``recently_deleted``: documents deleted just before by the same rule
    (a watcher's earlier batches, ``recent`` says when), counted with
    ``gone`` so a removal made a few files at a time stops where one made at
    once would. ``workspace`` None (a copy's source): no folder, so no
    section check."""
    if not gone or prune is True:
        return Removal(delete=list(gone))
    if prune is False:
        return Removal(keep=list(gone), reason="prune=False")
    if folder_empty:
        return Removal(keep=list(gone),
                       reason=empty_reason or f"{workspace} holds no documents at all")
    not_read = {u: [p for p in gone if p.startswith(u + "/")] for u in unread}
    held = {p for paths in not_read.values() for p in paths}
    reasons = [f"folder {', '.join(sorted(u for u, paths in not_read.items() if paths))} "
               "not read"] if held else []
    rest = [p for p in gone if p not in held]
    total = len(rest) + recently_deleted
    if total >= MASS_DELETE_SHARE * (stored + recently_deleted) and total >= MASS_DELETE_MIN:
        more = f" after {recently_deleted} deleted {recent}" if recently_deleted else ""
        return Removal(keep=list(gone), reason="; ".join(
            [f"{len(rest)} of {stored} documents would be deleted{more}", *reasons]))
    if workspace is None:
        return Removal(delete=list(gone))
    root = Path(workspace)
    unseen = [p for p in rest if section_missing(root, p)]
    if unseen:
        held.update(unseen)
        folders = sorted({str(section_folder(root, p)) for p in unseen})
        reasons.append(f"no folder {', '.join(folders)}")
    return Removal(delete=[p for p in gone if p not in held],
                   keep=[p for p in gone if p in held], reason="; ".join(reasons))


def plan_missing(workspace: str | os.PathLike[str], stored: list[str], seen: set[str],
                 skipped: list[Skipped], *, prune: bool | None) -> Removal:
    """The removal after reading a workspace: ``stored`` (every stored path,
    the ones just written included) minus the candidates ``seen`` there;
    what the scan ``skipped`` (a folder it could not read) is not gone."""
    return plan_removal(workspace, [p for p in stored if p not in seen], len(stored),
                        folder_empty=not seen, prune=prune, unread=[s.path for s in skipped])

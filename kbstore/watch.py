"""Keeping the index in step with a picobot workspace while it is edited.

File-system events (watchfiles) are grouped by a debounce, then only the
changed paths are reconciled: a changed file is parsed and upserted (content
hashes make an unchanged one cost nothing), a document whose file is gone is
deleted. What counts as a document is ingest's rule, so a watcher and
``kbstore import`` never disagree about a file.

Editors save in many ways -- write a temp file and rename it over the note,
delete and re-create, write in several chunks -- so an event says only
"look here": the file's state is read after the debounce, a file that
changes while it is read or does not parse yet is read again after a short
settle, and a deletion is confirmed after that settle too.

Trust: a vanished ``knowledge/`` folder (renamed, unmounted, mid-sync), a
folder replaced by a symlink (which an import does not follow), or a batch
that would remove more than half of the indexed documents -- counting what
was deleted in the last MASS_WINDOW_S, so files vanishing a few at a time
stop where an import would -- deletes nothing; a warning names the explicit
way to remove them.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .documents import SKILLS_TOPIC, TOPICS
from .errors import InvalidDocumentError
from .ingest import EXCLUDED_NAMES, parse_file, scan_workspace
from .listing import shown, some_paths
from .model import Document, Skipped
from .removal import plan_removal

log = logging.getLogger("kbstore.watch")

DEFAULT_DEBOUNCE_MS = 2000  # longest a burst of events is grouped before a reconcile
DEFAULT_STEP_MS = 200       # quiet time that ends a burst
DEFAULT_SETTLE_S = 0.3      # wait before re-reading a file caught mid-write / confirming a delete
SETTLE_ROUNDS = 3
MASS_WINDOW_S = 600.0       # deletions this recent count together against the half-store rule
# Editors' and kbstore's own scratch files: never documents, never worth a
# reconcile (vim .swp/4913 probes pass through and simply match no document).
IGNORED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules"})
_IGNORED_NAME_RES = tuple(re.compile(p) for p in (
    r"\.sw.$", r"~$", r"^\.#", r"^#.*#$", r"\.tmp$", r"\.kate-swp$", r"\.crswap$",
    r"^\.goutputstream", r"^\.DS_Store$", r"-wal$", r"-shm$", r"-journal$"))
_MISSING = "\x00missing"  # _read's answer for a file that is not there
PRUNE_HINT = "run `kbstore import --db {db} {workspace} --prune` to remove them on purpose"


@dataclass
class ReconcileReport:
    """What one reconcile did; ``kept`` are deletions refused by the trust rule."""

    number: int = 0
    paths: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    kept: int = 0
    skipped: list[Skipped] = field(default_factory=list)

    def line(self) -> str:
        return (f"reconcile #{self.number}: {self.paths} path(s): {self.added} added, "
                f"{self.updated} updated, {self.unchanged} unchanged, {self.deleted} deleted, "
                f"{len(self.skipped)} skipped, {self.kept} kept")


def _under(path: str, prefix: str) -> bool:
    return prefix == "" or path == prefix or path.startswith(prefix + "/")


class Watcher:
    """Reconciles ``store`` with ``workspace`` as its files change.

    ``lock`` (e.g. a server's) is held around every store call, so a watcher
    can share an open store with other threads. ``reconciles`` counts the
    batches that touched at least one document path.
    """

    def __init__(self, workspace: str | os.PathLike[str], store: Any, *,
                 lock: AbstractContextManager[Any] | None = None,
                 debounce_ms: int = DEFAULT_DEBOUNCE_MS, step_ms: int = DEFAULT_STEP_MS,
                 settle_s: float = DEFAULT_SETTLE_S,
                 on_report: Callable[[ReconcileReport], None] | None = None) -> None:
        # Resolved, so event paths (reported under the watched path) and
        # computed paths compare equal.
        self.workspace = Path(workspace).expanduser().resolve()
        if not self.workspace.is_dir():
            raise InvalidDocumentError(f"not a directory: {self.workspace}")
        self.store = store
        self.lock = lock if lock is not None else nullcontext()
        self.debounce_ms, self.step_ms, self.settle_s = debounce_ms, step_ms, settle_s
        self.on_report = on_report
        self.mass_window_s = MASS_WINDOW_S
        self._deletions: list[tuple[float, int]] = []  # (time.monotonic(), documents deleted)
        self.reconciles = 0
        self.ready = threading.Event()  # set once file events are being collected
        # The layout is fixed by what was there at start (or appeared later):
        # when workspace/knowledge vanishes, its documents are not suddenly
        # looked for at the workspace's top level.
        self._has_knowledge_dir = (self.workspace / "knowledge").is_dir()
        db = getattr(store, "path", None)
        self._own_files = set() if db is None else {
            f"{Path(db).expanduser().resolve()}{suffix}" for suffix in ("", "-wal", "-shm",
                                                                        "-journal")}

    # -- which paths are documents (ingest's rules) ----------------------------

    def _kroot(self) -> Path:
        if (self.workspace / "knowledge").is_dir():
            self._has_knowledge_dir = True
        return self.workspace / "knowledge" if self._has_knowledge_dir else self.workspace

    def root_missing(self) -> bool:
        return not self.workspace.is_dir() or (
            self._has_knowledge_dir and not (self.workspace / "knowledge").is_dir())

    def file_for(self, doc_path: str) -> Path:
        """Where the file of a document path lives in this workspace."""
        if doc_path.startswith(SKILLS_TOPIC + "/"):
            return self.workspace / doc_path
        return self._kroot() / doc_path

    def doc_path(self, file: str | os.PathLike[str]) -> str | None:
        """The document path of ``file`` if ingest would index it, else None."""
        file = Path(file)
        kroot = self._kroot()
        try:
            parts = file.relative_to(kroot).parts
            base = kroot
        except ValueError:
            parts, base = (), kroot
        if not (len(parts) >= 2 and parts[0] in TOPICS):
            try:
                parts, base = file.relative_to(self.workspace).parts, self.workspace
            except ValueError:
                return None
            if not (len(parts) == 3 and parts[0] == SKILLS_TOPIC and parts[2] == "SKILL.md"):
                return None
        elif not parts[-1].lower().endswith(".md") or parts[-1].lower() in EXCLUDED_NAMES:
            return None
        # Symlinked folders are never descended into by an import.
        for n in range(1, len(parts)):
            if (base.joinpath(*parts[:n])).is_symlink():
                return None
        rel = "/".join(parts)
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return rel

    def _dir_prefix(self, path: Path, indexed: set[str]) -> str | None:
        """A folder event (created, moved, deleted): the document-path prefix it
        covers ('' = everything), or None when it holds no documents."""
        if path in (self.workspace, self.workspace / "knowledge"):
            return ""
        candidates = []
        for base, tops in ((self._kroot(), TOPICS), (self.workspace, (SKILLS_TOPIC,))):
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            if rel.split("/")[0] in tops:
                candidates.append(rel)
        for rel in candidates:
            if path.is_dir() or any(_under(p, rel) for p in indexed):
                return rel
        return None

    # -- reconciling ------------------------------------------------------------

    def _read(self, rel: str, file: Path, last: bool) -> Document | str | None:
        """The parsed document, _MISSING, a skip reason, or None when the file
        may still be being written (changed within the settle time, or while
        it was read): read it again later. A half-written file often parses
        (no closing '---' is just a body), so freshness is the signal."""
        try:
            before = file.stat()
            if not file.is_file():
                return "not a regular file"
            if not last and time.time() - before.st_mtime < self.settle_s:
                return None
            doc = parse_file(file, rel)
            after = file.stat()
        except FileNotFoundError:
            return _MISSING
        except (InvalidDocumentError, OSError) as exc:
            return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if (before.st_mtime_ns, before.st_size) != (after.st_mtime_ns, after.st_size):
            return None
        root = self.workspace if rel.startswith(SKILLS_TOPIC + "/") else self._kroot()
        try:
            file.resolve().relative_to(root.resolve())
        except (ValueError, OSError):
            return "symlink points outside the root"
        return doc

    def _targets(self, changes: Iterable[str | os.PathLike[str]]) -> dict[str, Path]:
        targets: dict[str, Path] = {}
        folders: list[Path] = []
        for change in changes:
            path = Path(change)
            rel = self.doc_path(path)
            if rel is not None:
                targets[rel] = path
            elif path.suffix.lower() != ".md" or path.is_dir():
                folders.append(path)
        if folders:
            with self.lock:
                indexed = set(self.store.paths())
            prefixes = {p for p in (self._dir_prefix(f, indexed) for f in folders) if p is not None}
            if prefixes:
                if self.workspace.is_dir():
                    for rel, file, _reason in scan_workspace(self.workspace):
                        if file is not None and any(_under(rel, p) for p in prefixes):
                            targets.setdefault(rel, file)
                for rel in indexed:
                    if any(_under(rel, p) for p in prefixes):
                        targets.setdefault(rel, self.file_for(rel))
        return targets

    def reconcile(self, changes: Iterable[str | os.PathLike[str]]) -> ReconcileReport:
        """Bring the documents at the changed paths up to date; returns what
        was done (also logged as one line)."""
        targets = self._targets(changes)
        report = ReconcileReport(paths=len(targets))
        if not targets:
            return report
        self.reconciles += 1
        report.number = self.reconciles
        docs: list[Document] = []
        gone: list[str] = []
        pending = dict(targets)
        for attempt in range(SETTLE_ROUNDS + 1):
            again: dict[str, Path] = {}
            for rel, file in pending.items():
                got = self._read(rel, file, last=attempt == SETTLE_ROUNDS)
                if isinstance(got, Document):
                    docs.append(got)
                elif got is _MISSING and attempt > 0:
                    gone.append(rel)
                elif got is _MISSING or attempt < SETTLE_ROUNDS:
                    # Missing: confirmed after a settle, since delete + create
                    # (or a rename-over) can be split across event batches.
                    # Unparsable or changing: the editor may not be done yet.
                    again[rel] = file
                else:
                    report.skipped.append(Skipped(rel, got or "file kept changing while read"))
            if not again:
                break
            pending = again
            time.sleep(self.settle_s)
        for skipped in report.skipped:
            log.warning("skipped %s: %s (the stored copy, if any, is kept)", shown(skipped.path),
                        skipped.reason)
        if docs:
            with self.lock:
                done = self.store.upsert_many(docs)
            report.added, report.updated = done.added, done.updated
            report.unchanged = done.unchanged
        self._delete(gone, report)
        log.info(report.line())
        if self.on_report is not None:
            self.on_report(report)
        return report

    def _delete(self, rels: list[str], report: ReconcileReport) -> None:
        if not rels:
            return
        with self.lock:
            indexed = len(self.store)
            known = [rel for rel in rels if self.store.get(rel) is not None]
            if not known:
                return
            now = time.monotonic()
            self._deletions = [(t, n) for t, n in self._deletions
                               if now - t < self.mass_window_s]
            removal = plan_removal(
                self.workspace, known, indexed, folder_empty=self.root_missing(), prune=None,
                empty_reason=f"the knowledge folder under {self.workspace} is missing",
                unread=self._symlinked_folders(known),
                recently_deleted=sum(n for _t, n in self._deletions),
                recent=f"in the last {self.mass_window_s / 60:g} minutes")
            if removal.keep:
                log.warning("keeping %d document(s) whose files are gone (%s; a folder moved "
                            "or a sync in progress?); %s", len(removal.keep), removal.reason,
                            PRUNE_HINT.format(db=getattr(self.store, "path", "DB"),
                                              workspace=self.workspace))
                report.kept += len(removal.keep)
            if removal.delete:  # every deletion is named before it is made
                log.info("deleting %d document(s) whose files are gone: %s",
                         len(removal.delete), some_paths(removal.delete))
            deleted = sum(int(self.store.delete(rel)) for rel in removal.delete)
            report.deleted += deleted
            if deleted:
                self._deletions.append((now, deleted))

    def _symlinked_folders(self, rels: list[str]) -> list[str]:
        """The folders (document-path prefixes) of ``rels`` that are symlinks
        -- an import never follows them, so their documents are not gone."""
        found: set[str] = set()
        for rel in rels:
            base = self.workspace if rel.startswith(SKILLS_TOPIC + "/") else self._kroot()
            parts = rel.split("/")[:-1]
            for n in range(1, len(parts) + 1):
                if base.joinpath(*parts[:n]).is_symlink():
                    found.add("/".join(parts[:n]))
                    break
        return sorted(found)

    def reconcile_all(self) -> ReconcileReport:
        """The whole workspace (start-up catch-up), with the same trust rules."""
        return self.reconcile([self.workspace])

    # -- the event loop -----------------------------------------------------------

    def wanted(self, _change: Any, path: str) -> bool:
        """watchfiles' filter: drop VCS folders, editors' scratch files and the
        database's own files (a database inside the workspace must not wake
        the watcher on every write). Judged below the workspace only."""
        try:
            parts = Path(path).relative_to(self.workspace).parts
        except ValueError:
            return False
        if path in self._own_files or any(p in IGNORED_DIRS for p in parts):
            return False
        return not (parts and any(r.search(parts[-1]) for r in _IGNORED_NAME_RES))

    def run(self, stop: threading.Event | None = None, *, initial_sync: bool = True) -> None:
        """Watch until ``stop`` is set (or KeyboardInterrupt).

        The initial sync runs once the watch is in place (its first, empty
        yield), so an edit made during the sync is not lost: the watcher
        buffers it for the next batch.
        """
        from watchfiles import watch

        stop = stop or threading.Event()
        synced = not initial_sync
        while not stop.is_set():
            if not self.workspace.is_dir():  # the workspace itself vanished: wait for it
                stop.wait(1.0)
                continue
            try:
                for changes in watch(self.workspace, watch_filter=self.wanted,
                                     debounce=self.debounce_ms, step=self.step_ms,
                                     stop_event=stop, rust_timeout=1000, yield_on_timeout=True,
                                     raise_interrupt=True):
                    self.ready.set()
                    if not synced:
                        self.reconcile_all()
                        synced = True
                    if changes:
                        self.reconcile(path for _change, path in changes)
                    if not self.workspace.is_dir():
                        break
            except (FileNotFoundError, RuntimeError, OSError) as exc:
                # watchfiles raises when its root is removed; start over once it is back.
                log.warning("watching %s stopped (%s); retrying", self.workspace, exc)
                stop.wait(1.0)
            synced = False  # events were missed while the watch was down: catch up

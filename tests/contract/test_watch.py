"""`kbstore watch`: reconciling changed paths, editors' save patterns, the
trust rules for deletions, and real processes on one database."""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.ingest import scan_workspace
from kbstore.watch import Watcher

NOTE = "---\ntitle: {title}\ntags: [zoo]\n---\n{body}\n"


@pytest.fixture
def kb(sample_workspace: Path, tmp_path: Path):
    with KnowledgeStore.open(tmp_path / "kb.sqlite", FakeEmbedder(64), hype=False) as store:
        store.import_directory(sample_workspace)
        yield store, sample_workspace, Watcher(sample_workspace, store, settle_s=0.05)


def _write(path: Path, title: str, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(NOTE.format(title=title, body=body), encoding="utf-8")


def _later(seconds: float, action: Callable[[], Any]) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


# -- which paths count: the same rules as `kbstore import` ---------------------------


def test_document_paths_match_the_importer(kb: Any) -> None:
    _store, ws, watcher = kb
    scanned = {rel: file for rel, file, reason in scan_workspace(ws) if not reason}
    assert len(scanned) == 34
    for rel, file in scanned.items():
        assert watcher.doc_path(file) == rel
    ignored = [ws / "knowledge/README.md", ws / "knowledge/projects/README.md", ws / "SOUL.md",
               ws / "IDENTITY.md", ws / "TODO.md", ws / "knowledge/projects/.note.md.x1.tmp",
               ws / "knowledge/projects/note.md~", ws / "knowledge/projects/notes.txt",
               ws / "knowledge/other/x.md", ws / "skills/deploy-service/notes.md",
               ws / ".git/HEAD", ws / "knowledge/x.md"]
    assert [watcher.doc_path(p) for p in ignored] == [None] * len(ignored)


def test_scratch_files_and_the_database_never_wake_the_watcher(kb: Any) -> None:
    _store, ws, _ = kb
    with KnowledgeStore.open(ws / "kb.sqlite", FakeEmbedder(64), hype=False) as inside_store:
        inside = Watcher(ws, inside_store)  # a database kept inside the workspace
        for name in ("kb.sqlite", "kb.sqlite-wal", "kb.sqlite-shm", ".git/index",
                     "knowledge/projects/.x.md.swp", "knowledge/projects/.#x.md",
                     "knowledge/projects/.x.md.abc.tmp"):
            assert not inside.wanted(None, str(ws / name)), name
        assert inside.wanted(None, str(ws / "knowledge/projects/x.md"))
        report = inside.reconcile([ws / "knowledge/README.md", ws / "TODO.md",
                                   ws / "knowledge/projects/4913", ws / "kb.sqlite"])
        assert report.paths == 0 and inside.reconciles == 0


# -- reconciling changed paths -------------------------------------------------------


def test_create_edit_delete(kb: Any) -> None:
    store, ws, watcher = kb
    note = ws / "knowledge/domains/zebras.md"
    _write(note, "Zebra notes", "Zebras have quagga stripes.")
    assert watcher.reconcile([note]).added == 1
    assert store.search("quagga stripes")[0].path == "domains/zebras.md"
    _write(note, "Zebra notes", "Zebras meet okapis.")
    assert watcher.reconcile([note]).updated == 1
    assert "okapis" in store.get("domains/zebras.md").body
    note.unlink()
    assert watcher.reconcile([note]).deleted == 1
    assert store.get("domains/zebras.md") is None and len(store) == 34


def test_a_deletion_is_named_before_it_is_made(kb: Any) -> None:
    store, ws, watcher = kb
    note = ws / "knowledge/domains/zebras.md"
    _write(note, "Zebra notes", "Zebras have quagga stripes.")
    watcher.reconcile([note])
    seen: list[tuple[str, bool]] = []

    class Before(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.getMessage(), store.get("domains/zebras.md") is not None))

    handler = Before(level=logging.INFO)
    logger = logging.getLogger("kbstore.watch")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        note.unlink()
        assert watcher.reconcile([note]).deleted == 1
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert ("deleting 1 document(s) whose files are gone: domains/zebras.md", True) in seen


def test_a_long_deletion_list_is_cut_like_every_other_listing(
        kb: Any, caplog: pytest.LogCaptureFixture) -> None:
    store, ws, watcher = kb
    notes = [ws / f"knowledge/domains/zebra-{i:02}.md" for i in range(12)]
    for i, note in enumerate(notes):
        _write(note, f"Zebra {i}", f"Zebra {i} has quagga stripes.")
    watcher.reconcile(notes)
    for note in notes:
        note.unlink()
    with caplog.at_level(logging.INFO, logger="kbstore.watch"):
        assert watcher.reconcile(notes).deleted == 12
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("deleting"))
    assert line.startswith("deleting 12 document(s) whose files are gone: domains/zebra-00.md")
    assert "domains/zebra-09.md" in line and "domains/zebra-10.md" not in line
    assert line.endswith("... and 2 more")


def test_rename_over_and_delete_then_create_are_edits(kb: Any) -> None:
    store, ws, watcher = kb
    note = ws / "knowledge/projects/picobot-memory-design.md"
    tmp = note.with_name(".picobot-memory-design.md.4f2a.tmp")
    _write(tmp, "Memory design", "Rewritten with narwhals.")
    os.replace(tmp, note)
    report = watcher.reconcile([tmp, note])  # one batch: temp created + moved, target changed
    assert (report.updated, report.deleted) == (1, 0)
    assert "narwhals" in store.get("projects/picobot-memory-design.md").body
    note.unlink()
    _write(note, "Memory design", "Recreated with axolotls.")
    report = watcher.reconcile([note])
    assert (report.updated, report.deleted) == (1, 0)
    assert "axolotls" in store.get("projects/picobot-memory-design.md").body


def test_a_missing_file_is_confirmed_after_the_settle(kb: Any) -> None:
    """Delete now, re-create a moment later (a save split over two batches):
    the document is not deleted in between."""
    store, ws, watcher = kb
    watcher.settle_s = 0.5
    note = ws / "knowledge/user/hobbies-and-weekends.md"
    saved = note.read_text()
    note.unlink()
    timer = _later(0.1, lambda: note.write_text(saved.replace("hiking", "kayaking")))
    report = watcher.reconcile([note])
    timer.join()
    assert report.deleted == 0 and report.updated == 1
    assert "kayaking" in store.get("user/hobbies-and-weekends.md").body


def test_a_partial_write_is_read_again_and_a_broken_file_keeps_the_stored_copy(kb: Any) -> None:
    store, ws, watcher = kb
    watcher.settle_s = 0.3
    note = ws / "knowledge/domains/docker-basics.md"
    good = note.read_text()
    note.write_text(good[:40])  # the editor has written part of it
    timer = _later(0.1, lambda: note.write_text(good.replace("volumes", "bind mounts")))
    report = watcher.reconcile([note])
    timer.join()
    assert report.updated == 1 and not report.skipped
    assert "bind mounts" in store.get("domains/docker-basics.md").body

    watcher.settle_s = 0.01
    note.write_text("---\ntitle: [never closed\n---\nbody\n")
    report = watcher.reconcile([note])
    assert [s.path for s in report.skipped] == ["domains/docker-basics.md"]
    assert "broken YAML" in report.skipped[0].reason
    assert "bind mounts" in store.get("domains/docker-basics.md").body  # kept, not deleted


def test_a_vanished_knowledge_folder_deletes_nothing(kb: Any,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    store, ws, watcher = kb
    (ws / "knowledge").rename(ws / "knowledge.moved")
    with caplog.at_level(logging.WARNING, logger="kbstore.watch"):
        report = watcher.reconcile([ws / "knowledge"])
    assert (report.deleted, report.kept) == (0, 31) and len(store) == 34
    assert "knowledge folder" in caplog.text and "kbstore import" in caplog.text
    assert watcher.reconcile_all().deleted == 0  # a start-up sync is no different
    (ws / "knowledge.moved").rename(ws / "knowledge")
    report = watcher.reconcile([ws / "knowledge"])
    assert (report.deleted, report.unchanged) == (0, 34)


def test_most_documents_vanishing_at_once_is_kept(kb: Any) -> None:
    store, ws, watcher = kb
    files = [file for _rel, file, _r in scan_workspace(ws)][:20]
    for file in files:
        file.unlink()
    report = watcher.reconcile(files)
    assert (report.deleted, report.kept) == (0, 20) and len(store) == 34


def test_a_slow_mass_deletion_is_held_like_one_batch(kb: Any) -> None:
    """Files vanishing a few at a time (a sync tool, a slow rm -r, a branch
    switch) are counted together: the watcher stops where `kbstore import`
    of the same folder would have stopped, not after the last file."""
    store, ws, watcher = kb
    files = [file for _rel, file, _r in scan_workspace(ws)]
    reports = []
    for file in files:
        file.unlink()
        reports.append(watcher.reconcile([file]))
    deleted = sum(r.deleted for r in reports)
    assert deleted < len(files) / 2 and len(store) == 34 - deleted
    assert sum(r.kept for r in reports) == len(files) - deleted
    watcher.mass_window_s = 0.0  # long after: one more removal is an ordinary one again
    _write(ws / "knowledge/user/late.md", "Late", "written and removed later")
    assert watcher.reconcile([ws / "knowledge/user/late.md"]).added == 1
    (ws / "knowledge/user/late.md").unlink()
    assert watcher.reconcile([ws / "knowledge/user/late.md"]).deleted == 1


def test_a_subfolder_turned_into_a_dangling_symlink_is_kept(kb: Any, tmp_path: Path) -> None:
    """A folder moved to another disk and linked back: when that disk is not
    mounted the link dangles; an import keeps its documents, so does watch."""
    store, ws, watcher = kb
    folder = ws / "knowledge/projects/work"
    for i in range(3):
        _write(folder / f"w{i}.md", f"Work {i}", f"work note {i}")
    assert watcher.reconcile([folder]).added == 3
    shutil.move(folder, tmp_path / "disk-work")
    folder.symlink_to(tmp_path / "unmounted" / "work", target_is_directory=True)
    report = watcher.reconcile([folder])
    assert (report.deleted, report.kept) == (0, 3) and len(store) == 37


def test_a_section_folder_removed_or_moved_is_kept_until_pruned(
        kb: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A whole section folder vanishing (moved, unmounted, mid-sync) is held
    back like an import of a folder without it; files removed from a folder
    that is still there are deleted."""
    store, ws, watcher = kb
    held = [p for p in store.paths() if p.startswith("journal/")]
    shutil.move(ws / "knowledge/journal", ws / "journal-archive")
    with caplog.at_level(logging.WARNING, logger="kbstore.watch"):
        report = watcher.reconcile([ws / "knowledge/journal"])  # only the folder's own event
    assert len(held) == 7 and (report.deleted, report.kept) == (0, 7)
    assert len(store) == 34 and "knowledge/journal" in caplog.text
    assert "--prune" in caplog.text
    shutil.move(ws / "journal-archive", ws / "knowledge/journal")
    assert watcher.reconcile([ws / "knowledge/journal"]).unchanged == 7
    sub = held[:2]
    for rel in sub:
        (ws / "knowledge" / rel).unlink()
    report = watcher.reconcile([ws / "knowledge" / rel for rel in sub])
    assert report.deleted == 2 and len(store) == 32


def test_deleting_the_only_document_still_works(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    note = ws / "knowledge/user/only.md"
    _write(note, "Only", "the one note")
    with KnowledgeStore.open(tmp_path / "kb.sqlite", FakeEmbedder(64), hype=False) as store:
        watcher = Watcher(ws, store, settle_s=0.01)
        assert watcher.reconcile_all().added == 1
        note.unlink()
        assert watcher.reconcile([note]).deleted == 1 and len(store) == 0


# -- real processes and real file events ----------------------------------------------


def _kbstore(*args: str) -> list[str]:
    return [sys.executable, "-m", "kbstore", *args]


def _poll(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {timeout:.0f} s: {what}")
        time.sleep(0.1)


def _reconciles(log: Path) -> int:
    return len(re.findall(r"reconcile #\d+", log.read_text()))


def _start_watcher(ws: Path, db: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        proc = subprocess.Popen(_kbstore("watch", str(ws), "--db", str(db), "--no-hype",
                                         "--debounce-ms", "500"),
                                stdout=subprocess.DEVNULL, stderr=out)
    _poll(lambda: _reconciles(log) >= 1 or proc.poll() is not None, "the initial sync")
    assert proc.poll() is None, log.read_text()
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def test_watch_process_follows_real_edits(kb: Any, tmp_path: Path) -> None:
    store, ws, _ = kb
    log = tmp_path / "watch.log"
    proc = _start_watcher(ws, store.path, log)
    try:
        note = ws / "knowledge/domains/zebras.md"
        rel = "domains/zebras.md"

        def body(path: str) -> str:
            doc = store.get(path)
            return "" if doc is None else doc.body

        def top(query: str) -> str | None:
            hits = store.search(query, limit=1)
            return hits[0].path if hits else None

        _write(note, "Zebra notes", "Zebras have quagga stripes.")
        _poll(lambda: top("quagga stripes") == rel, "a created note")

        tmp = note.with_name(".zebras.md.swx3")  # write a temp file, rename it over the note
        _write(tmp, "Zebra notes", "Zebras meet narwhals.")
        os.replace(tmp, note)
        _poll(lambda: "narwhals" in body(rel), "a rename-over save")

        note.unlink()  # delete + create
        _write(note, "Zebra notes", "Zebras meet axolotls.")
        _poll(lambda: "axolotls" in body(rel), "a delete + create save")

        before = _reconciles(log)
        for n in range(100):
            _write(note, "Zebra notes", f"Edit {n} of the pangolin list.")
        _poll(lambda: "Edit 99 " in body(rel), "the last of 100 rapid edits")
        time.sleep(1.5)  # let any trailing batch be logged before counting
        burst = _reconciles(log) - before
        assert 1 <= burst <= 10, log.read_text()
        print(f"\n100 rapid edits -> {burst} reconcile(s)")

        note.unlink()
        _poll(lambda: store.get(rel) is None, "a deleted note")
        assert len(store) == 34
    finally:
        code = _stop(proc)
    text = log.read_text()
    assert code == 0 and "stopped after" in text and "Traceback" not in text, text


def test_mcp_server_with_watch_sees_edits_made_on_disk(kb: Any, tmp_path: Path) -> None:
    store, ws, _ = kb
    note = ws / "knowledge/user/coffee.md"
    args = ["-m", "kbstore", "mcp", "--db", str(store.path), "--workspace", str(ws),
            "--no-hype", "--watch", "--debounce-ms", "300"]

    async def main() -> tuple[Any, Any]:
        with (tmp_path / "server.log").open("w") as log:
            params = StdioServerParameters(command=sys.executable, args=args)
            async with Client(stdio_client(params, errlog=log)) as client:
                status = (await client.call_tool("status", {})).structured_content
                _write(note, "Coffee", "Lena drinks cortado, never decaf.")
                deadline = time.monotonic() + 60
                while True:
                    found = await client.call_tool("search", {"query": "cortado decaf"})
                    hits = found.structured_content["hits"]
                    if hits and hits[0]["path"] == "user/coffee.md":
                        return status, hits[0]
                    assert time.monotonic() < deadline, "the edit never reached the index"
                    await anyio.sleep(0.2)

    status, hit = anyio.run(main)
    assert status["watching"] is True and hit["title"] == "Coffee"
    assert "Traceback" not in (tmp_path / "server.log").read_text()


# The soak below ends once every kind of work ran past its asserted bound
# (calls and imports with a margin), never before MIN_SOAK_S.
MIN_SOAK_S = 12
MAX_SOAK_S = 30


@pytest.mark.slow
def test_two_servers_a_watcher_and_imports_share_one_database(kb: Any, tmp_path: Path) -> None:
    """Writes and reads from four processes on one file until each kind of
    work has run past the bounds asserted below (at least MIN_SOAK_S, at most
    MAX_SOAK_S): no errors, above all no 'database is locked'."""
    store, ws, _ = kb
    db = store.path
    watch_log = tmp_path / "watch.log"
    watcher = _start_watcher(ws, db, watch_log)
    errors: list[str] = []
    counts = {"calls": 0, "imports": 0, "edits": 0}
    stop = threading.Event()
    sample_paths = sorted(store.paths())

    def imports() -> None:
        while not stop.is_set():
            proc = subprocess.run(_kbstore("import", "--db", str(db), "--no-hype", str(ws)),
                                  capture_output=True, text=True, timeout=120)
            counts["imports"] += 1
            if proc.returncode != 0:
                errors.append(f"import: {proc.stderr.strip()}")

    def edits() -> None:
        note = ws / "knowledge/domains/sqlite-full-text-search.md"
        original = note.read_text()
        n = 0
        while not stop.wait(0.4):
            n += 1
            note.write_text(original.replace("BM25", f"BM25 (edit {n})"))
            counts["edits"] += 1

    async def check(client: Client, name: str, args: dict[str, Any]) -> Any:
        result = await client.call_tool(name, args)
        counts["calls"] += 1
        if result.is_error:
            errors.append(f"{name}: {result.content[0].text}")
        return result.structured_content

    started = time.monotonic()

    def soaking() -> bool:
        elapsed = time.monotonic() - started
        enough = (counts["calls"] > 2 * 100 and counts["imports"] >= 3 + 1
                  and counts["edits"] > 20)
        return elapsed < MAX_SOAK_S and (elapsed < MIN_SOAK_S or not enough)

    async def writer(client: Client, topic: str) -> None:
        mine: list[str] = []
        n = 0
        while soaking():
            n += 1
            note = await check(client, "store", {"topic": topic, "title": f"{topic} load {n}",
                                                 "content": f"Load note {n} about lemurs."})
            if note:
                mine.append(note["path"])
                await check(client, "search", {"query": f"{topic} load {n} lemurs"})
            if len(mine) > 3:
                await check(client, "delete", {"path": mine.pop(0)})

    async def reader(client: Client) -> None:
        rng = random.Random(7)
        while soaking():
            await check(client, "search", {"query": rng.choice(["deploy", "sourdough", "git",
                                                                "sensor battery"])})
            await check(client, "get", {"path": rng.choice(sample_paths)})
            await check(client, "list", {"recent": 5})

    async def servers() -> None:
        with (tmp_path / "a.log").open("w") as log_a, (tmp_path / "b.log").open("w") as log_b:
            args = ["-m", "kbstore", "mcp", "--db", str(db), "--workspace", str(ws), "--no-hype"]
            a = Client(stdio_client(StdioServerParameters(command=sys.executable, args=args),
                                    errlog=log_a))
            b = Client(stdio_client(StdioServerParameters(command=sys.executable, args=args),
                                    errlog=log_b))
            async with a, b, anyio.create_task_group() as tg:
                tg.start_soon(writer, a, "projects")
                tg.start_soon(writer, b, "user")
                tg.start_soon(reader, b)

    threads = [threading.Thread(target=imports), threading.Thread(target=edits)]
    for thread in threads:
        thread.start()
    try:
        anyio.run(servers)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        code = _stop(watcher)
    logs = {p.name: p.read_text() for p in (watch_log, tmp_path / "a.log", tmp_path / "b.log")}
    for name, text in logs.items():
        for bad in ("locked", "Traceback", "ERROR"):
            if bad in text:
                errors.append(f"{name}: {bad}")
    assert code == 0
    assert errors == [], errors[:10]
    assert counts["calls"] > 100 and counts["imports"] >= 3 and counts["edits"] > 20, counts
    print(f"\n{time.monotonic() - started:.0f} s on one database: {counts}, "
          f"{_reconciles(watch_log)} watcher reconciles")
    # Afterwards the index holds exactly the workspace's documents.
    subprocess.run(_kbstore("import", "--db", str(db), "--no-hype", str(ws)), check=True,
                   capture_output=True, timeout=120)
    on_disk = {rel for rel, _f, reason in scan_workspace(ws) if not reason}
    assert set(store.paths()) == on_disk

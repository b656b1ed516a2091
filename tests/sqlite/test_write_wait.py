"""A writer queued behind another process's write lock says so on stderr
after a moment, once, and then goes on as before (it used to wait silently,
~38 s in one report)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kbstore import FakeEmbedder, KnowledgeStore

ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import sys, time
from kbstore import KnowledgeStore
with KnowledgeStore.open(sys.argv[1], hype=False) as store, store.backend.write_lock():
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "KBSTORE_HYPE": "0"}


def _workspace(root: Path) -> Path:
    (root / "projects").mkdir(parents=True)
    for i in range(3):
        (root / "projects" / f"n{i}.md").write_text(f"---\ntitle: n{i}\n---\nbody {i}\n")
    return root


def _import(db: Path, ws: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kbstore", "import", "--db", str(db), str(ws)],
                          capture_output=True, text=True, env=_env(), timeout=120)
    return done, time.monotonic() - started


def test_a_queued_writer_says_it_is_waiting(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    KnowledgeStore.open(db, FakeEmbedder(16), hype=False).close()
    ws = _workspace(tmp_path / "ws")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db), "4"], env=_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        done, took = _import(db, ws)
    finally:
        holder.wait(timeout=60)
    assert done.returncode == 0, done.stderr
    notice = f"kbstore: waiting for another kbstore process to finish writing to {db} ..."
    assert done.stderr.count(notice) == 1, done.stderr
    assert took >= 2  # it really waited for the holder, then imported
    assert done.stdout.startswith("added 3,")


def test_an_unqueued_writer_says_nothing_about_waiting(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    KnowledgeStore.open(db, FakeEmbedder(16), hype=False).close()
    done, _ = _import(db, _workspace(tmp_path / "ws"))
    assert done.returncode == 0 and "waiting" not in done.stderr, done.stderr


def test_a_writer_kept_out_past_the_busy_timeout_stops_with_one_clear_line(
        tmp_path: Path) -> None:
    """The lock is never released in time: the import gives up after about
    KBSTORE_BUSY_TIMEOUT_MS (it retried 50 times the timeout, ~1 minute for
    1 s, ~8 minutes for the default 10 s) and says why and what to do
    instead of a bare 'database is locked'; the API raises a KBStoreError."""
    from kbstore import KBStoreError

    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, FakeEmbedder(16), hype=False) as store:
        store.upsert("projects/kept.md", title="kept", body="stored before the lock")
    ws = _workspace(tmp_path / "ws")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db), "20"], env=_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "kbstore", "import", "--db", str(db),
                               "--no-prune", str(ws)], capture_output=True, text=True,
                              env={**_env(), "KBSTORE_BUSY_TIMEOUT_MS": "1000"}, timeout=120)
        took = time.monotonic() - started
        os.environ["KBSTORE_BUSY_TIMEOUT_MS"] = "1000"
        api_started = time.monotonic()
        try:  # opening for writes takes the lock too
            with KnowledgeStore.open(db, FakeEmbedder(16), hype=False) as store:
                store.upsert("projects/api.md", title="api", body="under the lock")
        except KBStoreError as exc:
            api_error, api_took = str(exc), time.monotonic() - api_started
        finally:
            del os.environ["KBSTORE_BUSY_TIMEOUT_MS"]
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert done.returncode == 1 and took < 10, (took, done.stderr)
    error = done.stderr.strip().splitlines()[-1]
    assert str(db) in error and "KBSTORE_BUSY_TIMEOUT_MS" in error, done.stderr
    assert "run the same command again" in error and "Traceback" not in done.stderr
    assert api_took < 8 and "KBSTORE_BUSY_TIMEOUT_MS" in api_error
    with KnowledgeStore.open(db, read_only=True) as store:
        assert store.paths() == ["projects/kept.md"]

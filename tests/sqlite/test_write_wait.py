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

"""PostgreSQL: a writer queued behind another process's knowledge-base lock
says so on stderr after a moment, once, as on SQLite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from kbstore import FakeEmbedder, KnowledgeStore
from tests.sqlite.test_write_wait import HOLD, _env, _workspace


def test_a_queued_writer_says_it_is_waiting(pg_kb: Any, tmp_path: Path) -> None:
    location = f"{pg_kb.url}{'&' if '?' in pg_kb.url else '?'}kb={pg_kb.name}"
    KnowledgeStore.open(location, FakeEmbedder(16), hype=False).close()
    ws = _workspace(tmp_path / "ws")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, location, "4"], env=_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        done = subprocess.run([sys.executable, "-m", "kbstore", "import", "--db", location,
                               str(ws)], capture_output=True, text=True, env=_env(), timeout=120)
    finally:
        holder.wait(timeout=60)
    assert done.returncode == 0, done.stderr
    notice = (f"kbstore: waiting for another kbstore process to finish writing to knowledge "
              f"base {pg_kb.schema} ...")
    assert done.stderr.count(notice) == 1, done.stderr
    assert done.stdout.startswith("added 3,")

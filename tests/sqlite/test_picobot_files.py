"""picobot's KnowledgeBase keeps its index in one SQLite file,
``data_dir/kb.sqlite``, created on first use."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from kbstore import FakeEmbedder
from kbstore import picobot as picobot_module
from kbstore.picobot import KnowledgeBase

_RESULT = re.compile(r"^\d+\. .*\(([^()]+)\)$")


def paths(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := _RESULT.match(line))]


def test_the_index_is_data_dir_kb_sqlite_created_on_first_use(tmp_path: Path) -> None:
    kb = KnowledgeBase(base_path=tmp_path / "kb", data_dir=tmp_path / "d",
                       embedder=FakeEmbedder(64), hype=False)
    kb.ensure_structure()
    assert not (tmp_path / "d").exists()  # nothing opened yet
    assert kb.db_path == tmp_path / "d" / "kb.sqlite"
    rel = kb.store("user", "Coffee", "Prefers flat white.", tags=["coffee"])
    assert kb.db_path.is_file()
    assert stat.S_IMODE(kb.db_path.stat().st_mode) == 0o600  # private memory
    assert paths(kb.search("coffee"))[0] == rel
    kb.close()


def test_picobots_existing_test_pattern_works_offline(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """picobot's tests build ``KnowledgeBase(workspace=tmp_path)``; one autouse
    fixture redirecting the defaults keeps them offline and out of ~/.picobot."""
    monkeypatch.setattr(picobot_module, "DEFAULT_DATA_DIR", tmp_path / "data")
    monkeypatch.setattr(picobot_module, "DEFAULT_EMBEDDER", "fake")
    kb = KnowledgeBase(workspace=tmp_path, hype=False)
    kb.ensure_structure()
    rel = kb.store("projects", "Home server", "Runs picobot under systemd.", tags=["infra"])
    assert paths(kb.search("systemd"))[0] == rel
    assert kb.db_path == tmp_path / "data" / "kb.sqlite" and kb.db_path.is_file()
    assert kb.knowledge_store.embedder.fingerprint()["name"] == "fake"
    kb.close()

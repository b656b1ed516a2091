"""The tools people already use on SQLite files see kbstore's index:
sqlite-utils' detect_fts()/search and Datasette's ?_search= (the README's
recipe, run for real on a Python that can load extensions)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore

SYSTEM_PYTHON = Path("/usr/bin/python3")


def _store(path: Path) -> None:
    with KnowledgeStore.open(path, FakeEmbedder(16), hype=False) as store:
        store.upsert("domains/bread.md", title="Sourdough", body="feed the starter twice a day")
        store.upsert("domains/deploy.md", title="Deploys", body="roll back with the previous sha")


def test_sqlite_utils_detects_the_fts_index_and_searches_it(tmp_path: Path) -> None:
    import sqlite_utils

    db_file = tmp_path / "kb.sqlite"
    _store(db_file)
    db = sqlite_utils.Database(db_file)
    assert db["documents"].detect_fts() == "documents_fts"
    found = [r["path"] for r in db["documents"].search("starter", columns=["path"])]
    assert found == ["domains/bread.md"]
    db.close()


def _can_load_extensions(python: Path) -> bool:
    probe = ("import sqlite3, sys; "
             "sys.exit(0 if hasattr(sqlite3.Connection, 'enable_load_extension') else 1)")
    return python.exists() and subprocess.run([str(python), "-c", probe]).returncode == 0


@pytest.mark.slow
def test_datasette_recipe_from_the_readme(tmp_path: Path) -> None:
    """README: a venv of a Python that can load extensions, datasette +
    datasette-sqlite-vec from the registry, then ?_search= uses our FTS."""
    if not _can_load_extensions(SYSTEM_PYTHON):
        pytest.skip(f"{SYSTEM_PYTHON} is missing or cannot load SQLite extensions")
    venv = tmp_path / "ds"
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "datasette",
                    "datasette-sqlite-vec"], check=True, timeout=600)
    db_file = tmp_path / "kb.sqlite"
    _store(db_file)
    out = subprocess.run([str(venv / "bin" / "datasette"), str(db_file), "--get",
                          "/kb/documents.json?_search=starter&_shape=array&_col=path"],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    assert [row["path"] for row in json.loads(out)] == ["domains/bread.md"]

"""The tools people already use on SQLite files see kbstore's index:
sqlite-utils' detect_fts()/search and Datasette's ?_search= (the README's
recipe, run for real with the datasette it installs, when there is one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore


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


DATASETTE_ENV = "KBSTORE_TEST_DATASETTE"
# Where the README's recipe installs it.
RECIPE_DATASETTE = Path.home() / ".venvs" / "ds" / "bin" / "datasette"


def _datasette() -> tuple[Path | None, str]:
    """A datasette that can open a kbstore file -- $KBSTORE_TEST_DATASETTE, the
    README recipe's venv, or the one on PATH, with datasette-sqlite-vec (a
    file with a vec0 table is refused without it) -- or None and the reason.
    The test never installs one: that needs the registry on every run."""
    named = os.environ.get(DATASETTE_ENV)
    candidates = [Path(named)] if named else [RECIPE_DATASETTE]
    if not named and shutil.which("datasette"):
        candidates.append(Path(str(shutil.which("datasette"))))
    found = [c for c in candidates if c.is_file()]
    if not found:
        where = named or f"{RECIPE_DATASETTE} or on PATH"
        return None, (f"datasette is not installed ({where}); the README's recipe installs "
                      f"it, or set {DATASETTE_ENV}")
    plugins = subprocess.run([str(found[0]), "plugins"], capture_output=True, text=True,
                             timeout=120)
    if plugins.returncode != 0 or "datasette-sqlite-vec" not in plugins.stdout:
        return None, f"{found[0]} has no datasette-sqlite-vec plugin"
    return found[0], ""


def test_datasette_recipe_from_the_readme(tmp_path: Path) -> None:
    """README: datasette + datasette-sqlite-vec on a Python that can load
    extensions, then ?_search= uses our FTS. Runs with the datasette the
    recipe installed (or $KBSTORE_TEST_DATASETTE); skipped without one."""
    datasette, reason = _datasette()
    if datasette is None:
        pytest.skip(reason)
    db_file = tmp_path / "kb.sqlite"
    _store(db_file)
    out = subprocess.run([str(datasette), str(db_file), "--get",
                          "/kb/documents.json?_search=starter&_shape=array&_col=path"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert [row["path"] for row in json.loads(out.stdout)] == ["domains/bread.md"]

"""Tags edited in the sqlite3 shell (a plain UPDATE of documents.tags): the
UPDATE trigger keeps the exact-tag rows in step, with SQLite's lower() --
which folds ASCII letters only, as SQLite without ICU has no other. The
key rule is Python's (kbstore.model.tag_key, the query's words): an ASCII
tag edited in the shell is right at once; a tag with a non-ASCII capital
("ÉTÉ", "ΚΟΣΜΟΣ") gets a row the query cannot meet, which `kbstore doctor`
reports (tag_rows) and --fix rewrites with the Python rule."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.doctor import diagnose, fix

SQLITE3 = shutil.which("sqlite3")
pytestmark = pytest.mark.skipif(SQLITE3 is None, reason="no sqlite3 shell on this machine")


def _shell(db: Path, sql: str) -> str:
    out = subprocess.run([str(SQLITE3), str(db), sql], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _tag_rank(store: KnowledgeStore, query: str, path: str) -> int | None:
    hit = next(h for h in store.search(query, explain=True) if h.path == path)
    rank: int | None = hit.explain["ranks"].get("frontmatter")
    return rank


def _problems(store: KnowledgeStore) -> set[str]:
    return {c.name for c in diagnose(store).problems}


def test_a_shell_edit_of_tags_is_followed_and_doctor_repairs_what_sql_cannot_fold(
        tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        store.upsert("domains/summer.md", title="Notes", body="a season", tags=["misc"])
        store.upsert("domains/other.md", title="Other", body="été kosmos deploy κοσμος",
                     tags=["misc"])
    _shell(db, "UPDATE documents SET tags = json_array('Deploy', ' Ops ') "
               "WHERE path = 'domains/summer.md'")
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        assert _tag_rank(store, "deploy", "domains/summer.md") == 1
        assert _tag_rank(store, "ops", "domains/summer.md") == 1
        # (the tags are embedded too: doctor says the vector is stale, not the tag rows)
        assert _problems(store) == {"stale_vectors"}

    _shell(db, "UPDATE documents SET tags = json_array('Deploy', 'ÉTÉ', 'ΚΟΣΜΟΣ') "
               "WHERE path = 'domains/summer.md'")
    rows = _shell(db, "SELECT tag FROM document_tags WHERE doc_id = "
                      "(SELECT id FROM documents WHERE path = 'domains/summer.md') ORDER BY tag")
    assert rows.split("\n")[:3] == ["deploy", "ÉtÉ", "ΚΟΣΜΟΣ"]  # SQLite's ASCII-only lower()
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        assert _tag_rank(store, "deploy", "domains/summer.md") == 1
        assert _tag_rank(store, "été", "domains/summer.md") is None
        assert _problems(store) == {"stale_vectors", "tag_rows"}
        assert fix(store).ok
        assert diagnose(store).ok
        assert _tag_rank(store, "été", "domains/summer.md") == 1
        assert _tag_rank(store, "κοσμος", "domains/summer.md") == 1
        assert _tag_rank(store, "deploy", "domains/summer.md") == 1

"""Tags edited in the sqlite3 shell (a plain UPDATE of documents.tags): the
UPDATE trigger keeps the exact-tag rows in step, with SQLite's lower() --
which folds ASCII letters only, as SQLite without ICU has no other. The
key rule is Python's (kbstore.model.tag_key, the query's words): an ASCII
tag edited in the shell is right at once; a tag with a non-ASCII capital
("ÉTÉ", "ΚΟΣΜΟΣ") gets a row the query cannot meet, which `kbstore doctor`
reports (tag_rows) and --fix rewrites with the Python rule."""

from __future__ import annotations

import json
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


def test_non_string_tags_from_the_shell_are_reported_and_nothing_else_goes_blind(
        tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    """'[1, "Y"]' typed in the shell: doctor names the document under
    invalid_tags and still runs every other check (they used to fail as one
    "could not compare the tables"); --fix re-embeds it (a non-string tag is
    embedded as its JSON text), says it left the tags alone, and search and
    export keep the document as stored."""
    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        store.upsert("domains/one.md", title="One", body="alpha beta", tags=["x"])
        store.upsert("domains/two.md", title="Two", body="gamma", tags=["y"])
    _shell(db, "UPDATE documents SET tags = '[1, \"Y\"]' WHERE path = 'domains/one.md'")
    _shell(db, "DELETE FROM document_tags WHERE doc_id = "
               "(SELECT id FROM documents WHERE path = 'domains/two.md')")

    out = run_cli("doctor", "--db", db, "--json")
    assert out.exit_code == 1
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert "tables" not in checks
    assert checks["invalid_tags"]["count"] == 1
    assert checks["invalid_tags"]["sample"] == ["domains/one.md"]
    assert not checks["invalid_tags"]["fixable"]
    assert checks["tag_rows"]["count"] == 1  # the other document's damage is still seen
    assert checks["stale_vectors"]["count"] == 1  # the edited tags are embedded

    out = run_cli("doctor", "--db", db, "--fix")
    assert out.exit_code == 1
    assert "left the tags of 1 document(s) as they are" in out.stdout
    assert "domains/one.md" in out.stdout
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        assert _problems(store) == {"invalid_tags"}
        assert store.get("domains/one.md").tags == [1, "Y"]  # type: ignore[union-attr]
        hit = next(h for h in store.search("alpha", explain=True) if h.path == "domains/one.md")
        assert hit.explain["ranks"]["fts"] == 1
        # the exact-tag rows: --fix rewrote the other document's, kept "y" here
        assert _tag_rank(store, "y", "domains/one.md") is not None
        assert _tag_rank(store, "y", "domains/two.md") is not None

    export = tmp_path / "out.jsonl"
    assert run_cli("export", "--db", db, "--format", "jsonl", export).exit_code == 0
    records = {r["path"]: r for r in map(json.loads, export.read_text().splitlines())}
    assert records["domains/one.md"]["tags"] == [1, "Y"]
    assert records["domains/one.md"]["body"] == "alpha beta"

    _shell(db, "UPDATE documents SET tags = '[\"1\", \"Y\"]' WHERE path = 'domains/one.md'")
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        assert fix(store).ok

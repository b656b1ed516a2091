"""The sqlite3-shell script (`kbstore search --shell`) is safe for any path and
ranks exactly like search(); the WAL file stays bounded."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.cli import _register, cli

_register()
SQLITE3 = shutil.which("sqlite3")


def _fill(db: Path) -> None:
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        for i in range(12):
            store.upsert(f"projects/n{i}.md", title=f"note {i}",
                         body=f"deploy rollback step {i} " + "filler " * i, tags=["ops"])
        store.upsert("journal/2026-01-02-deploy.md", title="deploy day",
                     body="rollback after a failed deploy", updated="2026-01-02")


def _script(db: Path, query: str) -> str:
    result = CliRunner().invoke(cli, ["search", "--db", str(db), query, "--shell"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", ["kb.sqlite", "my notes/kb 'one'.sqlite",
                                  "evil\n.shell touch PWNED\n.sqlite"])
def test_the_script_cannot_run_anything_a_path_or_query_smuggles_in(tmp_path: Path,
                                                                   name: str) -> None:
    db = tmp_path / name
    db.parent.mkdir(parents=True, exist_ok=True)
    _fill(db)
    script = _script(db, "rollback\n.shell touch PWNED2\n")
    dot_lines = [line for line in script.splitlines() if line.startswith(".")]
    assert [line.split()[0] for line in dot_lines] == [".load", ".parameter", ".mode"]
    if SQLITE3 is None:
        pytest.skip("no sqlite3 shell on this machine")
    out = subprocess.run([SQLITE3, str(db)], input=script, capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()
    assert "projects/n" in out.stdout


@pytest.mark.skipif(SQLITE3 is None, reason="no sqlite3 shell on this machine")
def test_the_script_ranks_like_search_with_the_files_stored_defaults(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    _fill(db)
    conn = sqlite3.connect(db)  # a database made with other fusion defaults
    conn.execute("UPDATE meta SET value = json_set(value, '$.k_rrf', 3.0, "
                 "'$.boost_journal', 5.0) WHERE key = 'fusion'")
    conn.commit()
    conn.close()
    with KnowledgeStore.open(db, read_only=True) as store:
        expected = [h.path for h in store.search("deploy rollback step", now="2026-01-03")]
        script = store.shell_script("deploy rollback step", now="2026-01-03")
    out = subprocess.run([SQLITE3, "-list", str(db)], input=script.replace(".mode box", ""),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    shell_paths = [line.split("|")[1] for line in out.stdout.splitlines() if "|" in line]
    assert shell_paths == expected
    assert expected[0] == "journal/2026-01-02-deploy.md"  # the stored boost counts


def test_the_wal_file_is_truncated_after_a_long_reader_lets_go(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    _fill(db)
    wal = Path(f"{db}-wal")
    reader = KnowledgeStore.open(db, read_only=True)
    store = KnowledgeStore.open(db, FakeEmbedder(64), hype=False)
    try:
        conn = reader.backend.conn
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM documents").fetchone()  # hold a snapshot
        # ~0.22 MB of WAL per document (its chunk vectors): 30 give ~6.6 MB, 3x the bound
        store.upsert_many([store_doc(i, "x " * 20000) for i in range(30)])
        grown = wal.stat().st_size
        assert grown > 2 * 1024 * 1024  # the reader pinned every page
        conn.execute("COMMIT")
        store.import_directory(_empty_ws(tmp_path), prune=False)  # a bulk write checkpoints
        assert wal.stat().st_size < grown / 4
        assert int(store.backend.conn.execute("PRAGMA journal_size_limit").fetchone()[0]) > 0
    finally:
        reader.close()
        store.close()


def store_doc(i: int, body: str):
    from kbstore.documents import make_document

    return make_document(f"domains/big-{i}.md", title=f"big {i}", body=f"{i} {body}")


def _empty_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws" / "knowledge" / "domains"
    ws.mkdir(parents=True, exist_ok=True)
    return ws.parent.parent

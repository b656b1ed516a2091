"""Without the optional extra (psycopg, pgvector), a postgresql:// location
fails with one clear error naming ``kbstore[postgres]``; SQLite paths are
unaffected. The missing packages are simulated: a ``None`` entry in
sys.modules makes their import raise ImportError."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.errors import BackendUnavailableError

URL = "postgresql://someone:secret@db.internal/agents?kb=team"


@pytest.fixture
def without_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name.startswith(("kbstore.backends.postgres", "psycopg", "pgvector")):
            monkeypatch.delitem(sys.modules, name)
    for name in ("psycopg", "pgvector", "pgvector.psycopg"):
        monkeypatch.setitem(sys.modules, name, None)


def test_opening_a_url_names_the_extra(without_extra: None) -> None:
    with pytest.raises(BackendUnavailableError) as info:
        KnowledgeStore.open(URL, FakeEmbedder(16), hype=False)
    assert "pip install 'kbstore[postgres]'" in str(info.value)
    assert "secret" not in str(info.value)


def test_cli_gives_one_line_naming_the_extra(without_extra: None) -> None:
    from kbstore.cli import _register, cli

    _register()
    result = CliRunner().invoke(cli, ["status", "--db", URL])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert "kbstore[postgres]" in lines[0] and "secret" not in lines[0]


def test_a_path_still_opens_sqlite(without_extra: None, tmp_path: Path) -> None:
    with KnowledgeStore.open(tmp_path / "kb.sqlite", FakeEmbedder(16), hype=False) as store:
        store.upsert("notes/a.md", title="A", body="works without the extra")
        assert store.paths() == ["notes/a.md"]

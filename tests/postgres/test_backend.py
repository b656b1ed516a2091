"""PostgresBackend through the public API and the CLI, beyond the contract
suite: the URL form (knowledge base key, no password anywhere), `search
--shell` in psql, status, doctor finding and repairing damage made with
plain SQL, and the picobot adapter on a URL."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.postgres.connection import parse
from kbstore.doctor import diagnose, fix
from kbstore.picobot import KnowledgeBase
from tests import pg_server


@pytest.fixture
def kb_url(pg_url: str, sample_workspace: Path) -> str:
    url = pg_server.kb_url(pg_url, pg_server.unique_kb_name("be"))
    with KnowledgeStore.open(url, FakeEmbedder(64), hype=False) as store:
        store.import_directory(sample_workspace)
    return url


def _sql(url: str, statement: str, *args: object) -> list[tuple]:
    target = parse(url)
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{target.schema}", public')
        cur = conn.execute(statement, args or None)
        return cur.fetchall() if cur.description else []


def test_the_url_names_the_knowledge_base_and_never_shows_the_password() -> None:
    target = parse("postgresql://agent:s3cret@db.example.net:5432/team?sslmode=require&kb=ops")
    assert (target.kb, target.schema) == ("ops", "kbstore_ops")
    assert "s3cret" not in target.location and "kb=" not in target.conninfo
    assert target.location == "postgresql://agent@db.example.net:5432/team?sslmode=require&kb=ops"
    assert parse("postgresql://h/db").kb == "default"
    with pytest.raises(Exception, match="knowledge base name"):
        parse("postgresql://h/db?kb=Bad-Name!")


def test_status_on_postgres(kb_url: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("status", "--db", kb_url, "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    name = parse(kb_url).kb
    assert info["backend"] == "postgres" and info["knowledge_base"] == name
    assert info["documents"] == info["doc_vectors"] > 30 and info["vectors"] >= info["documents"]
    assert info["pending_migrations"] == [] and info["file_bytes"] > 0
    assert info["embedder"]["dim"] == 64
    text = run_cli("status", "--db", kb_url).output
    assert f"backend         postgres, knowledge base {name}" in text


def test_search_shell_runs_in_psql_with_the_same_ranking(kb_url: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    query = "sqlite full text search ranking"
    script = run_cli("search", "--db", kb_url, query, "--shell", "--limit", "5")
    assert script.exit_code == 0, script.output
    conninfo = parse(kb_url).conninfo
    out = subprocess.run([str(pg_server.psql_path()), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                          "--csv", conninfo], input=script.output, capture_output=True,
                         text=True, check=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    psql_paths = [row["path"] for row in rows]
    hits = run_cli("search", "--db", kb_url, query, "--json", "--limit", "5")
    api_paths = [json.loads(line)["path"] for line in hits.output.splitlines()]
    assert psql_paths == api_paths and len(api_paths) == 5


def test_doctor_finds_and_repairs_damage_on_postgres(kb_url: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    ids = [r[0] for r in _sql(kb_url, "SELECT id FROM documents ORDER BY id")]
    _sql(kb_url, "DELETE FROM vectors WHERE doc_id = %s AND slot = 0", ids[0])
    _sql(kb_url, "DELETE FROM fts_postings WHERE doc_id = %s", ids[1])
    _sql(kb_url, "DELETE FROM document_tags WHERE doc_id = ANY(%s)", ids)
    _sql(kb_url, "DELETE FROM meta WHERE key = 'fusion'")
    with KnowledgeStore.open(kb_url, read_only=True, hype=False) as store:
        found = {c.name for c in diagnose(store).problems}
    assert {"documents_missing_vectors", "fts_postings", "tag_rows", "meta_fusion"} <= found
    result = run_cli("doctor", "--db", kb_url)
    assert result.exit_code == 1  # problems found, nothing changed
    with KnowledgeStore.open(kb_url, hype=False) as store:
        after = fix(store)
        assert after.ok and after.problems == [], [c.name for c in after.problems]
        assert any("postings" in a for a in after.fixed)
        assert any("re-embedded 1" in a for a in after.fixed)
    assert _sql(kb_url, "SELECT count(*) FROM document_tags")[0][0] > 0
    assert run_cli("doctor", "--db", kb_url).exit_code == 0


def test_picobot_knowledge_base_on_a_url(pg_url: str, tmp_path: Path) -> None:
    url = pg_server.kb_url(pg_url, pg_server.unique_kb_name("pico"))
    kb = KnowledgeBase(base_path=tmp_path / "knowledge", data_dir=tmp_path / "data", hype=False,
                       embedder=FakeEmbedder(64), db=url)
    try:
        kb.store("projects", "Shed roof", "Torch-on felt over the OSB boards, two layers.")
        answer = kb.search("shed roof felt")
        assert "1. Shed roof (projects/shed-roof.md)" in answer
    finally:
        kb.close()
    assert not (tmp_path / "data" / "kb.sqlite").exists()  # the index is on the server
    with KnowledgeStore.open(url, read_only=True, hype=False) as store:
        assert [p for p in store.paths() if "shed" in p]


def test_doctor_leaves_a_running_reembed_alone_and_discards_an_interrupted_one(
        kb_url: str) -> None:
    from kbstore.backends.postgres import PostgresBackend
    from kbstore.embed import fingerprint_id

    other = FakeEmbedder(32)
    running = PostgresBackend.open(kb_url, mode="write")
    try:
        running.rebuild_begin(fingerprint_id(other.fingerprint()))  # staging + session lock
        with KnowledgeStore.open(kb_url, hype=False) as store:
            check = next(c for c in diagnose(store).checks if c.name == "rebuild_in_progress")
            assert check.count == 0 and "is running" in check.detail
            assert fix(store).fixed == []
            assert store.status()["rebuild_in_progress"] is True
    finally:
        running.close()  # the process "dies": its session and lock are gone
    with KnowledgeStore.open(kb_url, hype=False) as store:
        check = next(c for c in diagnose(store).checks if c.name == "rebuild_in_progress")
        assert check.count == 1 and "interrupted" in check.detail
        assert fix(store).fixed == ["discarded the vectors staged by an interrupted reembed"]
        assert store.status()["rebuild_in_progress"] is False


def _tag_rank(store: KnowledgeStore, query: str, path: str) -> int | None:
    hit = next(h for h in store.search(query, explain=True) if h.path == path)
    rank: int | None = hit.explain["ranks"]["frontmatter"]
    return rank


@contextlib.contextmanager
def _c_locale_database(server: pg_server.Server) -> Iterator[str]:
    """A new database with LC_CTYPE "C" (and pgvector), dropped afterwards."""
    from psycopg import sql

    name = f"kbstore_test_c_{pg_server.unique_kb_name()}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' "
                             "LC_COLLATE 'C' LC_CTYPE 'C'").format(sql.Identifier(name)))
    database = pg_server.with_database(server.url, name)
    try:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield database
    finally:
        pg_server.drop_database(database, server.url)


def test_tags_fold_as_python_lowers_them_whatever_the_database_locale(
        pg_server_handle: pg_server.Server) -> None:
    """Under LC_CTYPE "C" PostgreSQL's lower() folds ASCII only ("ÉTÉ" stays
    "ÉtÉ"): the backend writes the exact-tag rows itself with the query's
    rule, and a tag edited in psql (the trigger's lower()) is what doctor
    reports and --fix rewrites with that rule."""
    with _c_locale_database(pg_server_handle) as database:
        with psycopg.connect(database, autocommit=True) as conn:
            assert conn.execute("SELECT lower('ÉTÉ')").fetchone()[0] == "ÉtÉ"
        url = pg_server.kb_url(database, "clocale")
        with KnowledgeStore.open(url, FakeEmbedder(64), hype=False) as store:
            store.upsert("domains/summer.md", title="Notes", body="a season", tags=["ÉTÉ"])
            store.upsert("domains/other.md", title="Other", body="été κόσμος", tags=["x"])
            assert diagnose(store).ok
            assert _tag_rank(store, "été", "domains/summer.md") == 1
        _sql(url, "UPDATE documents SET tags = '[\"ΚΌΣΜΟΣ\"]' WHERE path = 'domains/summer.md'")
        assert sorted(_sql(url, "SELECT tag FROM document_tags")) == [("x",), ("ΚΌΣΜΟΣ",)]
        with KnowledgeStore.open(url, FakeEmbedder(64), hype=False) as store:
            assert "tag_rows" in {c.name for c in diagnose(store).problems}
            assert fix(store).ok
            assert sorted(_sql(url, "SELECT tag FROM document_tags")) == [("x",), ("κόσμος",)]
            assert _tag_rank(store, "κόσμος", "domains/summer.md") == 1


def test_non_string_tags_edited_in_psql_are_reported_and_the_rest_still_checked(
        kb_url: str) -> None:
    """'[1, "Y"]' stored in psql: doctor names the document (invalid_tags)
    instead of failing every row check, --fix re-embeds it and leaves the tags
    as stored, and search still finds it."""
    _sql(kb_url, "UPDATE documents SET tags = '[1, \"Y\"]' "
                 "WHERE id = (SELECT min(id) FROM documents)")
    path = _sql(kb_url, "SELECT path FROM documents WHERE tags = '[1, \"Y\"]'")[0][0]
    with KnowledgeStore.open(kb_url, FakeEmbedder(64), hype=False) as store:
        report = diagnose(store)
        assert {c.name for c in report.problems} == {"invalid_tags", "stale_vectors"}
        invalid = next(c for c in report.problems if c.name == "invalid_tags")
        assert invalid.sample == [path] and not invalid.fixable
        after = fix(store)
        assert {c.name for c in after.problems} == {"invalid_tags"}
        assert any(path in action for action in after.fixed)
        assert store.get(path).tags == [1, "Y"]  # type: ignore[union-attr]
        assert path in [h.path for h in store.search("y", limit=50)]


def _fts_rank(store: KnowledgeStore, query: str, path: str) -> int | None:
    hit = next((h for h in store.search(query, explain=True, limit=50) if h.path == path), None)
    return None if hit is None else hit.explain["ranks"]["fts"]


def test_full_text_folds_case_in_python_under_a_c_locale_database(
        pg_server_handle: pg_server.Server) -> None:
    """Under LC_CTYPE "C" to_tsvector folds ASCII only: the backend feeds it
    text folded in Python (migration 0004), so lower-case queries meet
    capitals as on SQLite. Text edited in psql gets the server's folding
    (the trigger), which doctor reports (fts_fold) and --fix folds again."""
    with _c_locale_database(pg_server_handle) as database:
        with psycopg.connect(database, autocommit=True) as conn:
            assert conn.execute("SELECT to_tsvector('simple', 'ÉCOLE')::text").fetchone()[0] \
                == "'École':1"
        url = pg_server.kb_url(database, "cfold")
        docs = {"a/ecole.md": ("ÉCOLE normale", "école"), "a/kosmos.md": ("ΚΌΣΜΟΣ", "κόσμος"),
                "a/strasse.md": ("Straße", "straße"), "a/city.md": ("İSTANBUL", "istanbul")}
        with KnowledgeStore.open(url, FakeEmbedder(64), hype=False) as store:
            for path, (text, _) in docs.items():
                store.upsert(path, title="Note", body=f"{text} today")
            store.upsert("a/other.md", title="Other", body="nothing here")
            for path, (_, query) in docs.items():
                assert _fts_rank(store, query, path) == 1, query
            assert diagnose(store).ok
        _sql(url, "UPDATE documents SET body = 'ÉTÉ indien' WHERE path = 'a/other.md'")
        with KnowledgeStore.open(url, FakeEmbedder(64), hype=False) as store:
            assert _fts_rank(store, "été", "a/other.md") is None  # the server's folding
            problems = {c.name for c in diagnose(store).problems}
            assert "fts_fold" in problems and "fts_postings" not in problems
            after = fix(store)
            assert after.ok, [c.name for c in after.problems]
            assert any("from folded text" in a for a in after.fixed)
            assert _fts_rank(store, "été", "a/other.md") == 1


def test_an_empty_schema_is_refused_by_writers_that_never_create(pg_url: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    """An existing schema with no tables is what a missing knowledge base is
    to doctor --fix, reembed, hype and migrate (as an empty file is on SQLite)."""
    from psycopg import sql

    url = pg_server.kb_url(pg_url, pg_server.unique_kb_name("empty"))
    target = parse(url)
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(target.schema)))
    for command in (("doctor", "--fix"), ("reembed", "--embedder", "fake"), ("hype", "--all"),
                    ("migrate",)):
        result = run_cli(command[0], "--db", url, *command[1:])
        assert result.exit_code == 1 and "is empty" in result.stderr, (command, result.output)
    assert _sql(url, "SELECT table_name FROM information_schema.tables "
                     "WHERE table_schema = current_schema()") == []
    result = run_cli("init", "--db", url, "--embedder", "fake")
    assert result.exit_code == 0, result.output


def test_a_lost_fingerprint_is_recorded_again_in_one_switch(kb_url: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    """doctor --fix --embedder on PostgreSQL: an embedder failing while the
    vectors are made leaves the store as it was; the next run records the
    fingerprint with every vector."""
    with KnowledgeStore.open(kb_url, hype=False) as store:
        before = store.status()
    _sql(kb_url, "DELETE FROM meta WHERE key = %s", "embedder")

    class FailsAfterCheck(FakeEmbedder):
        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            if texts != ["kbstore embedder check"]:
                raise RuntimeError("embedder went away")
            return super().embed_documents(texts)

    with KnowledgeStore.open(kb_url, hype=False) as store, \
            pytest.raises(RuntimeError, match="went away"):
        store.restamp(FailsAfterCheck(64))
    assert _sql(kb_url, "SELECT 1 FROM meta WHERE key = %s", "embedder") == []
    with KnowledgeStore.open(kb_url, hype=False) as store:
        assert store.status()["vectors"] == before["vectors"]
    fixed = run_cli("doctor", "--db", kb_url, "--fix", "--embedder", "fake")
    assert fixed.exit_code == 0, fixed.output
    assert f"embedded {before['documents']} document(s)" in fixed.output
    with KnowledgeStore.open(kb_url, hype=False) as store:
        assert store.status()["embedder"] == FakeEmbedder(64).fingerprint()
        assert store.status()["vectors"] == before["vectors"]
        assert diagnose(store).ok

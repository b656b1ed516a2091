"""Damage done to the SQLite file by hand (the sqlite3 shell, other tools)
is seen by `kbstore doctor` and repaired by `--fix`, and never traps the
commands that follow."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.cli import _register, cli
from kbstore.doctor import diagnose, fix

_register()


def run(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def db(tmp_path: Path, fake_llm) -> Path:
    path = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(path, FakeEmbedder(64), hype=True) as store:
        for i in range(6):
            store.upsert(f"projects/n{i}.md", title=f"note {i}", body=f"deploy rollback {i}",
                         tags=["ops", f"t{i}"])
    return path


def shell(db: Path, *statements: str) -> None:
    """Like the sqlite3 shell: no extension, foreign keys off."""
    conn = sqlite3.connect(db)
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


def problems(db: Path) -> set[str]:
    with KnowledgeStore.open(db, read_only=True) as store:
        return {c.name for c in diagnose(store).problems}


def fixed(db: Path) -> set[str]:
    with KnowledgeStore.open(db, hype=False) as store:
        report = fix(store)
        assert report.ok, [c.to_dict() for c in report.problems]
        return {c.name for c in report.checks}


def works(db: Path) -> None:
    """Search finds every document through each retriever; writes work."""
    with KnowledgeStore.open(db, hype=False) as store:
        hit = store.search("rollback 3", explain=True)[0]
        assert hit.path == "projects/n3.md"
        assert hit.explain["ranks"]["fts"] is not None and hit.explain["ranks"]["vector"]
        assert store.search("t4", explain=True)[0].explain["ranks"]["frontmatter"] == 1
        store.upsert("projects/new.md", title="new", body="after the repair")
        assert store.search("after the repair")[0].path == "projects/new.md"


@pytest.mark.parametrize("damage, check", [
    ("DROP TABLE documents_fts", "schema"),
    ("DROP TABLE titles_fts", "schema"),
    ("DROP TRIGGER documents_fts_au", "schema"),
    ("DROP TRIGGER documents_tags_au", "schema"),
    ("DROP INDEX documents_topic", "schema"),
    ("DELETE FROM document_tags", "tag_rows"),
    ("DELETE FROM vector_data WHERE vector_id % 32 <> 0", "questions_missing_vectors"),
    ("DELETE FROM vector_data WHERE vector_id % 32 = 0", "documents_missing_vectors"),
    ("UPDATE vector_data SET embedding = zeroblob(256) WHERE vector_id = 32",
     "invalid_vectors"),
    ("UPDATE meta SET value = '\"not an object\"' WHERE key = 'fusion'", "meta_fusion"),
])
def test_doctor_sees_the_damage_and_fix_repairs_it(db: Path, damage: str, check: str) -> None:
    shell(db, damage)
    assert check in problems(db)
    assert run("doctor", "--db", db).exit_code == 1
    fixed(db)
    assert problems(db) == set()
    works(db)


def test_a_vec0_table_removed_with_writable_schema_is_rebuilt(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("DELETE FROM sqlite_master WHERE name = 'vectors'")
    conn.commit()
    conn.close()
    assert "vector_table" in problems(db)
    fixed(db)
    works(db)
    with KnowledgeStore.open(db, read_only=True) as store:
        assert store.status()["vectors"] == store.status()["doc_vectors"] + \
            store.status()["hype_questions"]


def test_deleting_the_newest_document_in_the_shell_does_not_block_the_next_insert(
        db: Path) -> None:
    shell(db, "DELETE FROM documents WHERE id = (SELECT max(id) FROM documents)")
    with KnowledgeStore.open(db, hype=False) as store:
        store.upsert("projects/after.md", title="after", body="inserted after a shell delete")
        assert store.search("inserted after a shell delete")[0].path == "projects/after.md"
    assert "orphan_vectors" in problems(db)  # the vec0 rows the shell could not reach
    fixed(db)
    works(db)


def test_a_malformed_fusion_default_breaks_no_command(db: Path) -> None:
    shell(db, "UPDATE meta SET value = '[1, 2]' WHERE key = 'fusion'")
    assert run("search", "--db", db, "rollback").exit_code == 0
    assert run("status", "--db", db).exit_code == 0
    assert run("doctor", "--db", db, "--fix").exit_code == 0
    conn = sqlite3.connect(db)
    stored = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'fusion'").fetchone()[0])
    conn.close()
    assert isinstance(stored, dict) and "k_rrf" in stored


def test_an_interrupted_reembed_is_noted_and_resumed(db: Path) -> None:
    class Dies(FakeEmbedder):
        def embed_documents(self, texts):
            if self.calls > 1:
                raise KeyboardInterrupt  # the user pressed Ctrl-C mid-way
            return super().embed_documents(texts)

    with KnowledgeStore.open(db, hype=False) as store, pytest.raises(KeyboardInterrupt):
        store.reembed(Dies(32), batch_size=2)
    with KnowledgeStore.open(db, read_only=True) as store:
        assert store.status()["embedder"]["dim"] == 64 and store.status()["rebuild_in_progress"]
        notes = {c.name: c for c in diagnose(store).checks}
        assert notes["rebuild_in_progress"].count == 1 and diagnose(store).ok
    assert run("reembed", "--db", db, "--embedder", "fake", "--dim", "32").exit_code == 0
    with KnowledgeStore.open(db, read_only=True) as store:
        assert store.status()["embedder"]["dim"] == 32
        assert not store.status()["rebuild_in_progress"]
    works(db)


def test_copy_from_a_store_with_a_truncated_vector_embeds_that_document_again(
        tmp_path: Path) -> None:
    """A vector blob cut short in the source (not a whole number of floats)
    is not reusable: that document is embedded again. Formerly the copy
    stopped with numpy's 'buffer size must be a multiple of element size',
    and every re-run stopped at the same document."""
    src, dst = tmp_path / "src.sqlite", tmp_path / "dst.sqlite"
    with KnowledgeStore.open(src, FakeEmbedder(64), hype=False) as store:
        for i in range(5):
            store.upsert(f"projects/n-{i}.md", title=f"n {i}", body=f"note {i}")
    shell(src, "UPDATE vector_data SET embedding = x'0000' "
               "WHERE vector_id = (SELECT min(vector_id) FROM vector_data)")
    result = run("copy", str(src), str(dst))
    assert result.exit_code == 0, result.output
    assert "reused 4 vectors" in result.output and "embedded 1 document(s)" in result.output
    with KnowledgeStore.open(dst, read_only=True) as store:
        assert len(store) == 5 and diagnose(store).ok


@pytest.mark.parametrize("blob", ["x'0102'", "zeroblob(512)", "'not a vector'", "12"])
@pytest.mark.parametrize("vec_plan", ["exact", "bits"])
def test_a_vector_of_the_wrong_size_or_type_costs_search_only_that_vector(
        db: Path, blob: str, vec_plan: str) -> None:
    # Document 4's vector and one of document 5's question vectors: the rest
    # of the store still searches by vector, doctor names both, --fix
    # re-embeds them without touching any text.
    shell(db, f"UPDATE vector_data SET embedding = {blob} WHERE vector_id IN "
          "((SELECT id FROM documents WHERE path = 'projects/n4.md') * 32, "
          " (SELECT id FROM documents WHERE path = 'projects/n5.md') * 32 + 1)")
    with KnowledgeStore.open(db, read_only=True) as store:
        hits = store.search("rollback 3", explain=True, vec_plan=vec_plan)
        assert hits[0].path == "projects/n3.md" and hits[0].explain["ranks"]["vector"]
        assert "projects/n4.md" in {h.path for h in store.search("rollback 4", vec_plan=vec_plan)}
        checks = {c.name: c for c in diagnose(store).problems}
    assert set(checks) == {"invalid_vectors"} and checks["invalid_vectors"].count == 2
    assert run("search", "--db", db, "rollback").exit_code == 0
    fixed(db)
    assert problems(db) == set()
    works(db)
    with KnowledgeStore.open(db, read_only=True) as store:
        assert store.get("projects/n4.md").body == "deploy rollback 4"


def test_a_healthy_store_searches_without_the_vector_checks_and_a_damaged_one_says_so(
        db: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The per-row type and size checks of the float32 copies cost ~10% of an
    exact scan: a search runs the statement without them, and only a
    statement a damaged copy failed runs again with them, with a warning."""
    from kbstore.backends.sqlite import search as sqlite_search

    fast = sqlite_search.statement(True, guarded=False)
    guarded = sqlite_search.statement(True)
    assert "length(v.embedding) = :vec_bytes" in guarded
    assert "length(v.embedding) = :vec_bytes" not in fast
    with KnowledgeStore.open(db, read_only=True) as store, caplog.at_level("WARNING"):
        healthy = [(h.path, h.score) for h in store.search("rollback 3", vec_plan="exact")]
        assert not [r for r in caplog.records if "damaged" in r.getMessage()]
    shell(db, "UPDATE vector_data SET embedding = x'0102' WHERE vector_id = "
              "(SELECT id FROM documents WHERE path = 'projects/n4.md') * 32")
    with KnowledgeStore.open(db, read_only=True) as store, caplog.at_level("WARNING"):
        damaged = [h.path for h in store.search("rollback 3", vec_plan="exact")]
        assert [r for r in caplog.records if "stored vector is damaged" in r.getMessage()]
    assert damaged[0] == healthy[0][0] == "projects/n3.md"

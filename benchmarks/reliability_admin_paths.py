"""The write paths that make, upgrade, restamp or thin out a store, under
SIGKILL: ``delete_many`` (the store API), ``kbstore init`` on a new file,
``kbstore migrate`` of a schema-v3 file and ``kbstore doctor --fix
--embedder`` on a file that lost its fingerprint (restamp). Same rules as
benchmarks/reliability_write_paths.py: every document old or new, present
or deleted, never half-indexed; the rerun completes and leaves a healthy
store."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.reliability_check import check_store, contents, damage, reading
from benchmarks.reliability_docs import DIM, SEED_MARKER, doc_path, fake_hype, make_docs, open_store
from benchmarks.reliability_path_inputs import make_v3_file
from benchmarks.reliability_write_paths import WritePath, _diff
from kbstore import FakeEmbedder
from kbstore.backends.sqlite.connection import connect

V3_LLM = "fake/llm"


def sql_write(db: Path, statement: str, params: Sequence[Any] = ()) -> None:
    conn = connect(db, mode="write")
    try:
        conn.execute(statement, params)
        conn.commit()
    finally:
        conn.close()


class DeleteMany(WritePath):
    """``KnowledgeStore.delete_many``: every run deletes half of the
    documents (the other half the run before; ``prepare`` puts those back):
    a kill may leave each of them present (unchanged) or deleted."""

    def doomed(self, gen: int) -> list[str]:
        return [doc_path(i) for i in range(self.n) if (i + gen) % 2 == 0]

    def prepare(self, gen: int) -> None:
        have = set(contents(self.db))
        back = [i for i in range(self.n) if doc_path(i) not in have]
        with fake_hype(), open_store(self.db) as store:
            store.upsert_many(make_docs(back, SEED_MARKER))
        super().prepare(gen)

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "delete_many", "db": str(self.db), "paths": self.doomed(gen)}

    def lost(self, gen: int, committed: int) -> list[str]:
        now, doomed = contents(self.db), set(self.doomed(gen))
        problems = _diff({p: v for p, v in self.before["contents"].items()
                          if p not in doomed or p in now}, now)
        return problems + ([f"{p}: still there" for p in sorted(doomed & set(now))]
                           if committed else [])

    def check_resumed(self, gen: int) -> list[str]:
        return super().check_resumed(gen) + self.lost(gen, 1)


class Init(WritePath):
    """``kbstore init`` making a new file: a kill leaves no file, an empty
    one, or a whole store (schema, fingerprint, fusion defaults and vector
    table commit in one transaction). The schema without a fingerprint or
    vector table is a half-made store: counted bad."""

    def prepare(self, gen: int) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.db}{suffix}").unlink(missing_ok=True)

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["init", "--db", str(self.db), "--embedder", "fake",
                                        "--dim", str(DIM)]}

    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        if not Path(self.db).exists() or Path(self.db).stat().st_size == 0:
            return 0, [], []
        with reading(self.db) as conn:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
                # An SQLite file without the schema (the one transaction that
                # makes it never committed): commands refuse it as empty.
                return 0, [], []
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            fp = "meta" in tables and conn.execute(
                "SELECT 1 FROM meta WHERE key = 'embedder'").fetchone() is not None
        if "documents" in tables and ("vectors" not in tables or not fp):
            return 0, [f"schema without {'a fingerprint' if not fp else 'the vector table'}"], []
        return self._store_state()

    def _store_state(self) -> tuple[int, list[str], list[str]]:
        try:
            counts = check_store(self.db)
            with reading(self.db) as conn:
                row = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
        except Exception as exc:  # a file that is neither absent, empty nor a store
            return 1, [], [f"unreadable: {type(exc).__name__}: {exc}"]
        half = [f"{k}={v}" for k, v in counts.items() if v and k != "documents"]
        if counts.get("documents"):
            half.append(f"{counts['documents']} documents in a new file")
        if row is None or json.loads(row[0]) != FakeEmbedder(DIM).fingerprint():
            half.append(f"fingerprint {row}")
        return 0, half, []

    def check_resumed(self, gen: int) -> list[str]:
        if not Path(self.db).exists():
            return ["corrupt", "no file"]
        corrupt, half, lost = self._store_state()
        return (["corrupt"] if corrupt else []) + half + lost


class Restamp(WritePath):
    """``kbstore doctor --fix --embedder fake`` on a store whose fingerprint
    was deleted: documents and questions are kept, every vector is made again."""

    def prepare(self, gen: int) -> None:
        sql_write(Path(self.db), "DELETE FROM meta WHERE key = ?", ("embedder",))
        super().prepare(gen)
        self.before["counts"] = check_store(self.db)

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["doctor", "--db", str(self.db), "--fix",
                                        "--embedder", "fake"]}

    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        with reading(self.db) as conn:
            lost_fp = conn.execute("SELECT 1 FROM meta WHERE key = 'embedder'").fetchone() is None
        if not lost_fp:
            return super().check_killed(gen, committed)
        # Still without a fingerprint: the store exactly as it was.
        counts = check_store(self.db)
        half = [f"{k}={v} (before: {self.before['counts'][k]})" for k, v in counts.items()
                if v != self.before["counts"][k]]
        return damage(counts)[0], half, self.lost(gen, committed)


class Migrate(WritePath):
    """``kbstore migrate`` of a schema-v3 file (index rows made by its
    triggers) to the current schema: a kill leaves v3 or the current
    version, never between, with every document as it was."""

    def setup(self) -> None:
        self.template = self.work / "v3-template.sqlite"
        docs = make_docs(range(self.n), SEED_MARKER)
        make_v3_file(self.template, [(d.path, d.title, d.tags, d.body,
                                      [f"what is {d.title}?", f"how do I use {d.title}?"])
                                     for d in docs], V3_LLM)

    def prepare(self, gen: int) -> None:
        for suffix in ("-wal", "-shm"):
            Path(f"{self.db}{suffix}").unlink(missing_ok=True)
        Path(self.db).write_bytes(self.template.read_bytes())
        super().prepare(gen)

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["migrate", "--db", str(self.db)]}

    def _version(self) -> int:
        with reading(self.db) as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])

    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        from kbstore.backends.sqlite.migrations import SCHEMA_VERSION

        corrupt, half, lost = super().check_killed(gen, committed)
        version = self._version()
        return corrupt, half + ([f"schema v{version}"] if version not in (3, SCHEMA_VERSION)
                                else []), lost

    def check_resumed(self, gen: int) -> list[str]:
        from kbstore.backends.sqlite.migrations import SCHEMA_VERSION

        version = self._version()
        return super().check_resumed(gen) + ([f"schema v{version} after resume"]
                                             if version != SCHEMA_VERSION else [])


ADMIN_PATHS: dict[str, type[WritePath]] = {
    "delete_many": DeleteMany, "init": Init, "restamp": Restamp, "migrate": Migrate,
}

"""One class per write path: its store and inputs, the command it runs, and
what a SIGKILL at any moment may leave (old or new state, nothing committed
lost, for reembed one embedder's vectors only, for export no half target and
an untouched source)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

from benchmarks.reliability_check import (
    check_store,
    contents,
    damage,
    damaged_ids,
    digest,
    embedder_dim,
    reading,
    vectors_match,
    without_questions,
)
from benchmarks.reliability_docs import (
    DIM,
    SEED_MARKER,
    doc_path,
    fake_hype,
    is_postgres,
    make_docs,
    markers,
    new_store,
    open_store,
    seed_store,
)
from benchmarks.reliability_path_inputs import (
    inflict_damage,
    marker,
    reembed_dim,
    write_jsonl,
    write_npz,
    write_workspace,
)


class WritePath:
    """One write path: its store, inputs, command and what a kill may leave."""

    content = False     # the command writes new document versions
    api = False         # an API call that reports committed documents
    hype = True

    def __init__(self, name: str, workdir: Path, n: int, rng: random.Random) -> None:
        self.name, self.work, self.n, self.rng = name, workdir, n, rng
        workdir.mkdir(parents=True, exist_ok=True)
        self.db = new_store(workdir, name)
        self.ws = workdir / "ws"
        self.before: dict[str, Any] = {}

    def setup(self) -> None:
        seed_store(self.db, self.n, hype=self.hype)

    def prepare(self, gen: int) -> None:
        self.before = {"contents": contents(self.db)}

    def spec(self, gen: int) -> dict[str, Any]:
        raise NotImplementedError

    # What a kill may leave: (corrupt, half-indexed problems, lost problems)
    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        counts = check_store(self.db)
        corrupt, _ = damage(counts)
        half = [f"{k}={v}" for k, v in counts.items()
                if v and k not in ("integrity", "fts_integrity", "documents")]
        return corrupt, half, self.lost(gen, committed)

    def lost(self, gen: int, committed: int) -> list[str]:
        now = contents(self.db)
        if not self.content:
            return _diff(self.before["contents"], now)
        return _markers_as_planned(now, self.n, gen, committed)

    def finished(self, gen: int) -> bool:
        """The killed run had already done everything (nothing to resume)."""
        return False

    def check_resumed(self, gen: int) -> list[str]:
        counts = check_store(self.db)
        problems = [f"{k}={v}" for k, v in counts.items() if v and k != "documents"]
        if self.content:
            problems += self.lost(gen, self.n)
        else:
            problems += self.lost(gen, 0)
        return problems


def _markers_as_planned(now: dict[str, Any], n: int, gen: int, committed: int) -> list[str]:
    """Documents 0..committed-1 at version ``gen``, the others at ``gen`` or
    the one before; nothing else stored."""
    problems = []
    for i in range(n):
        path = doc_path(i)
        have = next(iter(markers(now[path][0])), "?") if path in now else None
        ok = {marker(gen)} if i < committed else {marker(gen - 1), marker(gen)}
        if have not in ok:
            problems.append(f"{path}: {have}, expected {sorted(ok)}")
    return problems + [f"{p}: unexpected" for p in now if p not in
                       {doc_path(i) for i in range(n)}]


def _diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    out = [f"{p}: gone" for p in before if p not in after]
    out += [f"{p}: changed" for p in before if p in after and before[p] != after[p]]
    return out + [f"{p}: unexpected" for p in after if p not in before]


class Upsert(WritePath):
    content = api = True

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "upsert", "db": str(self.db), "n": self.n, "marker": marker(gen),
                "hype": True}


class UpsertMany(Upsert):
    def spec(self, gen: int) -> dict[str, Any]:
        return {**super().spec(gen), "kind": "upsert_many",
                "batch": self.rng.choice((8, 32, 64))}


class FolderImport(WritePath):
    content = True

    def setup(self) -> None:
        write_workspace(self.ws, range(self.n), SEED_MARKER)
        with fake_hype(), open_store(self.db) as store:
            store.import_directory(self.ws)

    def prepare(self, gen: int) -> None:
        write_workspace(self.ws, range(self.n), marker(gen))

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["import", "--db", str(self.db), "--hype", str(self.ws)]}


class ImportRemovals(FolderImport):
    """`kbstore import` where every run also removes a fifth of the files
    (and brings back the fifth the previous run removed): a kill may leave
    each document in its old state or its new one -- present with the old
    or new version, or deleted -- never anything else."""

    @staticmethod
    def present(gen: int, i: int) -> bool:
        return gen < 0 or (i + gen) % 5 != 0

    def prepare(self, gen: int) -> None:
        keep = [i for i in range(self.n) if self.present(gen, i)]
        for i in range(self.n):
            if not self.present(gen, i):
                (self.ws / "knowledge" / doc_path(i)).unlink(missing_ok=True)
        for i in keep:
            write_workspace(self.ws, range(i, i + 1), marker(gen))

    def lost(self, gen: int, committed: int) -> list[str]:
        now = contents(self.db)
        problems = []
        for i in range(self.n):
            path = doc_path(i)
            have = next(iter(markers(now[path][0])), "?") if path in now else None
            new = marker(gen) if self.present(gen, i) else None
            ok = {new} if committed == self.n else {
                marker(gen - 1) if self.present(gen - 1, i) else None, new}
            if have not in ok:
                problems.append(f"{path}: {have}, expected {sorted(map(str, ok))}")
        return problems + [f"{p}: unexpected" for p in now
                           if p not in {doc_path(i) for i in range(self.n)}]


class WatchReconcile(ImportRemovals):
    """The watcher's catch-up reconcile of the same changes (edits and a
    fifth of the files removed), killed at any moment."""

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "watch", "db": str(self.db), "ws": str(self.ws), "hype": True}


class PicobotStore(WritePath):
    """picobot's ``KnowledgeBase.store`` (also the MCP store tool): a file
    written in the workspace, then indexed, one entry after another; the
    version marker is in the body (the title names the file)."""

    content = api = True

    def setup(self) -> None:
        (self.ws / "knowledge" / "projects").mkdir(parents=True, exist_ok=True)
        super().setup()

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "picobot_store", "db": str(self.db), "ws": str(self.ws), "n": self.n,
                "marker": marker(gen), "hype": True}

    def lost(self, gen: int, committed: int) -> list[str]:
        now = {path: (f"{title} {body}", body, tags)
               for path, (title, body, tags) in contents(self.db).items()}
        return _markers_as_planned(now, self.n, gen, committed)


class NpzImport(FolderImport):
    def prepare(self, gen: int) -> None:
        super().prepare(gen)
        write_npz(self.work / f"embeddings-{gen}.npz", self.ws, range(self.n), marker(gen))

    def spec(self, gen: int) -> dict[str, Any]:
        # --trust-vectors: the harness's npz has no fingerprint; reuse is what it tests
        return {"kind": "cli", "argv": ["import-npz", "--db", str(self.db), "--workspace",
                                        str(self.ws), "--hype", "--trust-vectors",
                                        str(self.work / f"embeddings-{gen}.npz")]}


class JsonlImport(WritePath):
    content = True

    def prepare(self, gen: int) -> None:
        write_jsonl(self.work / f"records-{gen}.jsonl", range(self.n), marker(gen))

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["import-jsonl", "--db", str(self.db), "--hype",
                                        str(self.work / f"records-{gen}.jsonl")]}


class Copy(WritePath):
    """`kbstore copy SRC DST` into an existing knowledge base: each
    generation's source holds new versions (with HyPE questions and
    vectors, which the copy reuses)."""

    content = True

    def prepare(self, gen: int) -> None:
        source = self.work / f"source-{gen}.sqlite"
        if not source.exists():
            with fake_hype(), open_store(source) as store:
                store.upsert_many(make_docs(range(self.n), marker(gen)))
        super().prepare(gen)

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["copy", str(self.work / f"source-{gen}.sqlite"),
                                        str(self.db)]}


class HypeJob(WritePath):
    hype = False

    def prepare(self, gen: int) -> None:
        # New content without questions: every document is pending again.
        with open_store(self.db, hype=False) as store:
            store.upsert_many(make_docs(range(self.n), marker(gen)))
        super().prepare(gen)

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["hype", "--db", str(self.db), "--concurrency", "2"]}

    def check_resumed(self, gen: int) -> list[str]:
        problems = super().check_resumed(gen)
        pending = len(without_questions(self.db))
        return problems + ([f"{pending} documents still without questions"] if pending else [])


class Reembed(WritePath):
    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["reembed", "--db", str(self.db), "--embedder", "fake",
                                        "--dim", str(reembed_dim(gen))]}

    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        corrupt, half, lost = super().check_killed(gen, committed)
        old, dim = reembed_dim(gen - 1) if gen else DIM, embedder_dim(self.db)
        if dim not in (old, reembed_dim(gen)):
            half.append(f"fingerprint dim {dim}")
        return corrupt, half + vectors_match(self.db)[:5], lost

    def check_resumed(self, gen: int) -> list[str]:
        problems = super().check_resumed(gen) + vectors_match(self.db)[:5]
        dim = embedder_dim(self.db)
        return problems + ([f"dim {dim} after resume"] if dim != reembed_dim(gen) else [])


class DoctorFix(WritePath):
    def prepare(self, gen: int) -> None:
        super().prepare(gen)
        self.before["damage"] = inflict_damage(self.db, self.rng)
        with reading(self.db) as conn:
            self.before["ids"] = damaged_ids(conn)[1]

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["doctor", "--db", str(self.db), "--fix"]}

    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        """The store was damaged on purpose: a kill may leave any part of that
        damage, but no document may be damaged that was not before."""
        counts = check_store(self.db)
        corrupt, _ = damage(counts)
        with reading(self.db) as conn:
            now = damaged_ids(conn)[1]
        inflicted = set().union(*self.before["ids"].values())
        half = [f"{k}: {sorted(v - inflicted)[:5]}" for k, v in now.items() if v - inflicted]
        return corrupt, half, self.lost(gen, committed)


class ExportJsonl(WritePath):
    def target(self) -> Path:
        return self.work / "export.jsonl"

    def prepare(self, gen: int) -> None:
        with open_store(self.db, hype=False) as store:
            store.upsert_many(make_docs(range(self.n), marker(gen)))
        if gen % 2:
            self._remove_target()
        super().prepare(gen)
        self.before["target"] = self._target_state(gen)
        self.before["sha"] = digest(self.db)

    def _remove_target(self) -> None:
        if self.target().exists():
            self.target().unlink()

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["export", "--db", str(self.db), "--format", "jsonl",
                                        "--vectors", "--force", str(self.target())]}

    def _target_state(self, gen: int) -> str:
        """'absent', 'old', 'new' -- or what is wrong with it."""
        target = self.target()
        if not target.exists():
            return "absent"
        try:
            lines = target.read_text(encoding="utf-8").splitlines()
            marks = {m for line in lines for m in markers(json.loads(line)["title"])}
        except (ValueError, KeyError) as exc:
            return f"unreadable ({exc})"
        if len(lines) != self.n or len(marks) != 1:
            return f"half: {len(lines)} records, markers {sorted(marks)[:3]}"
        return "new" if marks == {marker(gen)} else "old" if marks == {marker(gen - 1)} \
            else f"markers {marks}"

    def _stray(self) -> int:
        """Hidden temp files/folders beside the target (a killed export's)."""
        return sum(p.name.startswith(f".{self.target().name}.") for p in self.work.iterdir())

    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        corrupt, half, lost = super().check_killed(gen, committed)
        state = self._target_state(gen)
        allowed = {"new", self.before["target"]}
        if state not in allowed:
            half.append(f"target {state} (before: {self.before['target']})")
        if digest(self.db) != self.before["sha"]:
            lost.append("the source database changed")
        wal = Path(f"{self.db}-wal")
        if not is_postgres(self.db) and wal.exists() and wal.stat().st_size:
            lost.append(f"the source has a {wal.stat().st_size}-byte WAL")
        self.stray = self._stray()
        return corrupt, half, lost

    def check_resumed(self, gen: int) -> list[str]:
        problems = super().check_resumed(gen)
        state = self._target_state(gen)
        if self._stray():  # the next export sweeps what a killed one left
            problems.append(f"{self._stray()} temp file(s) left after the next export")
        if digest(self.db) != self.before["sha"]:
            problems.append("the source database changed")
        return problems + ([f"target {state} after resume"] if state != "new" else [])


class ExportMarkdown(ExportJsonl):
    def target(self) -> Path:
        return self.work / "export-md"

    def prepare(self, gen: int) -> None:
        super().prepare(gen)
        self._remove_target()
        self.before["target"] = "absent"

    def _remove_target(self) -> None:
        if self.target().exists():
            shutil.rmtree(self.target())

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["export", "--db", str(self.db), "--format", "markdown",
                                        str(self.target())]}

    def finished(self, gen: int) -> bool:
        # A complete export tree is only ever there once the run is done; the
        # same command would (rightly) refuse the now non-empty folder.
        return self._target_state(gen) == "new"

    def _target_state(self, gen: int) -> str:
        target = self.target()
        if not target.exists():
            return "absent"
        files = sorted(target.rglob("*.md"))
        marks = {m for f in files for m in markers(f.read_text(encoding="utf-8"))}
        if len(files) != self.n or len(marks) != 1:
            return f"half: {len(files)} files, markers {sorted(marks)[:3]}"
        return "new" if marks == {marker(gen)} else f"markers {marks}"


PATHS: dict[str, type[WritePath]] = {
    "upsert": Upsert, "upsert_many": UpsertMany, "import": FolderImport, "hype": HypeJob,
    "reembed": Reembed, "doctor_fix": DoctorFix, "import_jsonl": JsonlImport,
    "import_npz": NpzImport, "export_jsonl": ExportJsonl, "export_markdown": ExportMarkdown,
    "copy": Copy, "import_removals": ImportRemovals, "watch": WatchReconcile,
    "picobot_store": PicobotStore,
}

"""Every write path under SIGKILL and under a racing delete.

Each path is one real command (``kbstore import``, ``hype``, ``reembed``,
``doctor --fix``, ``import-jsonl``, ``import-npz``, ``export``) or API call
(``upsert``, ``upsert_many``) run in a child process and killed at a random
moment inside its calibrated run time. After each kill the independent
checker (:func:`benchmarks.reliability.check_store`, plain SQL) reads the
file, the path's own rule is checked (old or new state, nothing committed
lost, for reembed one embedder's vectors only, for export no half target
and an untouched source), and then the same command runs again in this
process and must complete and leave a healthy store.

A race runs each long operation while another process deletes documents
through the public API: deleted documents must stay deleted, nothing else
may be lost, and neither process may see an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import reliability as rel
from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite.connection import connect
from kbstore.embed import embedding_text
from kbstore.files import render_markdown

ROOT = Path(__file__).resolve().parents[1]
SEED_MARKER = "m0x0"
CRASH_PATHS = ("upsert", "upsert_many", "import", "hype", "reembed", "doctor_fix",
               "import_jsonl", "import_npz", "export_jsonl", "export_markdown", "copy")
RACE_OPS = ("import", "upsert_many", "hype", "reembed", "doctor_fix", "import_jsonl",
            "import_npz", "copy")


def marker(gen: int) -> str:
    return f"m0x{gen + 1}"


def reembed_dim(gen: int) -> int:
    """Target dimension of run ``gen``: the seed is 64, runs alternate 32/64."""
    return 32 if gen % 2 == 0 else 64


# -- inputs: workspace files, JSONL, npz ------------------------------------------------


def doc_file_text(i: int, mark: str) -> str:
    doc = rel.make_docs([i], mark)[0]
    return render_markdown({"title": doc.title, "tags": doc.tags, "created": "2025-01-02"},
                           doc.body)


def write_workspace(ws: Path, ids: range, mark: str) -> None:
    """picobot layout; each file replaced atomically (no fsync: speed)."""
    folder = ws / "knowledge" / "projects"
    folder.mkdir(parents=True, exist_ok=True)
    for i in ids:
        target = folder / f"doc-{i:04d}.md"
        tmp = folder / f".doc-{i:04d}.tmp"
        tmp.write_text(doc_file_text(i, mark), encoding="utf-8")
        os.replace(tmp, target)


def _fake_vectors(texts: list[str], dim: int = rel.DIM) -> np.ndarray:
    return FakeEmbedder(dim).embed_documents(texts)


def write_jsonl(file: Path, ids: range, mark: str) -> None:
    """Records as `kbstore export --format jsonl --vectors` writes them: every
    other one brings questions, every third one its vector."""
    fp = FakeEmbedder(rel.DIM).fingerprint()
    docs = rel.make_docs(ids, mark)
    vecs = _fake_vectors([embedding_text(d.title, d.tags, d.body) for d in docs])
    with open(file, "w", encoding="utf-8") as fh:
        for k, (doc, vec) in enumerate(zip(docs, vecs, strict=True)):
            record: dict[str, Any] = {"path": doc.path, "title": doc.title, "body": doc.body,
                                      "tags": doc.tags}
            if k % 2 == 0:
                record["questions"] = [f"what is {doc.title}?", f"why {doc.title}?"]
            if k % 3 == 0:
                record["vectors"] = {"fingerprint": fp, "doc": [float(x) for x in vec]}
            fh.write(json.dumps(record) + "\n")


def write_npz(file: Path, ws: Path, ids: range, mark: str) -> None:
    """picobot's sidecar for the workspace: vectors for 70% of its documents
    (md5 of the body), HyPE questions for a third of those."""
    from kbstore.ingest import parse_file

    folder = ws / "knowledge" / "projects"
    docs = [parse_file(folder / f"doc-{i:04d}.md", rel.doc_path(i)) for i in ids if i % 10 < 7]
    vecs = _fake_vectors([embedding_text(d.title, d.tags, d.body) for d in docs])
    qdocs, qtext = [], []
    for d in docs[::3]:
        qdocs += [d.path, d.path]
        qtext += [f"what is {d.title}?", f"how to {d.title}?"]
    tmp = file.with_name(f".{file.name}.tmp.npz")
    np.savez(tmp, vectors=vecs, doc_ids=np.array([d.path for d in docs]),
             content_hashes=np.array([hashlib.md5(d.body.encode()).hexdigest() for d in docs]),
             hype_doc_ids=np.array(qdocs), hype_questions=np.array(qtext),
             hype_vectors=_fake_vectors(qtext))
    os.replace(tmp, file)


# -- damage for doctor --fix (plain SQL) -------------------------------------------------


def inflict_damage(db: Path, rng: random.Random) -> list[str]:
    """Damage kbstore's derived data with plain SQL; returns what was done.
    Always drops the vectors of a random 20-80% of documents (so --fix has
    real work: re-embedding), plus a random choice of other damage."""
    conn = connect(db, mode="write")
    done = []
    try:
        conn.execute("BEGIN IMMEDIATE")
        ids = [r[0] for r in conn.execute("SELECT id FROM documents")]
        victims = rng.sample(ids, int(len(ids) * rng.uniform(0.2, 0.8)))
        for d in victims:
            conn.execute("DELETE FROM vectors WHERE vector_id = ?", (d * rel.SLOTS,))
            if rng.random() < 0.5:
                conn.execute("DELETE FROM vector_data WHERE vector_id = ?", (d * rel.SLOTS,))
            if rng.random() < 0.3:
                conn.execute("DELETE FROM derived WHERE doc_id = ? AND kind = 'doc_vector'",
                             (d,))
        done.append(f"vectors of {len(victims)} documents")
        if rng.random() < 0.5:
            conn.execute("DELETE FROM document_tags")
            done.append("document_tags emptied")
        if rng.random() < 0.5:
            some = rng.sample(ids, len(ids) // 10)
            conn.executemany("UPDATE derived SET content_hash = 'stale' WHERE doc_id = ? "
                             "AND kind = 'doc_vector'", [(d,) for d in some])
            done.append(f"stale hash rows for {len(some)}")
        if rng.random() < 0.3:
            conn.execute("UPDATE meta SET value = '[1, 2]' WHERE key = 'fusion'")
            done.append("meta.fusion malformed")
        if rng.random() < 0.3:
            some = rng.sample(ids, len(ids) // 10)
            conn.executemany("DELETE FROM vector_data WHERE doc_id = ? AND vector_id % ? > 0",
                             [(d, rel.SLOTS) for d in some])
            done.append(f"question vectors of {len(some)}")
        conn.execute("COMMIT")
    finally:
        conn.close()
    return done


# -- running one operation ---------------------------------------------------------------


def run_op(spec: dict[str, Any], *, child: bool) -> int:
    """Run one write operation; returns the exit status. In a child, API
    operations print ``c <k>`` once the first k documents are committed."""
    if spec["kind"] == "cli":
        return _cli(spec["argv"], child=child)
    docs = rel.make_docs(range(spec["n"]), spec["marker"])
    with KnowledgeStore.open(spec["db"], FakeEmbedder(rel.DIM), hype=spec["hype"]) as store:
        if spec["kind"] == "upsert":
            for k, doc in enumerate(docs, start=1):
                store.upsert(doc.path, title=doc.title, body=doc.body, tags=doc.tags)
                if child:
                    print(f"c {k}", flush=True)
        else:
            done = [0]

            def progress(count: int) -> None:
                done[0] += count
                if child:
                    print(f"c {done[0]}", flush=True)

            store.upsert_many(docs, batch_size=spec.get("batch", 32), progress=progress)
    return 0


def _cli(argv: list[str], *, child: bool) -> int:
    from kbstore.cli import _register, cli

    _register()
    if child:
        try:
            cli.main(args=argv, prog_name="kbstore")
        except SystemExit as exc:
            return int(exc.code or 0) if not isinstance(exc.code, str) else 1
        return 0
    import click

    try:
        cli.main(args=argv, prog_name="kbstore", standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    except click.ClickException as exc:
        print(f"resume failed: {exc.format_message()}", file=sys.stderr)
        return 1
    return 0


def op_child(spec_json: str, go: str | None) -> None:
    spec = json.loads(spec_json)
    # Everything slow to import is imported before "ready".
    import kbstore.cli  # noqa: F401
    import kbstore.doctor  # noqa: F401
    import kbstore.exchange  # noqa: F401
    import kbstore.exchange_npz  # noqa: F401
    import kbstore.hype_jobs  # noqa: F401

    with rel.fake_hype():
        rel._ready_and_wait(go)
        code = run_op(spec, child=True)
    sys.stdout.flush()
    sys.exit(code)


def deleter_child(db: str, plan_json: str, go: str | None) -> None:
    """Delete documents through the public API at planned moments after go;
    prints {path: deleted?} and the errors seen."""
    plan = json.loads(plan_json)  # [[seconds after go, path], ...]
    out: dict[str, Any] = {"deleted": {}, "errors": []}
    with KnowledgeStore.open(db, hype=False) as store:
        rel._ready_and_wait(go)
        start = time.monotonic()
        for at, path in plan:
            time.sleep(max(0.0, start + at - time.monotonic()))
            try:
                out["deleted"][path] = store.delete(path)
            except Exception as exc:
                out["errors"].append(f"{type(exc).__name__}: {exc}")
    print(json.dumps(out), flush=True)


def spawn_module(command: str, *args: Any, stderr: Any = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen([sys.executable, "-m", "benchmarks.reliability_paths", command,
                             *map(str, args)], stdout=subprocess.PIPE, stderr=stderr,
                            text=True, cwd=ROOT, env=env)


# -- the paths ---------------------------------------------------------------------------


def _seed(db: Path, ids: range, *, hype: bool = True, dim: int = rel.DIM) -> None:
    with rel.fake_hype(), KnowledgeStore.open(db, FakeEmbedder(dim), hype=hype) as store:
        store.upsert_many(rel.make_docs(ids, SEED_MARKER))


def _contents(db: Path) -> dict[str, tuple[str, str, str]]:
    with _ro(db) as conn:
        return {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
            "SELECT path, title, body, tags FROM documents")}


def _ro(db: Path) -> contextlib.closing[Any]:
    return contextlib.closing(connect(db, mode="read"))


def _sha(file: Path) -> str | None:
    return hashlib.sha256(file.read_bytes()).hexdigest() if file.exists() else None


def _vectors_match(db: Path) -> list[str]:
    """Every stored vector is exactly what the stored embedder makes of the
    document (or question) now: never an old model's vector under the new
    fingerprint."""
    with _ro(db) as conn:
        fp = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'embedder'"
                                     ).fetchone()[0])
        embedder = FakeEmbedder(int(fp["dim"]))
        docs = {r[0]: (r[1], json.loads(r[2]), r[3]) for r in conn.execute(
            "SELECT id, title, tags, body FROM documents")}
        questions = {(r[0], r[1]): r[2] for r in conn.execute(
            "SELECT doc_id, position, question FROM hype_questions")}
        stored = {r[0]: bytes(r[1]) for r in conn.execute(
            "SELECT vector_id, embedding FROM vector_data")}
    bad = []
    for vid, blob in stored.items():
        doc_id, slot = divmod(vid, rel.SLOTS)
        if doc_id not in docs:
            continue  # the consistency check counts orphans
        text = (embedding_text(*docs[doc_id]) if slot == 0
                else questions.get((doc_id, slot)))
        if text is None:
            continue
        want = embedder.embed_documents([text])[0]
        want = want / np.linalg.norm(want)
        have = np.frombuffer(blob, dtype=np.float32)
        if have.shape != want.shape or not np.allclose(have, want, atol=1e-5):
            bad.append(f"vector {vid} is not the {fp['dim']}-d embedder's")
    return bad


class WritePath:
    """One write path: its store, inputs, command and what a kill may leave."""

    content = False     # the command writes new document versions
    api = False         # an API call that reports committed documents
    hype = True

    def __init__(self, name: str, workdir: Path, n: int, rng: random.Random) -> None:
        self.name, self.work, self.n, self.rng = name, workdir, n, rng
        workdir.mkdir(parents=True, exist_ok=True)
        self.db = workdir / f"{name}.sqlite"
        self.ws = workdir / "ws"
        self.before: dict[str, Any] = {}

    def setup(self) -> None:
        _seed(self.db, range(self.n), hype=self.hype)

    def prepare(self, gen: int) -> None:
        self.before = {"contents": _contents(self.db)}

    def spec(self, gen: int) -> dict[str, Any]:
        raise NotImplementedError

    # What a kill may leave: (corrupt, half-indexed problems, lost problems)
    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        counts = rel.check_store(self.db)
        corrupt, _ = rel.damage(counts)
        half = [f"{k}={v}" for k, v in counts.items()
                if v and k not in ("integrity", "fts_integrity", "documents")]
        return corrupt, half, self.lost(gen, committed)

    def lost(self, gen: int, committed: int) -> list[str]:
        now = _contents(self.db)
        if not self.content:
            return _diff(self.before["contents"], now)
        problems = []
        allowed_old = marker(gen - 1)
        for i in range(self.n):
            path = rel.doc_path(i)
            have = next(iter(rel.markers(now[path][0])), "?") if path in now else None
            ok = {marker(gen)} if i < committed else {allowed_old, marker(gen)}
            if have not in ok:
                problems.append(f"{path}: {have}, expected {sorted(ok)}")
        problems += [f"{p}: unexpected" for p in now if p not in
                     {rel.doc_path(i) for i in range(self.n)}]
        return problems

    def finished(self, gen: int) -> bool:
        """The killed run had already done everything (nothing to resume)."""
        return False

    def check_resumed(self, gen: int) -> list[str]:
        counts = rel.check_store(self.db)
        problems = [f"{k}={v}" for k, v in counts.items() if v and k != "documents"]
        if self.content:
            problems += self.lost(gen, self.n)
        else:
            problems += self.lost(gen, 0)
        return problems


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
        with rel.fake_hype(), KnowledgeStore.open(self.db, FakeEmbedder(rel.DIM),
                                                   hype=True) as store:
            store.import_directory(self.ws)

    def prepare(self, gen: int) -> None:
        write_workspace(self.ws, range(self.n), marker(gen))

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["import", "--db", str(self.db), "--hype", str(self.ws)]}


class NpzImport(FolderImport):
    def prepare(self, gen: int) -> None:
        super().prepare(gen)
        write_npz(self.work / f"embeddings-{gen}.npz", self.ws, range(self.n), marker(gen))

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["import-npz", "--db", str(self.db), "--workspace",
                                        str(self.ws), "--hype",
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
            with rel.fake_hype(), KnowledgeStore.open(source, FakeEmbedder(rel.DIM),
                                                       hype=True) as store:
                store.upsert_many(rel.make_docs(range(self.n), marker(gen)))
        super().prepare(gen)

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["copy", str(self.work / f"source-{gen}.sqlite"),
                                        str(self.db)]}


class HypeJob(WritePath):
    hype = False

    def prepare(self, gen: int) -> None:
        # New content without questions: every document is pending again.
        with KnowledgeStore.open(self.db, FakeEmbedder(rel.DIM), hype=False) as store:
            store.upsert_many(rel.make_docs(range(self.n), marker(gen)))
        super().prepare(gen)

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["hype", "--db", str(self.db), "--concurrency", "2"]}

    def check_resumed(self, gen: int) -> list[str]:
        problems = super().check_resumed(gen)
        with _ro(self.db) as conn:
            pending = conn.execute(
                "SELECT count(*) FROM documents d WHERE NOT EXISTS (SELECT 1 FROM derived h "
                "WHERE h.doc_id = d.id AND h.kind = 'hype_questions' AND h.status = 'ok')"
            ).fetchone()[0]
        return problems + ([f"{pending} documents still without questions"] if pending else [])


class Reembed(WritePath):
    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["reembed", "--db", str(self.db), "--embedder", "fake",
                                        "--dim", str(reembed_dim(gen))]}

    def _dim(self) -> int:
        with _ro(self.db) as conn:
            return int(json.loads(conn.execute(
                "SELECT value FROM meta WHERE key = 'embedder'").fetchone()[0])["dim"])

    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        corrupt, half, lost = super().check_killed(gen, committed)
        old = reembed_dim(gen - 1) if gen else rel.DIM
        if self._dim() not in (old, reembed_dim(gen)):
            half.append(f"fingerprint dim {self._dim()}")
        return corrupt, half + _vectors_match(self.db)[:5], lost

    def check_resumed(self, gen: int) -> list[str]:
        problems = super().check_resumed(gen) + _vectors_match(self.db)[:5]
        return problems + ([f"dim {self._dim()} after resume"]
                           if self._dim() != reembed_dim(gen) else [])


class DoctorFix(WritePath):
    def prepare(self, gen: int) -> None:
        super().prepare(gen)
        self.before["damage"] = inflict_damage(self.db, self.rng)
        with _ro(self.db) as conn:
            self.before["ids"] = rel.damaged_ids(conn)[1]

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["doctor", "--db", str(self.db), "--fix"]}

    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        """The store was damaged on purpose: a kill may leave any part of that
        damage, but no document may be damaged that was not before."""
        counts = rel.check_store(self.db)
        corrupt, _ = rel.damage(counts)
        with _ro(self.db) as conn:
            now = rel.damaged_ids(conn)[1]
        inflicted = set().union(*self.before["ids"].values())
        half = [f"{k}: {sorted(v - inflicted)[:5]}" for k, v in now.items() if v - inflicted]
        return corrupt, half, self.lost(gen, committed)


class ExportJsonl(WritePath):
    def target(self) -> Path:
        return self.work / "export.jsonl"

    def prepare(self, gen: int) -> None:
        with KnowledgeStore.open(self.db, FakeEmbedder(rel.DIM), hype=False) as store:
            store.upsert_many(rel.make_docs(range(self.n), marker(gen)))
        if gen % 2:
            self._remove_target()
        super().prepare(gen)
        self.before["target"] = self._target_state(gen)
        self.before["sha"] = _sha(self.db)

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
            marks = {m for line in lines for m in rel.markers(json.loads(line)["title"])}
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
        if _sha(self.db) != self.before["sha"]:
            lost.append("the source database file changed")
        wal = Path(f"{self.db}-wal")
        if wal.exists() and wal.stat().st_size:
            lost.append(f"the source has a {wal.stat().st_size}-byte WAL")
        self.stray = self._stray()
        return corrupt, half, lost

    def check_resumed(self, gen: int) -> list[str]:
        problems = super().check_resumed(gen)
        state = self._target_state(gen)
        if self._stray():  # the next export sweeps what a killed one left
            problems.append(f"{self._stray()} temp file(s) left after the next export")
        if _sha(self.db) != self.before["sha"]:
            problems.append("the source database file changed")
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
        marks = {m for f in files for m in rel.markers(f.read_text(encoding="utf-8"))}
        if len(files) != self.n or len(marks) != 1:
            return f"half: {len(files)} files, markers {sorted(marks)[:3]}"
        return "new" if marks == {marker(gen)} else f"markers {marks}"


PATHS: dict[str, type[WritePath]] = {
    "upsert": Upsert, "upsert_many": UpsertMany, "import": FolderImport, "hype": HypeJob,
    "reembed": Reembed, "doctor_fix": DoctorFix, "import_jsonl": JsonlImport,
    "import_npz": NpzImport, "export_jsonl": ExportJsonl, "export_markdown": ExportMarkdown,
    "copy": Copy,
}


# -- crash trials ------------------------------------------------------------------------


def _committed(stdout: str) -> int:
    counts = [int(line[2:]) for line in stdout.splitlines() if line.startswith("c ")]
    return max(counts, default=0)


def run_path_trials(name: str, workdir: Path, trials: int, n: int = 300,
                    seed: int = 0) -> dict[str, Any]:
    """SIGKILL ``name``'s command at random moments (``trials`` times), check
    the file after each kill, then run the command again to completion."""
    rng = random.Random(f"{name}-{seed}")
    path = PATHS[name](name, workdir, n, rng)
    path.setup()
    log = open(workdir / "children.log", "a")  # noqa: SIM115 - closed below
    stats: dict[str, Any] = {"trials": 0, "documents": n, "killed_mid_way": 0,
                             "finished_before_kill": 0, "corrupt": 0, "half_indexed": 0,
                             "lost": 0, "resumed": 0, "failures": []}
    if name.startswith("export"):
        stats["stray_temp_files"] = 0

    def child(gen: int) -> subprocess.Popen[str]:
        return spawn_module("op-child", "--spec", json.dumps(path.spec(gen)),
                            "--go", workdir / f"go-{gen}", stderr=log)

    def start(proc: subprocess.Popen[str], gen: int) -> None:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{name} child {gen} did not start; see {log.name}")
        (workdir / f"go-{gen}").touch()

    try:
        # Calibration (not a trial): how long a whole run takes after "go".
        path.prepare(0)
        proc = child(0)
        start(proc, 0)
        began = time.monotonic()
        proc.communicate(timeout=600)
        window = max(0.05, time.monotonic() - began)
        stats["window_seconds"] = round(window, 3)
        if proc.returncode:
            stats["failures"].append({"trial": 0, "calibration_exit": proc.returncode})
        proc = child(1)  # each child starts while the previous trial is checked
        for trial in range(1, trials + 1):
            path.prepare(trial)
            start(proc, trial)
            time.sleep(rng.uniform(0, window * 1.05))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                stats["killed_mid_way"] += 1
            else:
                stats["finished_before_kill"] += 1
            stdout, _ = proc.communicate(timeout=120)
            next_proc = child(trial + 1) if trial < trials else None
            _one_trial(path, trial, _committed(stdout or ""), stats)
            if next_proc is not None:
                proc = next_proc
        stats["trials"] = trials
    finally:
        log.close()
    stats["failures"] = stats["failures"][:10]
    return stats


def resume(spec: dict[str, Any]) -> int:
    """The same command again, in this process, to completion (its report
    printing silenced)."""
    with rel.fake_hype(), open(os.devnull, "w") as quiet, \
            contextlib.redirect_stdout(quiet):
        return run_op(spec, child=False)


def _one_trial(path: WritePath, trial: int, committed: int, stats: dict[str, Any]) -> None:
    corrupt, half, lost = path.check_killed(trial, committed)
    stats["corrupt"] += bool(corrupt)
    stats["half_indexed"] += bool(half)
    stats["lost"] += bool(lost)
    if "stray_temp_files" in stats:
        stats["stray_temp_files"] += getattr(path, "stray", 0)
    failure: dict[str, Any] = {}
    if corrupt or half or lost:
        failure.update(corrupt=corrupt, half=half[:5], lost=lost[:5])
    code = 0 if path.finished(trial) else resume(path.spec(trial))
    problems = path.check_resumed(trial)
    if code == 0 and not problems:
        stats["resumed"] += 1
    else:
        failure.update(resume_exit=code, after_resume=problems[:5])
    if failure:
        stats["failures"].append({"trial": trial, **failure})


# -- a delete racing each long operation ---------------------------------------------------

NEW = marker(0)  # the version the raced operation writes


def _race_template(op: str, work: Path, n: int, extra: int) -> tuple[Path, dict[str, Any]]:
    """A seeded store (documents 0..n+extra-1, version m0x0) and the spec of
    ``op``, which writes version m0x1 of documents 0..n-1 (content
    operations) or only derived data (the others)."""
    work.mkdir(parents=True, exist_ok=True)
    template, ws = work / "template.sqlite", work / "ws"
    everything = range(n + extra)
    _seed(template, everything, hype=op in ("reembed", "doctor_fix"))
    if op in ("import", "import_npz"):
        write_workspace(ws, range(n), NEW)
    argv = {
        "import": ["import", "--no-prune", "--no-hype", str(ws)],
        "import_npz": ["import-npz", "--workspace", str(ws), "--no-prune", "--no-hype",
                       str(work / "embeddings.npz")],
        "import_jsonl": ["import-jsonl", "--no-hype", str(work / "records.jsonl")],
        "hype": ["hype", "--concurrency", "2"],
        "reembed": ["reembed", "--embedder", "fake", "--dim", "32"],
        "doctor_fix": ["doctor", "--fix"],
        "copy": ["copy", str(work / "source.sqlite")],
    }
    if op == "copy":
        with KnowledgeStore.open(work / "source.sqlite", FakeEmbedder(rel.DIM),
                                 hype=False) as source:
            source.upsert_many(rel.make_docs(range(n), NEW))
    if op == "import_npz":
        write_npz(work / "embeddings.npz", ws, range(n), NEW)
    if op == "import_jsonl":
        write_jsonl(work / "records.jsonl", range(n), NEW)
    if op == "upsert_many":
        return template, {"kind": "upsert_many", "n": n, "marker": NEW, "hype": False,
                          "batch": 16}
    return template, {"kind": "cli", "argv": argv[op]}


def _with_db(spec: dict[str, Any], db: Path) -> dict[str, Any]:
    if spec["kind"] != "cli":
        return {**spec, "db": str(db)}
    command, *rest = spec["argv"]
    if command == "copy":  # copy SRC DST: the raced store is the destination
        return {"kind": "cli", "argv": [command, *rest, str(db)]}
    return {"kind": "cli", "argv": [command, "--db", str(db), *rest]}


def run_race(op: str, workdir: Path, rounds: int = 1, n: int = 300, extra: int = 60,
             deletes: int = 20, seed: int = 0) -> dict[str, Any]:
    """``op`` runs while another process deletes ``deletes`` documents at
    random moments of its calibrated run time, ``rounds`` times."""
    rng = random.Random(f"race-{op}-{seed}")
    template, spec = _race_template(op, workdir, n, extra)
    content = spec["kind"] != "cli" or op.startswith("import") or op == "copy"
    stats: dict[str, Any] = {"rounds": rounds, "deletes": 0, "resurrected": 0, "lost": 0,
                             "errors": [], "store_damage": [], "samples": []}

    def fresh(name: str) -> Path:
        db = workdir / f"{name}.sqlite"
        shutil.copyfile(template, db)
        if op == "doctor_fix":
            inflict_damage(db, rng)
        return db

    # Calibration: the operation alone, from "go" to its end, in a child.
    db = fresh("calibration")
    with open(workdir / "calibration.err", "w") as err:
        proc = spawn_module("op-child", "--spec", json.dumps(_with_db(spec, db)),
                            "--go", workdir / "go-calibration", stderr=err)
        rel._start_together([proc], workdir / "go-calibration")
        began = time.monotonic()
        proc.communicate(timeout=600)
    window = max(0.1, time.monotonic() - began)
    stats["window_seconds"] = round(window, 3)
    if proc.returncode:
        stats["errors"].append(f"calibration run exited {proc.returncode}")
    for r in range(rounds):
        db = fresh(f"round-{r}")
        inside = rng.sample(range(n), deletes // 2) if content else []
        victims = [rel.doc_path(i) for i in inside + rng.sample(
            range(n if content else 0, n + extra), deletes - len(inside))]
        plan = sorted([rng.uniform(0, window), p] for p in victims)
        go = workdir / f"go-{r}"
        with open(workdir / f"op-{r}.err", "w+") as err, \
                open(workdir / f"deleter-{r}.err", "w+") as derr:
            procs = [spawn_module("op-child", "--spec", json.dumps(_with_db(spec, db)),
                                  "--go", go, stderr=err),
                     spawn_module("deleter", "--db", db, "--plan", json.dumps(plan),
                                  "--go", go, stderr=derr)]
            rel._start_together(procs, go)
            out_op, _ = procs[0].communicate(timeout=600)
            out_del, _ = procs[1].communicate(timeout=600)
            err.seek(0)
            derr.seek(0)
            fails = [line for line in (out_op or "").splitlines() if line.startswith("FAIL")]
            problems = [f"{op} exited {procs[0].returncode}: {err.read()[-300:]} {fails[:3]}"
                        if procs[0].returncode else ""]
            problems += [f"deleter: {line}" for line in derr.read().splitlines()
                         if "Error" in line or "Traceback" in line][:3]
        result: dict[str, Any] = json.loads(out_del.splitlines()[-1]) if out_del.strip() else \
            {"deleted": {}, "errors": [f"deleter exited {procs[1].returncode}"]}
        stats["errors"] += [p for p in problems if p] + result["errors"]
        stats["deletes"] += sum(result["deleted"].values())
        _judge_race(op, db, n, extra, set(victims), stats)
    return stats


def _judge_race(op: str, db: Path, n: int, extra: int, victims: set[str],
                stats: dict[str, Any]) -> None:
    now = _contents(db)
    content = op in ("import", "import_npz", "import_jsonl", "upsert_many", "copy")
    resurrected, lost = [], []
    for i in range(n + extra):
        path = rel.doc_path(i)
        have = next(iter(rel.markers(now[path][0])), "?") if path in now else None
        written = content and i < n
        if path in victims:
            # Deleted before the operation wrote it: the new version is right.
            if have is not None and not (written and have == NEW):
                resurrected.append(f"{path}: {have}")
        elif have != (NEW if written else SEED_MARKER):
            lost.append(f"{path}: {have}")
    counts = rel.check_store(db)
    damage = [f"{k}={v}" for k, v in counts.items() if v and k != "documents"]
    if op == "reembed":
        damage += _vectors_match(db)[:3]
        with _ro(db) as conn:
            dim = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'embedder'"
                                          ).fetchone()[0])["dim"]
        damage += [f"dim {dim} after reembed"] if dim != 32 else []
    if op == "hype":
        with _ro(db) as conn:
            without = [r[0] for r in conn.execute(
                "SELECT path FROM documents d WHERE NOT EXISTS (SELECT 1 FROM derived h "
                "WHERE h.doc_id = d.id AND h.kind = 'hype_questions' AND h.status = 'ok')")]
        lost += [f"{p}: no questions" for p in without]
    stats["resurrected"] += len(resurrected)
    stats["lost"] += len(lost)
    stats["store_damage"] += damage
    stats["samples"] = (stats["samples"] + resurrected[:3] + lost[:3])[:10]


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    op = sub.add_parser("op-child")
    op.add_argument("--spec", required=True)
    dl = sub.add_parser("deleter")
    dl.add_argument("--db", required=True)
    dl.add_argument("--plan", required=True)
    for p in (op, dl):
        p.add_argument("--go", default=None)
    args = parser.parse_args(argv)
    if args.command == "op-child":
        op_child(args.spec, args.go)
    else:
        deleter_child(args.db, args.plan, args.go)


if __name__ == "__main__":
    main()

"""Reliability harness: SIGKILL trials, concurrent processes, a migration race
and hostile queries against one kbstore file.

    python benchmarks/reliability.py                  # 100 trials, 60 s of concurrency
    python benchmarks/reliability.py --trials 20 --seconds 10 --fuzz 500

writes benchmarks/results/reliability.json and .md. Every write path under
SIGKILL and under a racing delete: benchmarks/reliability_paths.py; bad input
for every importer: benchmarks/reliability_fuzz.py. tests/sqlite/test_reliability.py
runs the same functions with CI-sized bounds. The worker sub-commands (crash-child,
writer, reader, open-child) are the child processes this file starts; each
prints "ready", waits for a go-file so the processes start together, and
prints one JSON line of counts at the end.

Every document carries a *marker* (``m<writer>x<version>``) in its title AND
at the end of its body, written by the same upsert: a reader that ever sees
two different markers in one document has seen a half-written document.
No model and no LLM is used: FakeEmbedder, and HyPE questions come from a
stand-in for ``kbstore.hype.generate``.

The workers use kbstore's public API only. The checker (:func:`check_store`,
:func:`consistency`) is independent of kbstore's own code on purpose: it
reads the SQLite file with plain SQL through a read-only connection, so it
can check kbstore.doctor and the write path rather than trust them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kbstore import Document, EmptyQueryError, FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite.connection import connect
from kbstore.ingest import make_document
from kbstore.model import fingerprint_id

DIM = 64
SLOTS = 32  # vector_id = doc_id * SLOTS + slot in the SQLite file
THIS = Path(__file__).resolve()
RESULTS = THIS.parent / "results" / "reliability.json"
MARKER = re.compile(r"\bm\d+x\d+\b")
VOCAB = ("alpha backup cache deploy error flask git http index json kernel lambda merge "
         "network oauth python queue redis sqlite token unicode vector webhook yaml zeta "
         "sourdough garden battery sensor journal release rollback schema docker").split()


# -- documents ------------------------------------------------------------


def doc_path(i: int) -> str:
    return f"projects/doc-{i:04d}.md"


def make_docs(ids: Iterable[int], marker: str) -> list[Document]:
    """Short bodies (< 150 chars) so a search snippet always shows the marker."""
    docs = []
    for i in ids:
        words = " ".join(VOCAB[(i * k + k) % len(VOCAB)] for k in (1, 3, 7, 11, 13))
        docs.append(make_document(doc_path(i), title=f"doc {i} {marker}",
                                  body=f"{words} note {i}. marker {marker}",
                                  tags=[VOCAB[i % len(VOCAB)]]))
    return docs


def markers(text: str) -> set[str]:
    return set(MARKER.findall(text))


@contextlib.contextmanager
def fake_hype() -> Iterator[None]:
    """Stand in for the LLM: two questions per document, instantly."""
    from kbstore import hype

    real = hype.generate
    hype.generate = lambda config, title, body: [f"what is {title}?", f"how do I use {title}?"]
    try:
        yield
    finally:
        hype.generate = real


def open_store(db: str | os.PathLike[str], hype: bool = True) -> KnowledgeStore:
    return KnowledgeStore.open(db, FakeEmbedder(DIM), hype=hype)


# -- the oracle: everything a store must satisfy, checked with plain SQL -----


def read_only(db: str | os.PathLike[str]) -> Any:
    """A connection that cannot change the file (sqlite-vec loaded, so the
    vec0 table can be read)."""
    return connect(db, mode="read")


def damaged_ids(conn: Any) -> tuple[int, dict[str, set[int]]]:
    """(documents, {kind of half-indexed state: document ids}) in ONE read
    snapshot (every set empty for a healthy store). Written independently of
    kbstore.doctor so each can check the other."""
    conn.execute("BEGIN")
    try:
        docs = {r[0]: Document(path=r[1], title=r[2], body=r[3], tags=json.loads(r[4]))
                for r in conn.execute("SELECT id, path, title, body, tags FROM documents")}
        fts = {r[0] for r in conn.execute("SELECT id FROM documents_fts_docsize")}
        bits = {r[0]: r[1] for r in conn.execute("SELECT vector_id, doc_id FROM vectors")}
        floats = {r[0]: (r[1], r[2]) for r in conn.execute(
            "SELECT vector_id, doc_id, length(embedding) FROM vector_data")}
        questions = {(r[0], r[1]) for r in conn.execute(
            "SELECT doc_id, position FROM hype_questions")}
        derived = {(r[0], r[1]): (r[2], r[3], r[4]) for r in conn.execute(
            "SELECT doc_id, kind, content_hash, status, model FROM derived")}
        tags_want = set(conn.execute(
            "SELECT lower(trim(j.value)), d.id FROM documents d, json_each(d.tags) j "
            "WHERE trim(j.value) <> ''").fetchall())
        tags_have = set(conn.execute("SELECT tag, doc_id FROM document_tags").fetchall())
        row = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
        vec_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'"
                               ).fetchone()
    finally:
        conn.execute("COMMIT")
    ids = set(docs)
    fingerprint = json.loads(row[0]) if row else {}
    fp, dim = fingerprint_id(fingerprint), fingerprint.get("dim")
    vec_dim = re.search(r"bit\[(\d+)\]", vec_sql[0] if vec_sql else "")
    # A vector is complete when both its sign bits (vec0) and floats exist.
    vectors = {v: d for v, d in bits.items() if floats.get(v, (None,))[0] == d}
    plain = {v: d for v, (d, _) in floats.items()}
    asked = {d for d, _ in questions}
    return len(docs), {
        "missing_fts": ids - fts,
        "orphan_fts": fts - ids,
        "missing_doc_vector": {d for d in ids if d * SLOTS not in vectors},
        "missing_hash_row": {d for d in ids if (d, "doc_vector") not in derived},
        "stale_hash": {d for d in ids if (d, "doc_vector") in derived
                       and derived[d, "doc_vector"][0] != docs[d].vector_hash()},
        "missing_question_vector": {d for d, p in questions if d * SLOTS + p not in vectors},
        # Questions are current for the content they sit with, and marked so.
        "stale_questions": {d for d in asked & ids
                            if derived.get((d, "hype_questions"), ("", "", ""))[:2]
                            != (docs[d].hype_hash(), "ok")
                            or derived.get((d, "hype_vectors"), ("",))[0]
                            != docs[d].hype_hash()},
        "orphan_vectors": {v // SLOTS for rows in (bits, plain) for v, d in rows.items()
                           if v // SLOTS not in ids or d != v // SLOTS
                           or (v % SLOTS and (v // SLOTS, v % SLOTS) not in questions)},
        "orphan_questions": {d for d, _ in questions if d not in ids},
        "orphan_derived": {d for d, _ in derived if d not in ids},
        # Every vector is the stored embedder's: its model, its size (never a
        # mix of an old and a new embedder).
        "wrong_model_vectors": {d for (d, kind), (_, _, model) in derived.items()
                                if kind in ("doc_vector", "hype_vectors") and model != fp}
        | {v // SLOTS for v, (_, size) in floats.items() if size != 4 * (dim or 0)}
        | ({-1} if vec_dim is None or int(vec_dim.group(1)) != dim else set()),
        "tag_rows": {d for _, d in tags_want ^ tags_have},
        "half_written": {i for i, d in docs.items()
                         if len(markers(d.title) | markers(d.body)) > 1},
    }


def consistency(conn: Any) -> dict[str, int]:
    """Counts of every kind of half-indexed state in ONE read snapshot (all 0
    for a healthy store); see :func:`damaged_ids`."""
    documents, found = damaged_ids(conn)
    return {"documents": documents, **{k: len(v) for k, v in found.items()}}


def check_store(db: str | os.PathLike[str]) -> dict[str, int]:
    """File integrity plus :func:`consistency`, for a store nobody writes to."""
    conn = read_only(db)
    try:
        out = {"integrity": 0 if [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
               else 1, "fts_integrity": 0}
        # FTS5's integrity-check is spelled as an INSERT (it writes nothing):
        # the read-only connection allows it for this statement only.
        conn.execute("PRAGMA query_only = OFF")
        try:
            for table in ("documents_fts", "titles_fts"):  # constants
                try:
                    conn.execute(f"INSERT INTO {table} ({table}, rank) "
                                 "VALUES ('integrity-check', 1)")
                except Exception:
                    out["fts_integrity"] += 1
        finally:
            conn.execute("PRAGMA query_only = ON")
        out.update(consistency(conn))
    finally:
        conn.close()
    return out


def damage(counts: dict[str, int]) -> tuple[int, int]:
    """(corrupt, half-indexed) from check_store counts."""
    corrupt = counts["integrity"] + counts["fts_integrity"]
    half = sum(v for k, v in counts.items()
               if k not in ("integrity", "fts_integrity", "documents"))
    return corrupt, half


# -- child processes --------------------------------------------------------


def _ready_and_wait(go: str | None, timeout: float = 300) -> None:
    print("ready", flush=True)
    deadline = time.monotonic() + timeout
    while go and not os.path.exists(go):
        if time.monotonic() > deadline:  # the harness died: do not linger
            sys.exit("no go-file; giving up")
        time.sleep(0.001)


def spawn(command: str, *args: Any, stderr: Any = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(THIS), command, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=stderr, text=True)


def _start_together(procs: list[subprocess.Popen[str]], go: Path) -> None:
    try:
        for proc in procs:
            line = proc.stdout.readline() if proc.stdout else ""
            if line.strip() != "ready":
                raise RuntimeError(f"worker did not start: {line!r}")
        go.touch()
    except BaseException:
        for proc in procs:
            proc.kill()
            proc.wait()
        raise


def _results(procs: list[subprocess.Popen[str]], timeout: float) -> list[dict[str, Any]]:
    out = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=timeout)
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        out.append(json.loads(lines[-1]) if lines else
                   {"errors": [f"worker exited {proc.returncode} without a report"]})
    return out


def crash_child(db: str, n: int, gen: int, batch: int, seed: int, go: str | None) -> None:
    """Import n documents (version ``gen``; 0 is the calibration run) with
    HyPE, then delete 5% of them."""
    with fake_hype(), open_store(db) as store:
        _ready_and_wait(go)
        store.upsert_many(make_docs(range(n), f"m0x{gen or 99999}"), batch_size=batch)
        for i in random.Random(seed).sample(range(n), n // 20):
            store.delete(doc_path(i))
        print("done", flush=True)


def writer(db: str, seconds: float, seed: int, wid: int, own: range, shared: range,
           go: str | None) -> dict[str, Any]:
    """Upsert random batches (new versions of own and shared documents, new
    documents), delete some own ones; report the last version written per path."""
    rng = random.Random(seed)
    final: dict[str, str | None] = {}
    live: set[int] = set()  # own documents this writer has written and not deleted
    stats: dict[str, Any] = {"ops": 0, "docs_written": 0, "deletes": 0, "errors": []}
    with fake_hype(), open_store(db) as store:
        _ready_and_wait(go)
        deadline = time.monotonic() + seconds
        version = 0
        while time.monotonic() < deadline:
            try:
                if live and rng.random() < 0.1:
                    victim = rng.choice(sorted(live))
                    store.delete(doc_path(victim))
                    final[doc_path(victim)] = None
                    live.discard(victim)
                    stats["deletes"] += 1
                else:
                    version += 1
                    marker = f"m{wid}x{version}"
                    ids = rng.sample(own, rng.randint(1, 12))
                    if shared and rng.random() < 0.5:
                        ids += rng.sample(shared, rng.randint(1, min(4, len(shared))))
                    store.upsert_many(make_docs(ids, marker), batch_size=rng.choice((4, 64)))
                    final.update((doc_path(i), marker) for i in ids)
                    live.update(i for i in ids if i in own)
                    stats["docs_written"] += len(ids)
                stats["ops"] += 1
            except Exception as exc:  # an error that reached the caller
                stats["errors"].append(f"{type(exc).__name__}: {exc}")
    stats["final"] = final
    return stats


def reader(db: str, seconds: float, seed: int, go: str | None) -> dict[str, Any]:
    """Search and read while others write, through the public API: every hit's
    title and snippet, and every document read, come from one version. In
    between, the checker's own read snapshot of the whole file must show no
    half-indexed document (no document without its vector or hash row, no
    vector without its document)."""
    rng = random.Random(seed)
    stats: dict[str, Any] = {"searches": 0, "gets": 0, "hits_checked": 0, "snapshots": 0,
                             "half_written": [], "errors": []}

    def bad(what: str) -> None:
        if len(stats["half_written"]) < 20:
            stats["half_written"].append(what)
        stats.setdefault("half_written_count", 0)
        stats["half_written_count"] += 1

    with open_store(db, hype=False) as store, contextlib.closing(read_only(db)) as checker:
        _ready_and_wait(go)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            query = " ".join(rng.sample(VOCAB, rng.randint(1, 3)))
            try:
                hits = store.search(query, limit=10)
                stats["searches"] += 1
                for hit in hits:
                    stats["hits_checked"] += 1
                    if len(markers(hit.title) | markers(hit.snippet)) > 1:
                        bad(f"hit {hit.path}: title {hit.title!r} / snippet {hit.snippet!r}")
                for path in [h.path for h in hits[:3]] + [doc_path(rng.randrange(400))]:
                    doc = store.get(path)
                    stats["gets"] += 1
                    if doc is not None and len(markers(doc.title) | markers(doc.body)) > 1:
                        bad(f"get {path}: title {doc.title!r}, body {doc.body[-12:]!r}")
                counts = consistency(checker)
                stats["snapshots"] += 1
                damaged = {k: v for k, v in counts.items() if v and k != "documents"}
                if damaged:
                    bad(f"snapshot {stats['snapshots']}: {damaged}")
            except Exception as exc:
                stats["errors"].append(f"{type(exc).__name__}: {exc}")
    stats["half_written_count"] = stats.get("half_written_count", 0)
    return stats


def open_child(db: str, k: int, go: str | None) -> dict[str, Any]:
    """Open (create) the store at the same moment as others, then write one document."""
    import sqlite_utils  # noqa: F401 - imported before the race, not during it

    _ready_and_wait(go)
    try:
        with open_store(db, hype=False) as store:
            store.upsert(f"projects/racer-{k}.md", title=f"racer {k}", body=f"opened by {k}")
        return {"errors": []}
    except Exception as exc:
        return {"errors": [f"{type(exc).__name__}: {exc}"]}


# -- scenarios --------------------------------------------------------------


def run_crash_trials(workdir: Path, trials: int, n: int = 1000, seed: int = 0,
                     batch: int = 32) -> dict[str, Any]:
    """SIGKILL an importing child at a random moment, then check the file,
    run kbstore.doctor on it and re-import everything in this process.

    The next child starts (and opens the store) while this process checks,
    and begins importing only when its go-file appears.
    """
    from kbstore.doctor import diagnose

    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "crash.sqlite"
    rng = random.Random(seed)
    log = open(workdir / "crash-children.log", "a")  # noqa: SIM115 - closed below
    stats: dict[str, Any] = {"trials": 0, "documents": n, "killed_mid_import": 0,
                             "finished_before_kill": 0, "corrupt": 0, "half_indexed": 0,
                             "doctor_problems": 0, "reimports_completed": 0, "failures": []}

    def child(gen: int) -> subprocess.Popen[str]:
        proc = spawn("crash-child", "--db", db, "--n", n, "--gen", gen, "--batch",
                     rng.choice((8, 32, 64)) if gen else batch, "--seed", seed + gen,
                     "--go", workdir / f"go-{gen}", stderr=log)
        return proc

    def start(proc: subprocess.Popen[str], gen: int) -> None:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":  # the store is open
            raise RuntimeError(f"crash child {gen} did not start; see {log.name}")
        (workdir / f"go-{gen}").touch()

    try:
        _seed_store(db, n)  # children only open the file, then update every document
        # Calibration run (not a trial): how long an update run takes after "go".
        proc = child(0)
        start(proc, 0)
        started = time.monotonic()
        proc.communicate(timeout=300)
        window = max(0.05, time.monotonic() - started)
        stats["window_seconds"] = round(window, 3)
        proc = child(1)
        for trial in range(1, trials + 1):
            start(proc, trial)
            time.sleep(rng.uniform(0, window * 1.05))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                stats["killed_mid_import"] += 1
            else:
                stats["finished_before_kill"] += 1
            proc.communicate(timeout=60)
            next_proc = child(trial + 1) if trial < trials else None
            _check_after_kill(db, trial, n, stats, diagnose, last=trial == trials)
            proc = next_proc
        stats["trials"] = trials
    finally:
        log.close()
    return stats


def _check_after_kill(db: Path, trial: int, n: int, stats: dict[str, Any],
                      diagnose: Any, last: bool) -> None:
    counts = check_store(db)
    corrupt, half = damage(counts)
    with fake_hype(), open_store(db) as store:
        report = diagnose(store)
        # The re-import must complete. Its result is checked in full by the
        # next trial's check_store (and here after the last trial).
        store.upsert_many(make_docs(range(n), f"m0x{trial}"), batch_size=64)
        titles = [d.title for d in store.documents()]
    if corrupt or half or not report.ok:
        stats["failures"].append({"trial": trial, **{k: v for k, v in counts.items() if v},
                                  "doctor": [c.name for c in report.problems]})
    stats["corrupt"] += bool(corrupt)
    stats["half_indexed"] += bool(half)
    stats["doctor_problems"] += bool(report.problems)
    after = check_store(db) if last else {"integrity": 0, "fts_integrity": 0}
    if (len(titles) == n and all(t.endswith(f" m0x{trial}") for t in titles)
            and damage(after) == (0, 0)):
        stats["reimports_completed"] += 1
    else:
        stats["failures"].append({"trial": trial, "reimport": after, "documents": len(titles)})


def _seed_store(db: Path, n: int) -> None:
    with fake_hype(), open_store(db) as store:
        store.upsert_many(make_docs(range(n), "m0x0"))


def _expected(finals: list[dict[str, str | None]], seeded: int) -> dict[str, set[str | None]]:
    """path -> markers the final state may hold (several only for paths more
    than one writer wrote: whichever committed last)."""
    allowed: dict[str, set[str | None]] = {doc_path(i): {"m0x0"} for i in range(seeded)}
    touched: dict[str, set[str | None]] = {}
    for final in finals:
        for path, marker in final.items():
            touched.setdefault(path, set()).add(marker)
    allowed.update(touched)
    return allowed


def _lost_writes(db: Path, allowed: dict[str, set[str | None]]) -> list[str]:
    with contextlib.closing(read_only(db)) as conn:
        stored = {p: t for p, t in conn.execute("SELECT path, title FROM documents")}
    lost = []
    for path, options in allowed.items():
        have = next(iter(markers(stored[path])), "?") if path in stored else None
        if have not in options:
            lost.append(f"{path}: stored {have}, expected one of {sorted(map(str, options))}")
    lost += [f"{p}: unexpected document" for p in stored if p not in allowed
             and not p.startswith("projects/racer-")]
    return lost


def run_concurrency(workdir: Path, seconds: float, readers: int = 4, seed: int = 0,
                    seeded: int = 300) -> dict[str, Any]:
    """One writer (updates, inserts, deletes) and ``readers`` searching processes."""
    workdir.mkdir(parents=True, exist_ok=True)
    db, go = workdir / "concurrent.sqlite", workdir / "go-concurrency"
    _seed_store(db, seeded)
    procs = [spawn("writer", "--db", db, "--seconds", seconds, "--seed", seed, "--wid", 1,
                   "--own", f"0:{seeded + 100}", "--go", go)]
    procs += [spawn("reader", "--db", db, "--seconds", seconds, "--seed", seed + 1 + r,
                    "--go", go) for r in range(readers)]
    _start_together(procs, go)
    results = _results(procs, timeout=seconds + 120)
    wstats, rstats = results[0], results[1:]
    lost = _lost_writes(db, _expected([wstats.get("final", {})], seeded))
    counts = check_store(db)
    return {
        "seconds": seconds, "readers": readers,
        "writer_ops": wstats.get("ops", 0), "docs_written": wstats.get("docs_written", 0),
        "deletes": wstats.get("deletes", 0),
        "searches": sum(r.get("searches", 0) for r in rstats),
        "hits_checked": sum(r.get("hits_checked", 0) for r in rstats),
        "snapshots_checked": sum(r.get("snapshots", 0) for r in rstats),
        "errors": [e for r in results for e in r.get("errors", [])],
        "half_written": sum(r.get("half_written_count", 0) for r in rstats),
        "half_written_samples": [s for r in rstats for s in r.get("half_written", [])][:5],
        "lost_writes": lost[:20], "lost_write_count": len(lost),
        "store_damage": {k: v for k, v in counts.items() if v and k != "documents"},
    }


def run_two_writers(workdir: Path, seconds: float, seed: int = 0,
                    seeded: int = 200) -> dict[str, Any]:
    """Two writers (a daemon and a CLI) with their own documents and shared
    new ones they both create: they must serialize without an error."""
    workdir.mkdir(parents=True, exist_ok=True)
    db, go = workdir / "two-writers.sqlite", workdir / "go-two-writers"
    _seed_store(db, seeded)
    half = seeded // 2
    shared = f"{seeded}:{seeded + 20}"  # not seeded: both writers race to insert them
    procs = [spawn("writer", "--db", db, "--seconds", seconds, "--seed", seed + w, "--wid", w,
                   "--own", own, "--shared", shared, "--go", go)
             for w, own in ((1, f"0:{half}"), (2, f"{half}:{seeded}"))]
    _start_together(procs, go)
    results = _results(procs, timeout=seconds + 120)
    lost = _lost_writes(db, _expected([r.get("final", {}) for r in results], seeded))
    counts = check_store(db)
    return {
        "seconds": seconds,
        "writer_ops": sum(r.get("ops", 0) for r in results),
        "docs_written": sum(r.get("docs_written", 0) for r in results),
        "errors": [e for r in results for e in r.get("errors", [])],
        "lost_writes": lost[:20], "lost_write_count": len(lost),
        "store_damage": {k: v for k, v in counts.items() if v and k != "documents"},
    }


def run_migration_race(workdir: Path, procs: int = 6, rounds: int = 3) -> dict[str, Any]:
    """``procs`` processes create the same brand-new file at once, ``rounds`` times."""
    workdir.mkdir(parents=True, exist_ok=True)
    stats: dict[str, Any] = {"rounds": rounds, "processes": procs, "errors": [],
                             "bad_schema": []}
    for r in range(rounds):
        db, go = workdir / f"race-{r}.sqlite", workdir / f"go-race-{r}"
        workers = [spawn("open-child", "--db", db, "--k", k, "--go", go) for k in range(procs)]
        _start_together(workers, go)
        for result in _results(workers, timeout=120):
            stats["errors"] += result.get("errors", [])
        with contextlib.closing(read_only(db)) as conn:
            migrations = conn.execute("SELECT migration_set, name, count(*) FROM "
                                      "_sqlite_migrations GROUP BY 1, 2").fetchall()
            vec = conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'vectors'"
                               ).fetchone()[0]
            docs = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        from kbstore.migrations import steps

        ok = (sorted((m[1], m[2]) for m in migrations) == sorted((name, 1) for name, _ in
                                                                 steps("sqlite"))
              and vec == 1 and docs == procs and damage(check_store(db)) == (0, 0))
        if not ok:
            stats["bad_schema"].append({"round": r, "migrations": migrations,
                                        "vectors_table": vec, "documents": docs})
    return stats


# -- hostile queries ----------------------------------------------------------

HOSTILE_PIECES = (
    'AND', 'OR', 'NOT', 'NEAR(', 'NEAR/3', '(', ')', '"', "'", '""', '*', '^', ':', '-', '+',
    'title:', 'body : x', '{title tags}:', 'rank', 'bm25(', ';', '--', '/*', 'DROP TABLE',
    '\x00', '\\', '%', '_', '\u202e', '\u200b', '\u200f', 'שלום', 'مرحبا', '日本語', 'ñandú',
    'e\u0301', '🙂', '👩‍👩‍👧', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', '\ufeff', '\t', '\n', ' ', 'ǅ', 'ﷺ', 'sqlite', 'deploy',
)


def hostile_query(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.05:
        return rng.choice(HOSTILE_PIECES) * rng.randint(1_000, 100_000 // 2)  # ~100 KB
    if kind < 0.1:
        # Any code point; lone surrogates cannot come from UTF-8 input, so '?' them.
        text = "".join(chr(rng.randint(1, 0x10FFFF)) for _ in range(rng.randint(1, 50)))
        return text.encode("utf-8", "replace").decode("utf-8")
    return " ".join(rng.choice(HOSTILE_PIECES) for _ in range(rng.randint(1, 12)))


def search_never_raises(store: KnowledgeStore, query: str) -> str | None:
    """None when the query behaved; else what went wrong."""
    try:
        hits = store.search(query, limit=5)
    except EmptyQueryError:
        return None if not query.replace("\x00", " ").strip() else "EmptyQueryError on " \
            f"non-blank {query[:40]!r}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc} for {query[:40]!r}"
    if not query.strip():
        return f"blank query {query[:40]!r} returned {len(hits)} hit(s)"
    return None


def run_query_fuzz(workdir: Path, cases: int, seed: int = 0) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "fuzz.sqlite"
    _seed_store(db, 200)
    rng = random.Random(seed)
    failures = []
    with open_store(db, hype=False) as store:
        for _ in range(cases):
            problem = search_never_raises(store, hostile_query(rng))
            if problem:
                failures.append(problem)
    return {"cases": cases, "crashes": len(failures), "samples": failures[:10]}


# -- command line -------------------------------------------------------------


def _range(text: str) -> range:
    start, _, stop = text.partition(":")
    return range(int(start), int(stop)) if text else range(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="all scenarios (default)")
    for p in (parser, run):
        p.add_argument("--trials", type=int, default=100)
        p.add_argument("--seconds", type=float, default=60.0)
        p.add_argument("--fuzz", type=int, default=2000)
        p.add_argument("--workdir", default=None)
        p.add_argument("--out", default=str(RESULTS))
        p.add_argument("--only", default=None,
                       help="comma-separated scenarios to run (merged into --out): crash, "
                            "concurrency, ..., path:NAME, race:NAME, fuzz:NAME, or paths, "
                            "races, fuzzers for a whole group")
        p.add_argument("--docs", type=int, default=200, help="documents per write path")
        p.add_argument("--rounds", type=int, default=10, help="rounds per race")
        p.add_argument("--fuzz-inputs", type=int, default=300, help="inputs per fuzzer")
    crash = sub.add_parser("crash-child")
    crash.add_argument("--n", type=int, default=1000)
    crash.add_argument("--gen", type=int, default=1)
    crash.add_argument("--batch", type=int, default=32)
    w = sub.add_parser("writer")
    r = sub.add_parser("reader")
    o = sub.add_parser("open-child")
    for p in (crash, w, r, o):
        p.add_argument("--db", required=True)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--go", default=None)
    for p in (w, r):
        p.add_argument("--seconds", type=float, default=10.0)
    w.add_argument("--wid", type=int, default=1)
    w.add_argument("--own", default="0:300")
    w.add_argument("--shared", default="")
    o.add_argument("--k", type=int, default=0)
    args = parser.parse_args(argv)

    if args.command == "crash-child":
        crash_child(args.db, args.n, args.gen, args.batch, args.seed, args.go)
    elif args.command == "writer":
        print(json.dumps(writer(args.db, args.seconds, args.seed, args.wid, _range(args.own),
                                _range(args.shared), args.go)), flush=True)
    elif args.command == "reader":
        print(json.dumps(reader(args.db, args.seconds, args.seed, args.go)), flush=True)
    elif args.command == "open-child":
        print(json.dumps(open_child(args.db, args.k, args.go)), flush=True)
    else:
        _run_all(args)


def _scenarios(args: argparse.Namespace, work: Path) -> list[tuple[str, Any]]:
    """(name, thunk) of every scenario; write paths as ``path:NAME``, races as
    ``race:NAME``, input fuzzers as ``fuzz:NAME``."""
    from benchmarks import reliability_fuzz as fuzz
    from benchmarks import reliability_paths as paths

    out: list[tuple[str, Any]] = [
        ("crash", lambda: run_crash_trials(work / "crash", args.trials)),
        ("concurrency", lambda: run_concurrency(work / "conc", args.seconds)),
        ("two_writers", lambda: run_two_writers(work / "two", min(args.seconds, 20))),
        ("migration_race", lambda: run_migration_race(work / "race", procs=8, rounds=5)),
        ("query_fuzz", lambda: run_query_fuzz(work / "fuzz", args.fuzz)),
    ]
    for name in paths.CRASH_PATHS:
        out.append((f"path:{name}", lambda name=name: paths.run_path_trials(
            name, work / f"path-{name}", args.trials, n=args.docs)))
    for name in paths.RACE_OPS:
        out.append((f"race:{name}", lambda name=name: paths.run_race(
            name, work / f"race-{name}", rounds=args.rounds, n=args.docs)))
    for name, fn in fuzz.FUZZERS.items():
        out.append((f"fuzz:{name}", lambda fn=fn, name=name: fn(work / f"fuzz-{name}",
                                                                 args.fuzz_inputs)))
    return out


GROUPS = {"path": "paths", "race": "races", "fuzz": "fuzzers"}


def _selected(name: str, only: set[str] | None) -> bool:
    return only is None or name in only or GROUPS.get(name.split(":")[0]) in only


def _run_all(args: argparse.Namespace) -> None:
    import tempfile

    from benchmarks.reliability_report import write_markdown

    out = Path(args.out)
    only = set(args.only.split(",")) if args.only else None
    results: dict[str, Any] = json.loads(out.read_text()) if only and out.exists() else {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        for name, fn in _scenarios(args, work):
            if not _selected(name, only):
                continue
            started = time.perf_counter()
            result = fn()
            result["elapsed_seconds"] = round(time.perf_counter() - started, 1)
            group, _, key = name.partition(":")
            if key:
                results.setdefault(GROUPS[group], {})[key] = result
            else:
                results[name] = result
            print(f"{name}: " + json.dumps({k: v for k, v in result.items()
                                            if not isinstance(v, (list, dict)) or not v}),
                  flush=True)
            # Written after every scenario: a long run that is stopped keeps its figures.
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n",
                           encoding="utf-8")
            write_markdown(results, out.with_suffix(".md"))
    print(f"wrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    sys.path.insert(0, str(THIS.parents[1]))  # the write paths and fuzzers live beside
    main()

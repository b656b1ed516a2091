"""A delete racing each long write operation.

Each operation (``kbstore import``, ``import-npz``, ``import-jsonl``,
``hype``, ``reembed``, ``doctor --fix``, also with ``--embedder`` on a file
that lost its fingerprint, ``copy``, ``copy --prune``, ``upsert_many`` or
``delete_many``) runs in a child process while another process deletes
documents through the public API: deleted documents must stay deleted,
nothing else may be lost, and neither process may see an error.

``copy --prune`` deletes the documents its source lacks (the ``extra`` ones):
the racing process also writes new documents the source lacks. Each of those
may be kept (written after the copy listed the destination) or deleted with
the extra ones, and the deletions the copy reports (``--json``: ``pruned``)
must be exactly the extra ones plus the racing documents that went:
*unaccounted* counts the difference.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from benchmarks.reliability_admin_paths import sql_write
from benchmarks.reliability_check import (
    check_store,
    contents,
    embedder_dim,
    vectors_match,
    without_questions,
)
from benchmarks.reliability_docs import (
    SEED_MARKER,
    clone_store,
    doc_path,
    make_docs,
    markers,
    new_store,
    open_store,
    seed_store,
)
from benchmarks.reliability_path_inputs import (
    inflict_damage,
    marker,
    write_jsonl,
    write_npz,
    write_workspace,
)
from benchmarks.reliability_paths import RACER_MARKER, spawn_module
from benchmarks.reliability_workers import start_together

RACE_OPS = ("import", "upsert_many", "hype", "reembed", "doctor_fix", "import_jsonl",
            "import_npz", "copy", "copy_prune", "delete_many", "restamp")
NEW = marker(0)  # the version the raced operation writes


def _race_template(op: str, work: Path, n: int, extra: int
                   ) -> tuple[Path | str, dict[str, Any]]:
    """A seeded store (documents 0..n+extra-1, version m0x0) and the spec of
    ``op``, which writes version m0x1 of documents 0..n-1 (content
    operations) or only derived data (the others)."""
    work.mkdir(parents=True, exist_ok=True)
    template, ws = new_store(work, "template"), work / "ws"
    seed_store(template, n + extra, hype=op in ("reembed", "doctor_fix", "restamp"))
    if op in ("import", "import_npz"):
        write_workspace(ws, range(n), NEW)
    argv = {
        "import": ["import", "--no-prune", "--no-hype", str(ws)],
        "import_npz": ["import-npz", "--workspace", str(ws), "--no-prune", "--no-hype",
                       "--trust-vectors",
                       str(work / "embeddings.npz")],
        "import_jsonl": ["import-jsonl", "--no-hype", str(work / "records.jsonl")],
        "hype": ["hype", "--concurrency", "2"],
        "reembed": ["reembed", "--embedder", "fake", "--dim", "32"],
        "doctor_fix": ["doctor", "--fix"],
        "restamp": ["doctor", "--fix", "--embedder", "fake"],
        "copy": ["copy", str(work / "source.sqlite")],
        "copy_prune": ["copy", "--prune", "--json", str(work / "source.sqlite")],
    }
    if op in ("copy", "copy_prune"):
        with open_store(work / "source.sqlite", hype=False) as source:
            source.upsert_many(make_docs(range(n), NEW))
    if op == "import_npz":
        write_npz(work / "embeddings.npz", ws, range(n), NEW)
    if op == "import_jsonl":
        write_jsonl(work / "records.jsonl", range(n), NEW)
    if op == "restamp":  # the file lost its fingerprint
        sql_write(Path(template), "DELETE FROM meta WHERE key = ?", ("embedder",))
    if op == "delete_many":  # deletes documents 0..n-1
        return template, {"kind": "delete_many", "paths": [doc_path(i) for i in range(n)]}
    if op == "upsert_many":
        return template, {"kind": "upsert_many", "n": n, "marker": NEW, "hype": False,
                          "batch": 16}
    return template, {"kind": "cli", "argv": argv[op]}


def _with_db(spec: dict[str, Any], db: Path | str) -> dict[str, Any]:
    if spec["kind"] != "cli":
        return {**spec, "db": str(db)}
    command, *rest = spec["argv"]
    if command == "copy":  # copy SRC DST: the raced store is the destination
        return {"kind": "cli", "argv": [command, *rest, str(db)]}
    return {"kind": "cli", "argv": [command, "--db", str(db), *rest]}


def racer_path(round_: int, k: int) -> str:
    return f"projects/racer-{round_}-{k:03d}.md"


def _plans(victims: list[str], deleters: int, window: float, rng: random.Random,
           racers: list[str] | None = None) -> list[list[list[Any]]]:
    """Each deleter's [[seconds after go, path], ...]: the victims dealt out
    in turn, and with several deleters a quarter of them deleted by a second
    one too (two processes deleting the same document at about the same time);
    then ``racers``, new documents written ([at, path, "upsert"])."""
    plans: list[list[list[Any]]] = [[] for _ in range(deleters)]
    for k, path in enumerate(victims):
        at = rng.uniform(0, window)
        plans[k % deleters].append([at, path])
        if deleters > 1 and rng.random() < 0.25:
            plans[(k + 1) % deleters].append([min(window, at + rng.uniform(0, 0.05)), path])
    for k, path in enumerate(racers or []):
        plans[k % deleters].append([rng.uniform(0, window), path, "upsert"])
    return [sorted(plan) for plan in plans]


def run_race(op: str, workdir: Path, rounds: int = 1, n: int = 300, extra: int = 60,
             deletes: int = 20, seed: int = 0, deleters: int = 1, ops: int = 1
             ) -> dict[str, Any]:
    """``op`` runs (in ``ops`` processes at once: the same command started on
    several machines) while ``deleters`` other processes delete ``deletes``
    documents at random moments of its calibrated run time, ``rounds`` times."""
    rng = random.Random(f"race-{op}-{seed}")
    template, spec = _race_template(op, workdir, n, extra)
    content = spec["kind"] not in ("cli", "delete_many") or op.startswith(("import", "copy"))
    stats: dict[str, Any] = {"rounds": rounds, "ops": ops, "deleters": deleters, "deletes": 0,
                             "resurrected": 0, "lost": 0, "errors": [], "store_damage": [],
                             "samples": []}
    if op == "copy_prune":
        stats.update(upserts=0, racers_kept=0, racers_pruned=0, pruned=0, unaccounted=0)

    def fresh(name: str) -> Path | str:
        db = clone_store(template, workdir, name)
        if op == "doctor_fix":
            inflict_damage(db, rng)
        return db

    # Calibration: the operation alone, from "go" to its end, in a child.
    db = fresh("calibration")
    with open(workdir / "calibration.err", "w") as err:
        proc = spawn_module("op-child", "--spec", json.dumps(_with_db(spec, db)),
                            "--go", workdir / "go-calibration", stderr=err)
        start_together([proc], workdir / "go-calibration")
        began = time.monotonic()
        proc.communicate(timeout=600)
    window = max(0.1, time.monotonic() - began)
    stats["window_seconds"] = round(window, 3)
    if proc.returncode:
        stats["errors"].append(f"calibration run exited {proc.returncode}")
    for r in range(rounds):
        db = fresh(f"round-{r}")
        inside = rng.sample(range(n), deletes if op == "copy_prune" else deletes // 2) \
            if content else []
        # delete_many's own documents (0..n-1) are not the deleter's to race for;
        # copy --prune's extra ones are its own to delete.
        low = n if content or op == "delete_many" else 0
        victims = [doc_path(i) for i in inside + rng.sample(range(low, n + extra),
                                                            deletes - len(inside))]
        racers = [racer_path(r, k) for k in range(deletes // 2)] if op == "copy_prune" else []
        go = workdir / f"go-{r}"
        errs = [open(workdir / f"{who}-{r}.err", "w+")  # noqa: SIM115 - closed below
                for who in [*(f"op{k}" for k in range(ops)),
                            *(f"deleter{d}" for d in range(deleters))]]
        try:
            procs = [spawn_module("op-child", "--spec", json.dumps(_with_db(spec, db)),
                                  "--go", go, stderr=err) for err in errs[:ops]]
            procs += [spawn_module("deleter", "--db", db, "--plan", json.dumps(plan),
                                   "--go", go, stderr=err)
                      for plan, err in zip(_plans(victims, deleters, window, rng, racers),
                                           errs[ops:], strict=True)]
            start_together(procs, go)
            outs = [proc.communicate(timeout=600)[0] or "" for proc in procs]
            for err in errs:
                err.seek(0)
            problems = []
            for proc, out, err in zip(procs[:ops], outs, errs, strict=False):
                fails = [line for line in out.splitlines() if line.startswith("FAIL")]
                problems += [f"{op} exited {proc.returncode}: {err.read()[-300:]} "
                             f"{fails[:3]}" if proc.returncode else ""]
            for err in errs[ops:]:
                problems += [f"deleter: {line}" for line in err.read().splitlines()
                             if "Error" in line or "Traceback" in line][:3]
        finally:
            for err in errs:
                err.close()
        stats["errors"] += [p for p in problems if p]
        for proc, out in zip(procs[ops:], outs[ops:], strict=True):
            result: dict[str, Any] = json.loads(out.splitlines()[-1]) if out.strip() else \
                {"deleted": {}, "errors": [f"deleter exited {proc.returncode}"]}
            stats["errors"] += result["errors"]
            stats["deletes"] += sum(result["deleted"].values())
            if op == "copy_prune":
                stats["upserts"] += len(result.get("upserted", {}))
        _judge_race(op, db, n, extra, set(victims), stats)
        if op == "copy_prune":
            _judge_prune(db, n, extra, racers, outs[:ops], stats)
    return stats


def _judge_race(op: str, db: Path | str, n: int, extra: int, victims: set[str],
                stats: dict[str, Any]) -> None:
    now = contents(db)
    content = op in ("import", "import_npz", "import_jsonl", "upsert_many", "copy",
                     "copy_prune")
    resurrected, lost = [], []
    for i in range(n + extra):
        path = doc_path(i)
        have = next(iter(markers(now[path][0])), "?") if path in now else None
        written = content and i < n
        if op in ("delete_many", "copy_prune") and (i < n) == (op == "delete_many"):
            if have is not None:
                resurrected.append(f"{path}: {have} (deleted by {op})")
        elif path in victims:
            # Deleted before the operation wrote it: the new version is right.
            if have is not None and not (written and have == NEW):
                resurrected.append(f"{path}: {have}")
        elif have != (NEW if written else SEED_MARKER):
            lost.append(f"{path}: {have}")
    counts = check_store(db)
    damage = [f"{k}={v}" for k, v in counts.items() if v and k != "documents"]
    if op in ("reembed", "restamp"):
        damage += vectors_match(db)[:3]
    if op == "reembed":
        dim = embedder_dim(db)
        damage += [f"dim {dim} after reembed"] if dim != 32 else []
    if op == "hype":
        lost += [f"{p}: no questions" for p in without_questions(db)]
    stats["resurrected"] += len(resurrected)
    stats["lost"] += len(lost)
    stats["store_damage"] += damage
    stats["samples"] = (stats["samples"] + resurrected[:3] + lost[:3])[:10]


def _judge_prune(db: Path | str, n: int, extra: int, racers: list[str], outs: list[str],
                 stats: dict[str, Any]) -> None:
    """copy --prune: each racing document kept as written or deleted, and the
    copy's reported deletions exactly the extra documents plus the racing
    ones that went."""
    now = contents(db)
    pruned = 0
    for out in outs:
        reports = [line for line in out.splitlines() if line.startswith("{")]
        pruned += int(json.loads(reports[-1]).get("pruned", 0)) if reports else 0
    kept = [p for p in racers if p in now]
    wrong = [p for p in kept if markers(now[p][0]) != {RACER_MARKER}]
    stats["lost"] += len(wrong)
    stats["samples"] = (stats["samples"] + [f"{p}: {now[p][0]}" for p in wrong[:3]])[:10]
    stats["racers_kept"] += len(kept)
    stats["racers_pruned"] += len(racers) - len(kept)
    stats["pruned"] += pruned
    if pruned != extra + len(racers) - len(kept):
        stats["unaccounted"] += abs(pruned - (extra + len(racers) - len(kept)))
        stats["samples"] = (stats["samples"] + [
            f"copy --prune reported {pruned} deleted; {extra} extra and "
            f"{len(racers) - len(kept)} racing documents went"])[:10]

"""Every write path under SIGKILL.

Each path is one real command (``kbstore import``, also removing files,
``hype``, ``reembed``, ``doctor --fix``, ``import-jsonl``, ``import-npz``,
``export``, ``copy``, ``copy --prune`` (benchmarks/reliability_prune_path.py),
``init``, ``migrate``, ``doctor --fix --embedder``) or API call (``upsert``,
``upsert_many``, ``delete_many``, a watcher's reconcile, picobot's ``store``;
benchmarks/reliability_admin_paths.py has the paths that make, upgrade,
restamp or thin out a store) run in a child process and killed at
a random moment inside its calibrated run time. After each kill the
independent checker (:func:`benchmarks.reliability_check.check_store`, plain
SQL) reads the file, the path's own rule is checked
(benchmarks/reliability_write_paths.py), and then the same command runs
again in this process and must complete and leave a healthy store.

The child processes (``op-child``, ``deleter``) are this module's command
line; the races of a delete against each long operation
(benchmarks/reliability_races.py) start them too.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.reliability_admin_paths import ADMIN_PATHS
from benchmarks.reliability_docs import DIM, fake_hype, make_docs, open_store
from benchmarks.reliability_prune_path import CopyPrune
from benchmarks.reliability_workers import ready_and_wait
from benchmarks.reliability_write_paths import PATHS, WritePath
from kbstore import FakeEmbedder, KnowledgeStore

ROOT = Path(__file__).resolve().parents[1]
CRASH_PATHS = ("upsert", "upsert_many", "import", "hype", "reembed", "doctor_fix",
               "import_jsonl", "import_npz", "export_jsonl", "export_markdown", "copy",
               "import_removals", "watch", "picobot_store",
               *ADMIN_PATHS,  # delete_many, init, restamp, migrate
               "copy_prune")


# -- running one operation ---------------------------------------------------------------


def run_op(spec: dict[str, Any], *, child: bool) -> int:
    """Run one write operation; returns the exit status. In a child, API
    operations print ``c <k>`` once the first k documents are committed."""
    if spec["kind"] == "cli":
        return _cli(spec["argv"], child=child)
    if spec["kind"] == "picobot_store":
        from kbstore.picobot import KnowledgeBase

        with KnowledgeBase(workspace=spec["ws"], db=spec["db"], embedder=FakeEmbedder(DIM),
                           hype=spec["hype"]) as kb:
            for k, doc in enumerate(make_docs(range(spec["n"]), spec["marker"]), start=1):
                title = f"doc {doc.path.removeprefix('projects/doc-').removesuffix('.md')}"
                assert kb.store("projects", title, doc.body, doc.tags) == doc.path
                if child:
                    print(f"c {k}", flush=True)
        return 0
    if spec["kind"] == "watch":
        from kbstore.watch import Watcher

        with open_store(spec["db"], hype=spec["hype"]) as store:
            Watcher(spec["ws"], store, settle_s=0.0).reconcile_all()
        return 0
    if spec["kind"] == "delete_many":
        with open_store(spec["db"], hype=False) as store:
            print(f"c {store.delete_many(spec['paths'])}", flush=True)
        return 0
    docs = make_docs(range(spec["n"]), spec["marker"])
    with open_store(spec["db"], hype=spec["hype"]) as store:
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
    import kbstore.picobot  # noqa: F401
    import kbstore.watch  # noqa: F401

    if spec.get("stderr"):  # what the command says (before a kill too), kept apart
        fd = os.open(spec["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)
        os.close(fd)
    with fake_hype():
        ready_and_wait(go)
        code = run_op(spec, child=True)
    sys.stdout.flush()
    sys.exit(code)


RACER_MARKER = "m9x1"  # what a racing upsert writes


def deleter_child(db: str, plan_json: str, go: str | None) -> None:
    """Delete documents (or, for a plan entry ending in "upsert", write one)
    through the public API at planned moments after go; prints {path:
    deleted?}, {path: upsert result} and the errors seen."""
    plan = json.loads(plan_json)  # [[seconds after go, path(, "upsert")], ...]
    out: dict[str, Any] = {"deleted": {}, "upserted": {}, "errors": []}
    with KnowledgeStore.open(db, hype=False) as store:
        ready_and_wait(go)
        start = time.monotonic()
        for at, path, *action in plan:
            time.sleep(max(0.0, start + at - time.monotonic()))
            try:
                if action == ["upsert"]:
                    out["upserted"][path] = store.upsert(
                        path, title=f"racer {RACER_MARKER}", body=f"raced in {RACER_MARKER}")
                else:
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


# -- crash trials ------------------------------------------------------------------------


def _committed(stdout: str) -> int:
    counts = [int(line[2:]) for line in stdout.splitlines() if line.startswith("c ")]
    return max(counts, default=0)


def run_path_trials(name: str, workdir: Path, trials: int, n: int = 300,
                    seed: int = 0) -> dict[str, Any]:
    """SIGKILL ``name``'s command at random moments (``trials`` times), check
    the file after each kill, then run the command again to completion."""
    rng = random.Random(f"{name}-{seed}")
    path = {**PATHS, **ADMIN_PATHS, "copy_prune": CopyPrune}[name](name, workdir, n, rng)
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
            kill_delay = getattr(path, "kill_delay", None)  # a path may aim its kills
            time.sleep(kill_delay(window) if kill_delay else rng.uniform(0, window * 1.05))
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
        stats.update(getattr(path, "extra_stats", {}))
    finally:
        log.close()
    stats["failures"] = stats["failures"][:10]
    return stats


def resume(spec: dict[str, Any]) -> int:
    """The same command again, in this process, to completion (its report
    printing silenced)."""
    with fake_hype(), open(os.devnull, "w") as quiet, \
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

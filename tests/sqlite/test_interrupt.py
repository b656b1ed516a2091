"""Ctrl-C during a long write: the command says how many documents were
committed and how to continue, and exits 130 (it used to print only
'Aborted!' and exit 1). Running it again finishes the job."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbstore import KnowledgeStore

ROOT = Path(__file__).resolve().parents[2]
N = 400
# The CLI with a fake embedder that takes 0.3 s per batch (and a copy that
# takes 10 ms per document), so a batch commits on its own and an interrupt
# lands between commits.
SLOW_CLI = """
import sys, time
from kbstore import embed
real = embed.FakeEmbedder.embed_documents
def slow(self, texts):
    time.sleep(0.3)
    return real(self, texts)
embed.FakeEmbedder.embed_documents = slow
from kbstore import transfer
record = transfer._record
def slow_record(*args):
    time.sleep(0.01)
    return record(*args)
transfer._record = slow_record
from kbstore.cli import main
sys.argv = ["kbstore", *sys.argv[1:]]
main()
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "KBSTORE_HYPE": "0"}


def _workspace(root: Path) -> Path:
    folder = root / "projects"
    folder.mkdir(parents=True)
    for i in range(N):
        (folder / f"note-{i:03}.md").write_text(f"---\ntitle: note {i}\n---\nbody of {i}\n")
    return root


def _count(db: Path) -> int:
    try:
        with KnowledgeStore.open(db, read_only=True) as store:
            return len(store)
    except Exception:  # not created yet, or its schema not written yet
        return 0


def _as_at_a_terminal() -> None:
    """A child's SIGINT as a terminal delivers it: a shell starts background
    jobs with SIGINT ignored, and the child would inherit that (Python then
    never raises KeyboardInterrupt), whatever kbstore does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_once_committed(args: list[str], db: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CLI, *args], env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_as_at_a_terminal)
    deadline = time.monotonic() + 120
    while _count(db) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.skipif(os.name != "posix", reason="SIGINT")
def test_ctrl_c_during_import_says_what_was_committed(tmp_path: Path) -> None:
    db, ws = tmp_path / "kb.sqlite", _workspace(tmp_path / "ws")
    args = ["import", "--db", str(db), str(ws), "--embedder", "fake"]
    stopped = _interrupt_once_committed(args, db)
    assert stopped.returncode == 130, stopped.stderr
    committed = _count(db)
    assert 0 < committed < N
    assert stopped.stderr.rstrip().endswith(
        f"stopped: {committed} of {N} documents committed; run the same command again to "
        "continue")
    assert "Aborted!" not in stopped.stderr and "Traceback" not in stopped.stderr
    again = subprocess.run([sys.executable, "-m", "kbstore", *args], env=_env(), text=True,
                           capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"added {N - committed}, updated 0, unchanged {committed},")


@pytest.mark.skipif(os.name != "posix", reason="SIGINT")
def test_ctrl_c_during_copy_says_what_was_copied(tmp_path: Path) -> None:
    src, dst = tmp_path / "src.sqlite", tmp_path / "dst.sqlite"
    ws = _workspace(tmp_path / "ws")
    done = subprocess.run([sys.executable, "-m", "kbstore", "import", "--db", str(src), str(ws),
                           "--embedder", "fake"], env=_env(), capture_output=True, timeout=300)
    assert done.returncode == 0
    stopped = _interrupt_once_committed(["copy", str(src), str(dst), "--embedder", "fake",
                                         "--batch-size", "16"], dst)
    assert stopped.returncode == 130, stopped.stderr
    copied = _count(dst)
    assert 0 < copied < N
    assert stopped.stderr.rstrip().endswith(
        f"stopped: {copied} of {N} documents copied; run the same command again to continue")


# copy --prune with a store whose deletions take 0.6 s a batch.
SLOW_DELETE_CLI = """
import sys, time
from kbstore import store
real = store.KnowledgeStore.delete_many
def slow(self, paths):
    time.sleep(0.6)
    return real(self, paths)
store.KnowledgeStore.delete_many = slow
from kbstore.cli import main
sys.argv = ["kbstore", *sys.argv[1:]]
main()
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGINT")
def test_ctrl_c_while_copy_prune_deletes_says_how_many_were_deleted(tmp_path: Path) -> None:
    """Formerly it said only 'stopped: 400 of 400 documents copied', as if the
    copy had finished, without a word on the deletions it had announced."""
    import re
    import shutil

    src, dst = tmp_path / "src.sqlite", tmp_path / "dst.sqlite"
    ws = _workspace(tmp_path / "ws")
    done = subprocess.run([sys.executable, "-m", "kbstore", "import", "--db", str(src), str(ws),
                           "--embedder", "fake"], env=_env(), capture_output=True, timeout=300)
    assert done.returncode == 0
    shutil.copyfile(src, dst)
    extra = 150  # three delete batches; 150 of 550 is under the mass-delete limit
    with KnowledgeStore.open(dst, hype=False) as store:
        for i in range(extra):
            store.upsert(f"projects/extra-{i:03}.md", title=f"extra {i}", body=f"extra {i}")
    proc = subprocess.Popen([sys.executable, "-c", SLOW_DELETE_CLI, "copy", str(src), str(dst),
                             "--prune"], env=_env(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_as_at_a_terminal)
    assert proc.stderr is not None
    seen = ""
    while "deleting" not in seen and proc.poll() is None:
        seen += proc.stderr.readline()
    time.sleep(0.9)  # inside the second batch's delete (the third's at worst)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, seen + err
    left = _count(dst) - N
    found = re.search(rf"stopped: {N} of {N} documents copied; (\d+) of {extra} documents the "
                      r"source does not have deleted; run the same command again to continue",
                      err)
    assert found, err
    assert int(found.group(1)) == extra - left and left > 0
    again = subprocess.run([sys.executable, "-m", "kbstore", "copy", str(src), str(dst),
                            "--prune"], env=_env(), text=True, capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert _count(dst) == N


def _staged(db: Path) -> bool:
    """A reembed has committed new vectors (not yet swapped in)."""
    with KnowledgeStore.open(db, read_only=True) as store:
        return bool(store.status().get("rebuild_in_progress"))


def _doctor_clean(db: Path) -> None:
    checked = subprocess.run([sys.executable, "-m", "kbstore", "doctor", "--db", str(db)],
                             env=_env(), text=True, capture_output=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.skipif(os.name != "posix", reason="SIGINT")
@pytest.mark.parametrize("command", ["import", "copy", "reembed"])
def test_ctrl_c_pressed_again_and_again_still_stops_cleanly_with_130(
        tmp_path: Path, command: str) -> None:
    """Formerly a second Ctrl-C while the first one's stop was under way (the
    message printing, the process exiting) killed the process by the signal
    (exit -2). Now the first starts the stop, any further one is
    acknowledged, and the command still exits 130 with how far it got."""
    src, ws = tmp_path / "kb.sqlite", _workspace(tmp_path / "ws")
    importing = ["import", "--db", str(src), str(ws), "--embedder", "fake"]
    if command == "import":
        args, db = importing, src
    else:
        done = subprocess.run([sys.executable, "-m", "kbstore", *importing], env=_env(),
                              capture_output=True, timeout=300)
        assert done.returncode == 0
        db = tmp_path / "dst.sqlite" if command == "copy" else src
        args = (["copy", str(src), str(db), "--embedder", "fake", "--batch-size", "16"]
                if command == "copy" else ["reembed", "--db", str(src), "--embedder", "fake",
                                           "--dim", "32"])
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CLI, *args], env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_as_at_a_terminal)
    deadline = time.monotonic() + 120
    begun = _staged if command == "reembed" else _count
    while not begun(db) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    while proc.poll() is None and time.monotonic() < deadline:  # Ctrl-C, again and again
        time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Aborted!" not in err
    assert re.search(r"stopped: \d+ of 400 documents (committed|copied|re-embedded); ",
                     err.strip().splitlines()[-1]), err
    _doctor_clean(db)
    again = subprocess.run([sys.executable, "-m", "kbstore", *args], env=_env(), text=True,
                           capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr
    _doctor_clean(db)
    assert _count(db) == N


# The new store's vector table is made in the transaction that makes its
# schema: here it waits, so a Ctrl-C lands before anything is committed.
SLOW_CREATE_CLI = """
import sys, time
from kbstore.backends.sqlite import vectors
real = vectors.create_table
def slow(*args, **kwargs):
    print("creating", file=sys.stderr, flush=True)
    time.sleep(30)
    return real(*args, **kwargs)
vectors.create_table = slow
from kbstore.cli import main
sys.argv = ["kbstore", *sys.argv[1:]]
main()
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGINT")
@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing-empty-file"])
def test_ctrl_c_while_copy_creates_its_destination_leaves_no_schemaless_file(
        tmp_path: Path, existing: bool) -> None:
    """Formerly a 4 KiB file without a schema stayed behind. A destination
    file the command made is removed while it holds nothing; one that was
    there before (here a zero-byte file) is never removed."""
    src, dst = tmp_path / "src.sqlite", tmp_path / "dst.sqlite"
    with KnowledgeStore.open(src, "fake", hype=False) as store:
        for i in range(5):
            store.upsert(f"projects/n{i}.md", title=f"n{i}", body=f"body {i}")
    if existing:
        dst.touch()
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CREATE_CLI, "copy", str(src), str(dst)],
                            env=_env(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_as_at_a_terminal)
    assert proc.stderr is not None
    assert proc.stderr.readline() == "creating\n"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.rstrip().endswith("stopped: 0 documents copied; run the same command again to "
                                 "continue"), err
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("dst"))
    assert left == (["dst.sqlite"] if existing else []), left
    again = subprocess.run([sys.executable, "-m", "kbstore", "copy", str(src), str(dst)],
                           env=_env(), text=True, capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert _count(dst) == 5
    _doctor_clean(dst)

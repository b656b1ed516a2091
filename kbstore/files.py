"""Writing files safely: markdown in picobot's style, atomic replacement,
and export targets that can never clobber a database or a user's file."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .errors import ExchangeError


def render_markdown(meta: dict[str, Any], body: str) -> str:
    """A markdown file with YAML frontmatter in picobot's style
    (``tags: [a, b]``, dates as YYYY-MM-DD)."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # equal dates: no &id001 anchors
            return True

    head = yaml.dump(meta, Dumper=_Dumper, default_flow_style=None, sort_keys=False,
                     allow_unicode=True, width=10_000) if meta else ""
    return f"---\n{head}---\n{body.rstrip()}\n"


# Temp files and folders are named after the target and the writing process
# (".notes.jsonl.kbstore-4242-x1y2.tmp"), so the next write to the same
# target can remove what a killed writer left behind -- only when that process
# is gone, never a live writer's.
_STAGING = re.compile(r"\.kbstore-(\d+)-[^/]*\.tmp$")


def staging_prefix(target: Path) -> str:
    return f".{target.name}.kbstore-{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def sweep_stale(target: Path) -> int:
    """Remove temp files/folders a killed earlier write to ``target`` left
    beside it; returns how many were removed."""
    removed = 0
    prefix = f".{target.name}.kbstore-"
    try:
        siblings = list(target.parent.iterdir())
    except OSError:
        return 0
    for sibling in siblings:
        match = _STAGING.search(sibling.name)
        if not sibling.name.startswith(prefix) or not match or _alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            if sibling.is_dir() and not sibling.is_symlink():
                shutil.rmtree(sibling)
            else:
                sibling.unlink()
            removed += 1
    return removed


def atomic_write(path: Path, text: str, *, sweep: bool = True, replace: bool = True) -> None:
    """Write via a temp file in the same folder + os.replace: readers see the
    old file or the new one, never half of one. The temp name does not end in
    .md, so a crash never leaves a half-written document to be indexed.
    ``replace=False``: only create ``path``; FileExistsError if it exists
    (also when another process made it a moment ago)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if sweep:  # (a fresh export folder has nothing to sweep)
        sweep_stale(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=staging_prefix(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            _create_from(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _create_from(tmp: str, path: Path) -> None:
    """Move ``tmp`` to ``path`` only if ``path`` does not exist: a hard link
    fails atomically when it does; where links are not supported, an
    exclusively created placeholder claims the name first."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def check_target(target: Path, *, protected: list[Path], overwrite: bool) -> None:
    """Refuse to write over a database (or its -wal/-shm), or over an existing
    file unless ``overwrite``."""
    for source in protected:
        for guarded in (source, Path(f"{source}-wal"), Path(f"{source}-shm"),
                        Path(f"{source}-journal")):
            if _same_file(target, guarded):
                raise ExchangeError(f"refusing to export into {target}: it is the database "
                                    "being exported")
    if target.is_dir():
        raise ExchangeError(f"{target} is a folder; give a file name")
    if target.exists() and not target.is_file():
        # Moving the export into place would replace the device or pipe itself.
        raise ExchangeError(f"{target} is not a regular file (a device, pipe or socket); "
                            "export writes a new file ('-' writes to stdout)")
    if target.exists() and not overwrite:
        raise ExchangeError(f"{target} exists; pass --force (overwrite=True) to replace it")


def open_output(out: str | os.PathLike[str] | IO[str], *, protected: list[Path],
                overwrite: bool = False) -> tuple[IO[str], Callable[[bool], None]]:
    """A text handle for ``out`` ('-' = stdout) and a finish(ok) callback that
    moves a temp file into place, so a failed export leaves neither a half
    file nor its temp file, and never touches an existing target."""
    if hasattr(out, "write"):
        return out, lambda ok: None  # type: ignore[return-value]
    if str(out) == "-":
        return sys.stdout, lambda ok: sys.stdout.flush()
    target = Path(out).expanduser()
    check_target(target, protected=protected, overwrite=overwrite)
    if not target.parent.is_dir():
        raise ExchangeError(f"folder {target.parent} does not exist")
    sweep_stale(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=staging_prefix(target), suffix=".tmp")
    handle = os.fdopen(fd, "w", encoding="utf-8", newline="\n")

    def finish(ok: bool) -> None:
        try:
            handle.close()
            if ok:
                check_target(target, protected=protected, overwrite=overwrite)  # raced?
                os.replace(tmp, target)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    return handle, finish

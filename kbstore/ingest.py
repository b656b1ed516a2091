"""Reading a picobot workspace: which files are documents, and what they say.

Indexed: ``knowledge/{self,user,projects,domains,journal}/**/*.md`` and
``skills/*/SKILL.md``. Not indexed: README.md files, soul/identity docs,
TODO.md, SCRATCH.md.

One rule for bad input: a file kbstore cannot read exactly as written is
skipped with a reason (the import goes on, and a stored copy of that file
is kept as it was); a field is never silently dropped or guessed. That covers
broken YAML, not UTF-8, binary, too large, a symlink leaving the root, a
frontmatter block that is not ``key: value`` pairs or is never closed, and a
field kbstore uses (title, name, description, tags, created, updated) that is
not text of a sane size or not a real date. The reason names the field.

frontmatter_fields.py reads the YAML block (as nodes, never as Python
objects); documents.py checks and normalises the fields."""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from .documents import (
    MAX_FILE_BYTES,
    SKILLS_TOPIC,
    TOPICS,
    _is_utf8,
    derive_topic_type,
    make_document,
)
from .errors import InvalidDocumentError
from .frontmatter_fields import _tags_field, _text_field, read_fields, split_frontmatter
from .listing import shown
from .model import Document, Skipped

log = logging.getLogger("kbstore")

EXCLUDED_NAMES = frozenset(
    {"readme.md", "identity.md", "soul.md", "user.md", "tools.md", "agents.md", "todo.md",
     "scratch.md"})
_DATE_IN_NAME = re.compile(r"(\d{4}-\d{2}-\d{2})")


# -- reading files ---------------------------------------------------------


def _first_heading(body: str) -> str | None:
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None


def parse_file(file: Path, rel_path: str, *, max_bytes: int = MAX_FILE_BYTES) -> Document:
    """Parse one markdown file.

    Raises InvalidDocumentError with the reason for anything wrong with the
    content (and OSError when the file cannot be read): never another
    exception, so one file can only ever cost itself in a batch.
    """
    with open(file, "rb") as fh:
        mtime = os.fstat(fh.fileno()).st_mtime
        raw = fh.read(max_bytes + 1)  # a file growing under us is still capped
    if len(raw) > max_bytes:
        size = max(len(raw), _size(file))
        raise InvalidDocumentError(f"file is {size} bytes, over the {max_bytes}-byte limit")
    try:
        return _parse(raw, rel_path, mtime)
    except InvalidDocumentError:
        raise
    except Exception as exc:  # the loader's own surprises (RecursionError, MemoryError ...)
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise InvalidDocumentError(
            f"unreadable frontmatter ({type(exc).__name__}{': ' + first if first else ''})"
        ) from exc


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0


def _parse(raw: bytes, rel_path: str, mtime: float) -> Document:
    if b"\x00" in raw:
        raise InvalidDocumentError("binary content (NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidDocumentError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    frontmatter, body = split_frontmatter(text)
    fields = read_fields(frontmatter)
    topic, doc_type = derive_topic_type(rel_path)
    title = _text_field(fields, "title")
    extra: dict[str, str] = {}
    if doc_type == "skill":
        # A skill's own frontmatter is kept so an export writes SKILL.md back.
        name, description = _text_field(fields, "name"), _text_field(fields, "description")
        extra = {k: v for k, v in (("name", name), ("description", description)) if v}
        title = title or name
        if description:
            body = f"{description}\n\n{body}"
    title = title or _first_heading(body) or PurePosixPath(rel_path).stem
    created, updated = _text_field(fields, "created"), _text_field(fields, "updated")
    if doc_type == "journal" and not (created or updated):
        match = _DATE_IN_NAME.search(PurePosixPath(rel_path).name)
        updated = match.group(1) if match else dt.datetime.fromtimestamp(
            mtime, dt.timezone.utc).isoformat()
    return make_document(rel_path, title=title, body=body, tags=_tags_field(fields),
                         topic=topic, doc_type=doc_type, created=created, updated=updated,
                         extra=extra)


def _inside(root: Path, file: Path) -> bool:
    try:
        file.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return True


SYMLINKED_DIR = "symlinked directory (not followed)"
BROKEN_SYMLINK = "broken symlink (its target is missing)"


def _dangling(path: str) -> bool:
    return os.path.islink(path) and not os.path.exists(path)


def _unread(exc: OSError) -> str:
    return f"folder could not be read ({exc.strerror or type(exc).__name__})"


def _walk_md(top: Path) -> Iterator[tuple[Path, str]]:
    """(markdown file, '') and (folder, why it was not looked into).

    followlinks=False: a symlinked directory is never descended into; it is
    yielded itself, as is a folder that cannot be listed (permissions, a
    vanished mount: os.walk would skip it silently), so the import report
    says why its files are missing -- and the documents stored from it are
    kept, not deleted as gone."""
    errors: list[OSError] = []
    for dirpath, dirnames, filenames in os.walk(top, onerror=errors.append, followlinks=False):
        yield from _folder_errors(errors)
        dirnames.sort()
        yield from ((Path(dirpath) / n, SYMLINKED_DIR) for n in dirnames
                    if os.path.islink(os.path.join(dirpath, n)))
        for name in sorted(filenames):
            if name.lower().endswith(".md"):
                yield Path(dirpath) / name, ""
            elif _dangling(os.path.join(dirpath, name)):  # a folder's link, its disk unmounted?
                yield Path(dirpath) / name, BROKEN_SYMLINK
    yield from _folder_errors(errors)


def _folder_errors(errors: list[OSError]) -> Iterator[tuple[Path, str]]:
    while errors:
        exc = errors.pop(0)
        if exc.filename is not None:
            yield Path(os.fsdecode(exc.filename)), _unread(exc)


def knowledge_root(workspace: Path) -> Path:
    """``workspace/knowledge`` when present; else the folder is the knowledge root."""
    return workspace / "knowledge" if (workspace / "knowledge").is_dir() else workspace


def section_folder(workspace: str | os.PathLike[str], rel: str) -> Path:
    """The folder of ``workspace`` that holds document ``rel``'s section
    ('projects/x.md' -> knowledge/projects, 'skills/web/SKILL.md' -> skills)."""
    root = Path(workspace)
    section = rel.split("/", 1)[0]
    return root / SKILLS_TOPIC if section == SKILLS_TOPIC else knowledge_root(root) / section


def section_missing(workspace: str | os.PathLike[str], rel: str) -> bool:
    """True when the folder for ``rel``'s section is absent (or a symlink,
    which the scan does not follow): the folder given is not the whole
    workspace, so the scan says nothing about that section's files."""
    folder = section_folder(workspace, rel)
    return not folder.is_dir() or folder.is_symlink()


def scan_workspace(workspace: str | os.PathLike[str]) -> Iterator[tuple[str, Path | None, str]]:
    """Yield (document path, file, skip reason or '') for every candidate
    file, and (folder path, folder, reason) for a folder not looked into
    (symlinked, unreadable): documents stored under it are not gone."""
    root = Path(workspace)
    if not root.is_dir():
        raise InvalidDocumentError(f"not a directory: {root}")
    kroot = knowledge_root(root)
    for topic in TOPICS:
        top = kroot / topic
        if not top.is_dir() or top.is_symlink():
            continue
        for file, folder_reason in _walk_md(top):
            rel = file.relative_to(kroot).as_posix()
            if not folder_reason and file.name.lower() in EXCLUDED_NAMES:
                continue
            yield _printable(rel), file, folder_reason or _skip_reason(kroot, file, rel)
    skills = root / SKILLS_TOPIC
    if skills.is_dir() and not skills.is_symlink():
        try:
            skill_dirs = sorted(p for p in skills.iterdir() if p.is_dir())
        except OSError as exc:
            yield SKILLS_TOPIC, skills, _unread(exc)
            return
        for skill_dir in skill_dirs:
            file = skill_dir / "SKILL.md"
            rel = f"{SKILLS_TOPIC}/{skill_dir.name}/SKILL.md"
            try:
                present = file.is_file()
            except OSError as exc:
                yield _printable(f"{SKILLS_TOPIC}/{skill_dir.name}"), skill_dir, _unread(exc)
                continue
            if present:
                yield _printable(rel), file, _skip_reason(root, file, rel)


SYMLINK_LOOP = "symlink loop (it never reaches a file)"


def _skip_reason(root: Path, file: Path, rel: str) -> str:
    if not _is_utf8(rel):
        return "file name is not valid UTF-8"
    if _loops(file):
        return SYMLINK_LOOP
    return "" if _inside(root, file) else "symlink points outside the root"


def _loops(file: Path) -> bool:
    """A symlink that leads back to itself (Path.resolve raises RuntimeError
    for it before Python 3.13)."""
    try:
        os.stat(file)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _printable(rel: str) -> str:
    """A non-UTF-8 file name as text that can be stored and reported (a
    report line shows any path through ``listing.shown``)."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def workspace_documents(workspace: str | os.PathLike[str], seen: set[str],
                        skipped: list[Skipped]) -> Iterator[Document]:
    """The documents of a workspace, parsed; every candidate's path goes into
    ``seen`` (an unreadable one too: its stored copy is kept) and each file
    that cannot be a document into ``skipped`` with the reason."""
    for rel, file, reason in scan_workspace(workspace):
        seen.add(rel)
        if reason or file is None:
            skipped.append(Skipped(rel, reason))
            log.warning("skipped %s: %s", shown(rel), reason)
            continue
        try:
            yield parse_file(file, rel)
        except (InvalidDocumentError, OSError) as exc:
            skipped.append(Skipped(rel, str(exc)))
            log.warning("skipped %s: %s", shown(rel), exc)

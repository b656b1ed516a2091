"""Reading a picobot workspace: which files are documents, and what they say.

Indexed: ``knowledge/{self,user,projects,domains,journal}/**/*.md`` and
``skills/*/SKILL.md``. Not indexed: README.md files, soul/identity docs,
TODO.md, SCRATCH.md. A file that cannot be read safely (broken YAML, not
UTF-8, binary, too large, a symlink leaving the root) is skipped with a reason.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import InvalidDocumentError
from .model import DOC_TYPES, Document

TOPICS = ("self", "user", "projects", "domains", "journal")
SKILLS_TOPIC = "skills"
EXCLUDED_NAMES = frozenset(
    {"readme.md", "identity.md", "soul.md", "user.md", "tools.md", "agents.md", "todo.md",
     "scratch.md"})
MAX_FILE_BYTES = 2 * 1024 * 1024  # larger files are skipped, not truncated
_DATE_IN_NAME = re.compile(r"(\d{4}-\d{2}-\d{2})")


def validate_path(path: str) -> str:
    """A document path is relative, POSIX, ends in .md and stays inside the
    knowledge root: 'projects/picobot.md', 'skills/web/SKILL.md'."""
    if not isinstance(path, str) or not path.strip():
        raise InvalidDocumentError("document path must be a non-empty string")
    if "\x00" in path or "\\" in path:
        raise InvalidDocumentError(f"document path has a NUL or backslash: {path!r}")
    if not _is_utf8(path):
        raise InvalidDocumentError(f"document path is not valid UTF-8: {path!r}")
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(part in ("..", ".", "") for part in path.split("/")):
        raise InvalidDocumentError(
            f"document path must be relative without '.' or '..' parts: {path!r}")
    if pure.suffix.lower() != ".md":
        raise InvalidDocumentError(f"document path must end in .md: {path!r}")
    return str(pure)


def derive_topic_type(path: str) -> tuple[str, str]:
    """topic and doc_type from a document path."""
    parts = PurePosixPath(path).parts
    topic = parts[0] if len(parts) > 1 else "general"
    if topic == SKILLS_TOPIC or parts[-1] == "SKILL.md":
        return SKILLS_TOPIC, "skill"
    if topic == "journal":
        return topic, "journal"
    return topic, "entry"


def normalize_tags(tags: Any) -> list[str]:
    """Tags as a clean list: a YAML list, or a comma-separated string."""
    if tags is None:
        return []
    if isinstance(tags, str):
        tags = tags.split(",")
    if not isinstance(tags, (list, tuple, set)):
        raise InvalidDocumentError(f"tags must be a list or a comma-separated string: {tags!r}")
    out: list[str] = []
    for tag in tags:
        text = str(tag).strip()
        if text and "\x00" not in text and text not in out:
            out.append(text)
    return out


def normalize_date(value: Any) -> str | None:
    """An ISO 8601 date/datetime string, or None. Accepts date, datetime, str."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    text = str(value).strip()
    if len(text) == 10:  # 'YYYY-MM-DD' stays a date (datetime would add T00:00:00)
        try:
            return dt.date.fromisoformat(text).isoformat()
        except ValueError:
            pass
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).isoformat()
    except ValueError:
        pass
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError as exc:
        raise InvalidDocumentError(f"not an ISO 8601 date: {text!r}") from exc


def make_document(path: str, *, title: str, body: str, tags: Sequence[str] | str | None = None,
                  topic: str | None = None, doc_type: str | None = None,
                  created: Any = None, updated: Any = None) -> Document:
    """Validate and normalise the fields of one document."""
    path = validate_path(path)
    derived_topic, derived_type = derive_topic_type(path)
    doc_type = doc_type or derived_type
    if doc_type not in DOC_TYPES:
        raise InvalidDocumentError(f"doc_type must be one of {DOC_TYPES}, got {doc_type!r}")
    if not isinstance(title, str) or not isinstance(body, str):
        raise InvalidDocumentError("title and body must be strings")
    if "\x00" in title or "\x00" in body:
        raise InvalidDocumentError(f"{path}: title/body contain NUL bytes")
    clean_tags = normalize_tags(tags)
    if not all(_is_utf8(text) for text in (title, body, *clean_tags)):
        raise InvalidDocumentError(f"{path}: title/body/tags are not valid UTF-8 (lone "
                                   "surrogates)")
    created_iso, updated_iso = normalize_date(created), normalize_date(updated)
    return Document(path=path, title=title.strip() or PurePosixPath(path).stem, body=body,
                    tags=clean_tags, topic=topic or derived_topic, doc_type=doc_type,
                    created=created_iso, updated=updated_iso or created_iso)


def _is_utf8(text: str) -> bool:
    # Lone surrogates (e.g. os.fsdecode of a non-UTF-8 file name) cannot be
    # stored: SQLite would refuse them mid-transaction.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- reading files ---------------------------------------------------------


def _first_heading(body: str) -> str | None:
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None


def parse_file(file: Path, rel_path: str, *, max_bytes: int = MAX_FILE_BYTES) -> Document:
    """Parse one markdown file. Raises InvalidDocumentError with the reason."""
    import frontmatter  # python-frontmatter (PyYAML safe loader)
    import yaml

    size = file.stat().st_size
    if size > max_bytes:
        raise InvalidDocumentError(f"file is {size} bytes, over the {max_bytes}-byte limit")
    raw = file.read_bytes()
    if b"\x00" in raw:
        raise InvalidDocumentError("binary content (NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidDocumentError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    try:
        post = frontmatter.loads(text)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidDocumentError(f"broken YAML frontmatter: {first}") from exc
    meta: dict[str, Any] = post.metadata if isinstance(post.metadata, dict) else {}
    body = post.content
    topic, doc_type = derive_topic_type(rel_path)
    title = meta.get("title")
    if doc_type == "skill":
        title = title or meta.get("name")
        description = meta.get("description")
        if description:
            body = f"{description}\n\n{body}"
    title = str(title or _first_heading(body) or PurePosixPath(rel_path).stem)
    created, updated = meta.get("created"), meta.get("updated")
    if doc_type == "journal" and not (created or updated):
        match = _DATE_IN_NAME.search(PurePosixPath(rel_path).name)
        updated = match.group(1) if match else dt.datetime.fromtimestamp(
            file.stat().st_mtime, dt.timezone.utc).isoformat()
    try:
        return make_document(rel_path, title=title, body=body, tags=meta.get("tags"),
                             topic=topic, doc_type=doc_type, created=created, updated=updated)
    except InvalidDocumentError as exc:
        raise InvalidDocumentError(str(exc).replace(f"{rel_path}: ", "")) from exc


def _inside(root: Path, file: Path) -> bool:
    try:
        file.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return True


def _walk_md(top: Path) -> Iterator[Path]:
    # followlinks=False: a symlinked directory is never descended into; it is
    # yielded itself so the import report says why its files are missing.
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames.sort()
        yield from (Path(dirpath) / n for n in dirnames if os.path.islink(os.path.join(dirpath, n)))
        for name in sorted(filenames):
            if name.lower().endswith(".md"):
                yield Path(dirpath) / name


def knowledge_root(workspace: Path) -> Path:
    """``workspace/knowledge`` when present; else the folder is the knowledge root."""
    return workspace / "knowledge" if (workspace / "knowledge").is_dir() else workspace


def scan_workspace(workspace: str | os.PathLike[str]) -> Iterator[tuple[str, Path | None, str]]:
    """Yield (document path, file, skip reason or '') for every candidate file."""
    root = Path(workspace)
    if not root.is_dir():
        raise InvalidDocumentError(f"not a directory: {root}")
    kroot = knowledge_root(root)
    for topic in TOPICS:
        top = kroot / topic
        if not top.is_dir() or top.is_symlink():
            continue
        for file in _walk_md(top):
            rel = file.relative_to(kroot).as_posix()
            if file.name.lower() in EXCLUDED_NAMES:
                continue
            yield _printable(rel), file, _skip_reason(kroot, file, rel)
    skills = root / SKILLS_TOPIC
    if skills.is_dir() and not skills.is_symlink():
        for skill_dir in sorted(p for p in skills.iterdir() if p.is_dir()):
            file = skill_dir / "SKILL.md"
            if file.is_file():
                rel = f"{SKILLS_TOPIC}/{skill_dir.name}/SKILL.md"
                yield _printable(rel), file, _skip_reason(root, file, rel)


def _skip_reason(root: Path, file: Path, rel: str) -> str:
    if not _is_utf8(rel):
        return "file name is not valid UTF-8"
    if file.is_symlink() and file.is_dir():
        return "symlinked directory (not followed)"
    return "" if _inside(root, file) else "symlink points outside the root"


def _printable(rel: str) -> str:
    """A non-UTF-8 file name as text a report and a terminal can show."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")

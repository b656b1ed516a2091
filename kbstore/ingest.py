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

The frontmatter is composed into YAML nodes, never constructed into Python
objects: dates stay the text the user wrote (validated here, so
``2024-02-30`` is a reason, not a crash), explicit tags (``!!int``,
``!!set``, ``!foo``) run no constructor, and an alias "bomb" is never
expanded because only scalar values are read. Fields kbstore does not use are
not interpreted at all. A UTF-8 byte-order mark and CRLF line ends are fine.
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
import re
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import InvalidDocumentError
from .listing import shown
from .model import DOC_TYPES, Document, Skipped

log = logging.getLogger("kbstore")

TOPICS = ("self", "user", "projects", "domains", "journal")
SKILLS_TOPIC = "skills"
EXCLUDED_NAMES = frozenset(
    {"readme.md", "identity.md", "soul.md", "user.md", "tools.md", "agents.md", "todo.md",
     "scratch.md"})
# The size of one entry: a larger file is skipped (not truncated) by every
# importer, and a larger body is refused by ``upsert`` and picobot's store (a
# store's own exchange -- export, import-jsonl, copy -- keeps what it holds).
MAX_FILE_BYTES = 2 * 1024 * 1024
# The longest document path, in bytes of UTF-8, for every way in (API, import,
# import-jsonl, copy, the MCP tools). PostgreSQL's unique index on the path
# refuses an entry over ~2.7 kB; a longer file name is skipped with the reason.
MAX_PATH_BYTES = 2048
# A title or tag past these is a pasted body or a YAML bomb, not a title.
MAX_TITLE_CHARS = 1000
MAX_TAG_CHARS = 100
MAX_TAGS = 100
MAX_DATE_CHARS = 64
_DATE_IN_NAME = re.compile(r"(\d{4}-\d{2}-\d{2})")


def validate_path(path: str) -> str:
    """A document path is relative, POSIX, ends in .md, stays inside the
    knowledge root ('projects/picobot.md', 'skills/web/SKILL.md') and is at
    most MAX_PATH_BYTES of UTF-8."""
    if not isinstance(path, str) or not path.strip():
        raise InvalidDocumentError("document path must be a non-empty string")
    if "\x00" in path or "\\" in path:
        raise InvalidDocumentError(f"document path has a NUL or backslash: {path!r}")
    if not _is_utf8(path):
        raise InvalidDocumentError(f"document path is not valid UTF-8: {path!r}")
    if len(path) * 4 > MAX_PATH_BYTES and len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidDocumentError(
            f"document path is {len(path.encode('utf-8'))} bytes of UTF-8, over the "
            f"{MAX_PATH_BYTES}-byte limit: {path[:60]!r}...")
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
    """Tags as a clean list: a list/tuple (order kept), a set (sorted, so the
    result never depends on the process's hash seed), or a comma-separated
    string. Blank and repeated tags are dropped; a tag that is not text, holds
    a NUL or a lone surrogate, or is over MAX_TAG_CHARS is refused, as are
    more than MAX_TAGS tags."""
    if tags is None:
        return []
    if isinstance(tags, str):
        items: list[Any] = tags.split(",")
    elif isinstance(tags, (set, frozenset)):
        items = sorted(tags, key=str)
    elif isinstance(tags, (list, tuple)):
        items = list(tags)
    else:
        raise InvalidDocumentError(
            f"tags must be a list or a comma-separated string, not {_kind(tags)}")
    out: list[str] = []
    for n, tag in enumerate(items, start=1):
        if tag is None:
            continue
        if isinstance(tag, float) and tag != tag:  # NaN: not a tag anyone wrote on purpose
            raise InvalidDocumentError(f"tags: item {n} is not a number or text")
        if not isinstance(tag, (str, int, float)):
            raise InvalidDocumentError(f"tags: item {n} must be text, not {_kind(tag)}")
        text = _check_text(f"tags: item {n}", str(tag).strip(), MAX_TAG_CHARS)
        if text and text not in out:
            out.append(text)
    if len(out) > MAX_TAGS:
        raise InvalidDocumentError(f"tags: {len(out)} tags, over the limit of {MAX_TAGS}")
    return out


def normalize_date(value: Any) -> str | None:
    """An ISO 8601 date/datetime string, or None. Accepts date, datetime and
    text (YAML's timestamp forms too: ``2024-1-5``, ``2024-01-05 10:00:00 +2``).
    A date that does not exist (``2024-02-30``) is refused with the reason."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidDocumentError(f"not an ISO 8601 date: {_short(value)}")
    text = str(value).strip()
    if not text:
        return None
    if len(text) > MAX_DATE_CHARS or not _is_utf8(text) or "\x00" in text:
        raise InvalidDocumentError(f"not an ISO 8601 date: {_short(text)}")
    try:
        if len(text) == 10:  # 'YYYY-MM-DD' stays a date (datetime would add T00:00:00)
            return dt.date.fromisoformat(text).isoformat()
        if _yaml_timestamp(text):
            return _yaml_timestamp_value(text).isoformat()
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).isoformat()
    except ValueError as exc:
        why = str(exc)
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        pass
    detail = f" ({why})" if "out of range" in why or "must be in" in why else ""
    raise InvalidDocumentError(f"not a valid ISO 8601 date: {_short(text)}{detail}")


def _yaml_timestamp(text: str) -> bool:
    import yaml

    return yaml.SafeLoader.timestamp_regexp.match(text) is not None  # type: ignore[attr-defined]


def _yaml_timestamp_value(text: str) -> dt.date:
    """The date YAML would have made of this text (before kbstore stopped
    letting the loader build dates): same content hash for existing files."""
    import yaml

    node = yaml.ScalarNode("tag:yaml.org,2002:timestamp", text)
    value: dt.date = yaml.constructor.SafeConstructor().construct_yaml_timestamp(node)
    return value


def make_document(path: str, *, title: str, body: str,
                  tags: Sequence[Any] | AbstractSet[Any] | str | None = None,
                  topic: str | None = None, doc_type: str | None = None,
                  created: Any = None, updated: Any = None,
                  extra: dict[str, str] | None = None) -> Document:
    """Validate and normalise the fields of one document. Every refusal is an
    InvalidDocumentError whose message names the field. ``extra``: frontmatter
    kbstore keeps only to write the file back (a skill's name, description)."""
    path = validate_path(path)
    derived_topic, derived_type = derive_topic_type(path)
    doc_type = doc_type or derived_type
    if doc_type not in DOC_TYPES:
        raise InvalidDocumentError(f"doc_type must be one of {DOC_TYPES}, got {doc_type!r}")
    if not isinstance(title, str) or not isinstance(body, str):
        raise InvalidDocumentError("title and body must be strings")
    body = _check_text("body", body, None)
    check_entry_size(body)  # every way in (API, JSONL, picobot) has the limit of a file
    title = _check_text("title", title.strip(), MAX_TITLE_CHARS) or PurePosixPath(path).stem
    clean_tags = normalize_tags(tags)
    created_iso = _field_date("created", created)
    updated_iso = _field_date("updated", updated)
    return Document(path=path, title=title, body=body, tags=clean_tags,
                    topic=topic or derived_topic, doc_type=doc_type,
                    created=created_iso, updated=updated_iso or created_iso,
                    extra=dict(extra or {}))


def _field_date(name: str, value: Any) -> str | None:
    try:
        return normalize_date(value)
    except InvalidDocumentError as exc:
        raise InvalidDocumentError(f"{name}: {exc}") from None


def check_entry_size(body: str) -> None:
    """Refuse a body over the entry limit (UTF-8 bytes), counted without
    encoding it when its length alone decides (a character is 1-4 bytes)."""
    if len(body) * 4 <= MAX_FILE_BYTES:
        return
    if len(body) > MAX_FILE_BYTES:
        size = f"has {len(body)} characters (as many bytes at least)"
    else:
        encoded = len(body.encode("utf-8"))
        if encoded <= MAX_FILE_BYTES:
            return
        size = f"is {encoded} bytes of UTF-8"
    raise InvalidDocumentError(f"body {size}, over the {MAX_FILE_BYTES}-byte limit of one "
                               "entry (a file that size is skipped by import)")


def _check_text(name: str, text: str, max_chars: int | None) -> str:
    """Text SQLite can store and a person would still call a title/tag."""
    if "\x00" in text:
        raise InvalidDocumentError(f"{name} contains a NUL byte")
    if not _is_utf8(text):
        raise InvalidDocumentError(f"{name} is not valid UTF-8 (lone surrogates)")
    if max_chars is not None and len(text) > max_chars:
        raise InvalidDocumentError(
            f"{name} is {len(text)} characters, over the {max_chars}-character limit")
    return text


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, (set, frozenset)):
        return "a set"
    return type(value).__name__


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


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


# -- frontmatter -------------------------------------------------------------

# A line of three or more dashes opens and closes the block (as
# python-frontmatter reads it, so existing files keep their content hash).
_BOUNDARY = re.compile(r"^-{3,}\s*$", re.MULTILINE)
_USED_FIELDS = ("title", "name", "description", "tags", "created", "updated")
_YAML = "tag:yaml.org,2002:"
_NULL = _YAML + "null"
# Scalars whose text is taken as written; anything else (!!binary, !foo) is refused.
_TEXT_TAGS = frozenset(_YAML + t for t in ("str", "int", "float", "bool", "timestamp", "null"))


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """(YAML text or None, body). A BOM and surrounding blank space are
    ignored and CRLF line ends read as LF (as python-frontmatter did, so
    content hashes stay); a block opened with ``---`` and never closed is
    refused rather than indexed as body (usually a file caught mid-write)."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n").strip()
    if not _BOUNDARY.match(text):
        return None, text
    parts = _BOUNDARY.split(text, 2)
    if len(parts) < 3:
        raise InvalidDocumentError("frontmatter opened with '---' is never closed")
    return parts[1], parts[2].strip()


def read_fields(frontmatter: str | None) -> dict[str, Any]:
    """The YAML nodes of the fields kbstore uses, by name; a used field
    written twice is refused (which one was meant is a guess)."""
    if frontmatter is None:
        return {}
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        root = yaml.compose(frontmatter, Loader=loader)
    except yaml.YAMLError as exc:
        raise InvalidDocumentError(f"broken YAML frontmatter: {_yaml_problem(exc)}") from exc
    except RecursionError as exc:
        raise InvalidDocumentError("broken YAML frontmatter: nested too deeply") from exc
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise InvalidDocumentError(
            f"frontmatter must be 'key: value' lines, not {_node_kind(root)}")
    fields: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value in _USED_FIELDS:
            line = key.start_mark.line + 1  # the text starts with the opening line's end
            if key.value in fields:  # YAML would keep the last and drop the first unseen
                raise InvalidDocumentError(
                    f"frontmatter field '{key.value}' appears twice (lines "
                    f"{lines[key.value]} and {line})")
            fields[key.value], lines[key.value] = value, line
    return fields


def _yaml_problem(exc: Exception) -> str:
    """What is wrong and on which line of the file (the frontmatter text
    starts with the end of the opening '---' line: its line n is the file's n + 1)."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if not problem:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{problem} (line {mark.line + 1})" if mark is not None else str(problem)


def _text_field(fields: dict[str, Any], name: str) -> str | None:
    node = fields.get(name)
    return None if node is None else _scalar_text(f"frontmatter field '{name}'", node)


def _scalar_text(what: str, node: Any) -> str | None:
    import yaml

    if not isinstance(node, yaml.ScalarNode):
        raise InvalidDocumentError(f"{what} must be text, not {_node_kind(node)}")
    if node.tag == _NULL:
        return None
    if node.tag not in _TEXT_TAGS:
        raise InvalidDocumentError(f"{what} has an unsupported YAML tag {node.tag}")
    return str(node.value)


def _tags_field(fields: dict[str, Any]) -> list[str | None] | str | None:
    """Tags as written: a list, a ``!!set`` (in file order) or a string."""
    import yaml

    node = fields.get("tags")
    if node is None:
        return None
    if isinstance(node, yaml.ScalarNode):
        return _scalar_text("frontmatter field 'tags'", node)
    if isinstance(node, yaml.SequenceNode):
        items = node.value
    elif isinstance(node, yaml.MappingNode) and node.tag == _YAML + "set":
        items = [key for key, _ in node.value]
    else:
        raise InvalidDocumentError(
            f"frontmatter field 'tags' must be a list or text, not {_node_kind(node)}")
    if len(items) > MAX_TAGS:  # checked before reading: aliases make long lists cheap
        raise InvalidDocumentError(f"tags: {len(items)} tags, over the limit of {MAX_TAGS}")
    return [_scalar_text(f"tags: item {n}", item) for n, item in enumerate(items, start=1)]


def _node_kind(node: Any) -> str:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return "a set" if node.tag == _YAML + "set" else "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return f"a single value ({str(node.value)[:40]!r})"


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

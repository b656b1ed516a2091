"""A document's fields, checked and normalised: ``make_document`` and what
it applies (path rules, topic and type from the path, tags, dates, sizes).
The limits here hold for every way in: the API, import, import-jsonl, copy,
picobot's store and the MCP tools. Every refusal is an InvalidDocumentError
whose message names the field."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from pathlib import PurePosixPath
from typing import Any

from .errors import InvalidDocumentError
from .model import DOC_TYPES, Document

TOPICS = ("self", "user", "projects", "domains", "journal")
SKILLS_TOPIC = "skills"
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

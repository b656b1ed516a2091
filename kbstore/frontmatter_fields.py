"""Reading a markdown file's YAML frontmatter: the block split from the
body, and the fields kbstore uses (title, name, description, tags, created,
updated) as YAML nodes.

The frontmatter is composed into YAML nodes, never constructed into Python
objects: dates stay the text the user wrote (validated in documents.py, so
``2024-02-30`` is a reason, not a crash), explicit tags (``!!int``,
``!!set``, ``!foo``) run no constructor, and an alias "bomb" is never
expanded because only scalar values are read. Fields kbstore does not use are
not interpreted at all. A UTF-8 byte-order mark and CRLF line ends are fine."""

from __future__ import annotations

import re
from typing import Any

from .documents import MAX_TAGS
from .errors import InvalidDocumentError

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

"""The MCP tools' contracts: descriptions, JSON schemas for input and
structured output, and the argument check that turns any bad input into one
line the calling model can act on.

The schemas are written by hand (not derived from signatures) so that they
are exactly what an agent sees, and the check below enforces exactly the
keywords they use: type, enum, minimum/maximum, minLength/maxLength,
maxItems, required, additionalProperties=false. An optional argument sent as
null counts as absent (some clients send every field).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .documents import MAX_PATH_BYTES, SKILLS_TOPIC, TOPICS
from .errors import KBStoreError

MAX_LIMIT = 100
MAX_RECENT = 500
SEARCH_TOPICS = [*TOPICS, SKILLS_TOPIC]


class ToolArgumentError(KBStoreError, ValueError):
    """A tool was called with arguments it cannot use."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    annotations: dict[str, Any]


def _obj(properties: dict[str, Any], required: tuple[str, ...] = (), *,
         closed: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "required": list(required)}
    if closed:
        schema["additionalProperties"] = False
    return schema


_STR = {"type": "string"}
_STR_OR_NULL = {"type": ["string", "null"]}
_TAGS = {"type": "array", "items": {"type": "string"}}
# A path of at most MAX_PATH_BYTES bytes has at most as many characters: the
# tools take every path the store takes (validate_path counts the bytes).
_PATH_IN = {"type": "string", "minLength": 1, "maxLength": MAX_PATH_BYTES,
            "description": "Document path as returned by search or list, e.g. "
                           "'projects/picobot.md' or 'skills/deploy/SKILL.md'."}

_HIT = _obj({
    "path": _STR, "uri": _STR, "title": _STR, "tags": _TAGS,
    "type": {"type": "string", "description": "entry, skill or journal"},
    "topic": _STR, "date": _STR_OR_NULL, "score": {"type": "number"}, "snippet": _STR,
    "explain": {"type": "object", "description": "Per-retriever ranks and scores (explain=true)."},
}, ("path", "uri", "title", "tags", "type", "topic", "date", "score", "snippet"), closed=False)

_LISTED = _obj({"path": _STR, "uri": _STR, "title": _STR, "tags": _TAGS, "type": _STR,
                "topic": _STR, "date": _STR_OR_NULL},
               ("path", "uri", "title", "tags", "type", "topic", "date"), closed=False)

_TOPIC_FILTER = {"type": "string", "enum": SEARCH_TOPICS,
                 "description": "Only this topic: self (the agent's own lessons), user (facts "
                                "about the user), projects, domains (general know-how), journal "
                                "(dated notes), skills. Omit to search everything."}

_SPECS = [
    ToolSpec(
        "search", "Search the knowledge base",
        "Find notes in the user's knowledge base by meaning and keywords (hybrid: tags/titles, "
        "full text and embeddings, fused). Call this BEFORE answering anything about the user, "
        "their projects, past decisions, how something was done before, or stored procedures "
        "(skills). Returns ranked hits with path, title, tags, type, date, score and a snippet; "
        "call `get` with a hit's path to read the whole note. Few or no hits means the knowledge "
        "base does not know; say so rather than guessing.",
        _obj({
            "query": {"type": "string", "minLength": 1, "maxLength": 4000,
                      "description": "What to look for: a question or keywords."},
            "topic": _TOPIC_FILTER,
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 10,
                      "description": f"Most hits to return (1-{MAX_LIMIT})."},
            "min_similarity": {"type": "number", "minimum": -1, "maximum": 1,
                               "description": "Drop hits whose best embedding similarity is "
                                              "below this (tag/title matches always pass); "
                                              "around 0.3 with the MiniLM model. Off by default."},
            "explain": {"type": "boolean", "default": False,
                        "description": "Add each retriever's rank and score to every hit."},
        }, ("query",)),
        _obj({"query": _STR, "topic": _STR_OR_NULL, "count": {"type": "integer"},
              "hits": {"type": "array", "items": _HIT}}, ("query", "count", "hits"),
             closed=False),
        {"read_only_hint": True, "idempotent_hint": True, "open_world_hint": False}),
    ToolSpec(
        "get", "Read one note",
        "Read a whole note (frontmatter and markdown body) by its path, as returned by `search` "
        "or `list`. Use it when a search snippet is not enough to answer.",
        _obj({"path": _PATH_IN}, ("path",)),
        _obj({"path": _STR, "uri": _STR,
              "frontmatter": _obj({"title": _STR, "topic": _STR, "type": _STR, "tags": _TAGS,
                                   "created": _STR_OR_NULL, "updated": _STR_OR_NULL},
                                  ("title", "topic", "type", "tags"), closed=False),
              "body": _STR}, ("path", "uri", "frontmatter", "body"), closed=False),
        {"read_only_hint": True, "idempotent_hint": True, "open_world_hint": False}),
    ToolSpec(
        "store", "Save a note",
        "Save something worth remembering across conversations as a markdown note in the "
        "user's workspace, searchable at once. One note per subject: storing the same topic + "
        "title again REPLACES that note's content (read it with `get` first and merge when "
        "adding to it). Pick the topic: user = facts and preferences of the user; projects = "
        "decisions, commands and state of one project; domains = general know-how; self = "
        "lessons about how you (the agent) should work; journal = a dated log entry. Do not "
        "store secrets. Needs a server started with --workspace.",
        _obj({
            "topic": {"type": "string", "enum": list(TOPICS),
                      "description": "Folder of the note: " + ", ".join(TOPICS) + "."},
            "title": {"type": "string", "minLength": 1, "maxLength": 200,
                      "description": "Short, specific title; it names the file."},
            "content": {"type": "string", "maxLength": 1_000_000,
                        "description": "The note in markdown (a '# Title' heading is added "
                                       "when missing)."},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1,
                                                "maxLength": 100},
                     "maxItems": 50, "description": "A few lowercase keywords."},
        }, ("topic", "title", "content")),
        _obj({"path": _STR, "uri": _STR, "file": _STR, "title": _STR, "topic": _STR,
              "tags": _TAGS}, ("path", "uri", "file", "title", "topic", "tags"), closed=False),
        {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": True,
         "open_world_hint": False}),
    ToolSpec(
        "delete", "Delete a note",
        "Permanently delete one note: its markdown file in the workspace and its index entry. "
        "Only when the user asks for it or the note is plainly wrong and replaced; to change a "
        "note, `store` it again instead. Needs a server started with --workspace.",
        _obj({"path": _PATH_IN}, ("path",)),
        _obj({"path": _STR, "deleted_from_index": {"type": "boolean"},
              "file_deleted": {"type": "boolean"}, "file": _STR_OR_NULL},
             ("path", "deleted_from_index", "file_deleted", "file"), closed=False),
        {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False,
         "open_world_hint": False}),
    ToolSpec(
        "list", "List recent notes",
        "List the most recently updated notes, optionally of one topic: to see what the "
        "knowledge base holds or what changed lately (e.g. the last journal entries). For "
        "finding something specific use `search`.",
        _obj({"topic": {**_TOPIC_FILTER, "description": "Only this topic (" +
                        ", ".join(SEARCH_TOPICS) + "); omit for all."},
              "recent": {"type": "integer", "minimum": 1, "maximum": MAX_RECENT, "default": 20,
                         "description": f"How many notes, newest first (1-{MAX_RECENT})."}}),
        _obj({"topic": _STR_OR_NULL, "count": {"type": "integer"},
              "documents": {"type": "array", "items": _LISTED}}, ("count", "documents"),
             closed=False),
        {"read_only_hint": True, "idempotent_hint": True, "open_world_hint": False}),
    ToolSpec(
        "status", "Knowledge base status",
        "Counts and settings of the knowledge base: documents, vectors, HyPE questions, "
        "embedding model, file size, whether notes can be stored (a workspace) and whether "
        "edits on disk are watched. For diagnosing, not for answering questions.",
        _obj({}),
        _obj({"path": _STR, "documents": {"type": "integer"}, "vectors": {"type": "integer"},
              "hype_questions": {"type": "integer"}, "hype_pending": {"type": "integer"},
              "schema_version": {"type": "integer"},
              "embedder": {"type": ["object", "null"]}, "file_bytes": {"type": "integer"},
              "workspace": _STR_OR_NULL, "writable": {"type": "boolean"},
              "watching": {"type": "boolean"}, "server_version": _STR},
             ("path", "documents", "embedder", "writable", "watching"), closed=False),
        {"read_only_hint": True, "idempotent_hint": True, "open_world_hint": False}),
]
TOOL_SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in _SPECS}


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_value(key: str, rule: dict[str, Any], value: Any) -> Any:
    kind = rule.get("type")
    if kind == "string":
        if not isinstance(value, str):
            raise ToolArgumentError(f"'{key}' must be a string, got {_show(value)}")
        if rule.get("minLength") and not value.strip():
            raise ToolArgumentError(f"'{key}' must not be empty")
        if "maxLength" in rule and len(value) > rule["maxLength"]:
            raise ToolArgumentError(f"'{key}' is too long ({len(value)} characters; at most "
                                    f"{rule['maxLength']})")
        if "enum" in rule and value not in rule["enum"]:
            raise ToolArgumentError(f"'{key}' must be one of: {', '.join(rule['enum'])} "
                                    f"(got {_show(value)})")
        return value
    if kind in ("integer", "number"):
        if isinstance(value, float) and kind == "integer" and value.is_integer():
            value = int(value)
        ok = isinstance(value, int) or (kind == "number" and isinstance(value, float))
        if isinstance(value, bool) or not ok or (isinstance(value, float)
                                                 and not math.isfinite(value)):
            what = "an integer" if kind == "integer" else "a finite number"
            raise ToolArgumentError(f"'{key}' must be {what}, got {_show(value)}")
        low, high = rule.get("minimum"), rule.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ToolArgumentError(f"'{key}' must be from {low} to {high} (got {_show(value)})")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ToolArgumentError(f"'{key}' must be true or false, got {_show(value)}")
        return value
    if kind == "array":
        if isinstance(value, str):  # "a, b" is a common way to send a list of tags
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list):
            raise ToolArgumentError(f"'{key}' must be a list, got {_show(value)}")
        if "maxItems" in rule and len(value) > rule["maxItems"]:
            raise ToolArgumentError(f"'{key}' has {len(value)} items; at most "
                                    f"{rule['maxItems']}")
        return [_check_value(f"{key}[{n}]", rule["items"], item) for n, item in enumerate(value)]
    raise AssertionError(f"schema keyword type={kind!r} is not checked")  # pragma: no cover


def check_arguments(tool: str, schema: dict[str, Any], arguments: Any) -> dict[str, Any]:
    """The arguments as keyword arguments for the tool, or ToolArgumentError
    with one line saying what is wrong."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolArgumentError(f"arguments must be a JSON object, got {_show(arguments)}")
    properties: dict[str, Any] = schema["properties"]
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        allowed = ", ".join(properties) or "none"
        raise ToolArgumentError(f"unknown argument(s) {', '.join(map(_show, unknown))}; "
                                f"{tool} takes: {allowed}")
    out: dict[str, Any] = {}
    for key, rule in properties.items():
        value = arguments.get(key)
        if value is None:
            if key in schema.get("required", ()):
                raise ToolArgumentError(f"missing required argument '{key}'")
            continue
        out[key] = _check_value(key, rule, value)
    return out

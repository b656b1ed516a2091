"""How messages name documents: one listing for the CLI and the library's
log lines alike (imports nothing, so every command can use it)."""

from __future__ import annotations

SHOWN = 10  # paths listed before "... and N more"


def shown(path: str) -> str:
    """A document path as a terminal line may show it: a name with a newline,
    a carriage return or an escape sequence is quoted, so it can neither break
    a listing nor overwrite what the line says."""
    return path if path.isprintable() else repr(path)


def some_paths(paths: list[str]) -> str:
    more = f" ... and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(shown(p) for p in paths[:SHOWN]) + more

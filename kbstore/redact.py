"""Redacting secrets from text that kbstore stores or logs (LLM error
messages above all)."""

from __future__ import annotations

import re

_SECRET = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|api[_-]?key[=:]\s*\S+|Bearer\s+\S+)", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with anything that looks like a credential replaced."""
    return _SECRET.sub("[redacted]", text)

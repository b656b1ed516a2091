"""Redacting secrets from text that kbstore stores or logs (LLM error
messages above all)."""

from __future__ import annotations

import re

_SECRET = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|api[_-]?key[=:]\s*\S+|Bearer\s+\S+)", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with anything that looks like a credential replaced."""
    return _SECRET.sub("[redacted]", text)


class RedactingFilter:
    """A logging filter that redacts every record kbstore logs."""

    def filter(self, record: object) -> bool:
        import logging

        assert isinstance(record, logging.LogRecord)
        record.msg = redact(record.getMessage())
        record.args = None
        return True


def install_log_filter() -> None:
    import logging

    logger = logging.getLogger("kbstore")
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter())

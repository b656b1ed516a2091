"""A one-line notice when a writer has waited a moment for another process's
write lock (SQLite's BEGIN IMMEDIATE, PostgreSQL's advisory locks), so a
command queued behind another one does not look hung. The wait itself and
its timeout are the backend's; this only says so.

One watchdog thread serves every waiting writer of the process: entering a
wait costs a dictionary insert, not a thread.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Iterator

log = logging.getLogger("kbstore.wait")

NOTICE_AFTER_S = 1.5   # wait this long before saying so
_TICK_S = 0.25

_lock = threading.Lock()
_waiting: dict[int, tuple[float, str]] = {}  # token -> (notice deadline, what is waited for)
_tokens = itertools.count()
_watchdog: list[threading.Thread] = []


def _watch() -> None:
    tick = threading.Event()  # never set: a sleep that a patched time.sleep does not reach
    while True:
        tick.wait(_TICK_S)
        now = time.monotonic()
        with _lock:
            due = [(token, where) for token, (deadline, where) in _waiting.items()
                   if deadline <= now]
            for token, _ in due:
                del _waiting[token]  # said once per wait
        for _, where in due:
            log.warning("waiting for another kbstore process to finish writing to %s ...",
                        where)


@contextlib.contextmanager
def notice_if_waiting(where: str) -> Iterator[None]:
    """Around a lock acquisition: after NOTICE_AFTER_S still inside, log one
    warning naming ``where`` (the file or knowledge base)."""
    token = next(_tokens)
    with _lock:
        _waiting[token] = (time.monotonic() + NOTICE_AFTER_S, where)
        if not _watchdog:
            thread = threading.Thread(target=_watch, name="kbstore-wait-notice", daemon=True)
            thread.start()
            _watchdog.append(thread)
    try:
        yield
    finally:
        with _lock:
            _waiting.pop(token, None)

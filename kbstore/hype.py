"""HyPE: hypothetical questions a document answers, written by an LLM.

Agents ask intent questions ("how do I recover from a failed deploy?") that
match answers poorly; matching them against questions is much closer. The
questions are generated once per content hash through ``litellm.completion``
(imported lazily: it is slow to import) and embedded as queries.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import HypeError
from .redact import redact
from .settings import DEFAULT_HYPE_MODEL

log = logging.getLogger("kbstore.hype")
# litellm fetches a model price list from the network at import; use its bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DEFAULT_MODEL = DEFAULT_HYPE_MODEL
MAX_QUESTIONS = 10
MAX_QUESTION_CHARS = 300
MAX_ANSWER_CHARS = 50_000  # 10 questions of 300 characters fit many times over
MAX_ERROR_CHARS = 300
BODY_CHARS = 2000

PROMPT = """Given this knowledge base entry, generate 5-10 questions an AI agent
might ask when it needs this information. Focus on:
- Task-oriented: "How do I...", "What's the best way to..."
- Lookup: "What is...", "Where is..."
- Decision: "Should I...", "When should I..."

Title: {title}
Content: {body}

Return only the questions, one per line, no numbering."""


@dataclass
class HypeConfig:
    enabled: bool = True
    model: str = DEFAULT_MODEL
    concurrency: int = 4
    timeout: float = 60.0
    retries: int = 3            # on rate limits and transient errors
    backoff: float = 1.0        # seconds, doubled each retry
    temperature: float = 0.3
    max_tokens: int = 500
    # Consecutive failures after which the rest of a run is left pending
    # instead of waiting on an LLM that is clearly down (no key, no network).
    breaker: int = 3





_PREFIX = re.compile(r"^\s*(?:[-*•·]+|\(?\d{1,2}[.)\]:]|\(?[a-zA-Z][.)]|#+|Q\d*[:.])\s*")
_PREAMBLE = re.compile(r"^(here (are|is)|sure|certainly|okay|ok\b|below are|the following)",
                       re.IGNORECASE)


def parse_questions(text: Any) -> list[str]:
    """Clean an LLM answer into at most 10 distinct, storable questions.

    Strips numbering, bullets, quotes and markdown emphasis; drops blank
    lines, preambles ("Here are some questions:"), duplicates, lines longer
    than 300 characters, lines with no letter or digit, and lines SQLite or
    a terminal should not get (lone surrogates, NUL and other control
    characters). Raises HypeError when nothing is left or the answer is not
    text at all, so one bad answer costs only its own document.
    """
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise HypeError(f"the LLM answer is not text ({type(text).__name__})")
    out: list[str] = []
    seen: set[str] = set()
    for raw in text[:MAX_ANSWER_CHARS].splitlines():
        line = raw.strip()
        for _ in range(3):  # "1. - **"How ...?"**" has several layers
            line = _PREFIX.sub("", line).strip().strip("*_`").strip().strip("\"'“”‘’").strip()
        if not line or len(line) > MAX_QUESTION_CHARS or not _storable(line):
            continue
        if line.endswith(":") or (_PREAMBLE.match(line) and not line.endswith("?")):
            continue
        key = " ".join(line.lower().split())
        if key in seen:
            continue
        seen.add(key)
        out.append(line)
        if len(out) == MAX_QUESTIONS:
            break
    if not out:
        raise HypeError("the LLM answer held no usable question")
    return out


def _storable(line: str) -> bool:
    if not any(ch.isalnum() for ch in line):
        return False
    if any((ord(ch) < 32 and ch != "\t") or 0x7F <= ord(ch) < 0xA0 for ch in line):
        return False
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate would fail the whole write transaction
        return False
    return True


def _answer_text(response: Any) -> Any:
    """The message text of a completion, or HypeError when the response has
    no such thing (a provider returning an odd shape is this item's problem)."""
    try:
        return response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        raise HypeError(f"the LLM response has no message ({type(exc).__name__})") from None


# Classified by type and HTTP status, not by the message: the message may
# carry a key, and a key's letters must not decide anything.
_RETRY_TYPES = frozenset({"RateLimitError", "APIConnectionError", "Timeout", "APITimeoutError",
                          "ServiceUnavailableError"})
_FINAL_TYPES = frozenset({"AuthenticationError", "PermissionDeniedError", "BadRequestError",
                          "NotFoundError", "ContextWindowExceededError",
                          "ContentPolicyViolationError", "UnprocessableEntityError",
                          "InvalidRequestError", "BudgetExceededError"})
_CREDENTIAL_WORDS = ("credential", "api_key", "api key", "auth")
# The provider SDK's own "no key configured" (raised before any request, yet
# wrapped by litellm as an HTTP 500): waiting will not produce a key.
_NO_KEY_PHRASES = ("missing credentials", "api_key client option must be set")


def _is_retryable(exc: Exception) -> bool:
    """Rate limits and transient outages are retried; auth/config errors are not."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _FINAL_TYPES:
        return False
    if any(phrase in redact(str(exc)).lower() for phrase in _NO_KEY_PHRASES):
        return False
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        if status in (408, 429) or status >= 500:
            return True
        if 400 <= status < 500:
            return False
    # Read after redaction: only kbstore's placeholder is left where a key was.
    text = redact(str(exc)).lower()
    if names & _RETRY_TYPES:
        # A connection error that is really "no key configured" will not heal by waiting.
        return not any(word in text for word in _CREDENTIAL_WORDS)
    return "rate limit" in text


def generate(config: HypeConfig, title: str, body: str) -> list[str]:
    """Ask the LLM for one document's questions (with retries on rate limits)."""
    import litellm

    litellm.suppress_debug_info = True
    prompt = PROMPT.format(title=title, body=body[:BODY_CHARS])
    delay = config.backoff
    for attempt in range(config.retries + 1):
        try:
            response = litellm.completion(
                model=config.model, messages=[{"role": "user", "content": prompt}],
                temperature=config.temperature, max_tokens=config.max_tokens,
                timeout=config.timeout)
        except Exception as exc:
            if attempt == config.retries or not _is_retryable(exc):
                raise
            log.info("HyPE call failed (%s), retrying in %.1fs", type(exc).__name__, delay)
            time.sleep(delay)
            delay *= 2
            continue
        return parse_questions(_answer_text(response))
    raise AssertionError("unreachable")


def error_text(exc: BaseException, *, keep: tuple[str, ...] = ()) -> str:
    """An exception as one redacted line for the database and logs
    (redacted before it is cut, so a cut never leaves half a key)."""
    message = redact(str(exc), keep=keep)
    return redact(f"{type(exc).__name__}: {message}", keep=keep)[:MAX_ERROR_CHARS]


def generate_many(config: HypeConfig, items: list[tuple[str, str, str]],
                  on_done: Callable[[], None] | None = None
                  ) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Questions for many (key, title, body) items with at most
    ``config.concurrency`` LLM calls in flight. Returns (questions by key,
    error message by key); a failure never raises. ``on_done`` is called
    once per finished item (progress bars)."""
    questions: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    # Counted by the workers as calls finish: pool.map submits every item at
    # once, so counting while consuming results would trip far too late.
    failures_in_row = [0]
    lock = threading.Lock()
    keep = (config.model,)  # the model name is what a user needs to read in an error

    def one(item: tuple[str, str, str]) -> tuple[str, list[str] | None, str | None]:
        key, title, body = item
        with lock:
            if failures_in_row[0] >= config.breaker:
                return key, None, "skipped: the LLM failed repeatedly in this run"
        try:
            result = generate(config, title, body)
        except HypeError as exc:  # the LLM answered, just not usefully: not an outage
            with lock:  # ... and it is reachable: the outages are not "in a row"
                failures_in_row[0] = 0
            return key, None, error_text(exc, keep=keep)
        except Exception as exc:  # the document is kept either way
            with lock:
                failures_in_row[0] += 1
            return key, None, error_text(exc, keep=keep)
        with lock:
            failures_in_row[0] = 0
        return key, result, None

    from concurrent.futures import ThreadPoolExecutor  # only when HyPE runs

    with ThreadPoolExecutor(max_workers=max(1, config.concurrency)) as pool:
        for key, result, error in pool.map(one, items):
            if result is not None:
                questions[key] = result
            else:
                errors[key] = error or "unknown error"
            if on_done is not None:
                on_done()
    if errors:
        log.warning("HyPE failed for %d document(s) (left pending): %s", len(errors),
                    next(iter(errors.values())))
    return questions, errors

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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

log = logging.getLogger("kbstore.hype")
# litellm fetches a model price list from the network at import; use its bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DEFAULT_MODEL = "openai/gpt-4o-mini"
MODEL_ENV = "KBSTORE_HYPE_MODEL"
ENABLE_ENV = "KBSTORE_HYPE"
MAX_QUESTIONS = 10
MAX_QUESTION_CHARS = 300
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

    @classmethod
    def resolve(cls, enabled: bool | None = None, model: str | None = None) -> HypeConfig:
        if enabled is None:
            enabled = os.environ.get(ENABLE_ENV, "1").strip().lower() not in ("0", "false", "no",
                                                                              "off")
        return cls(enabled=bool(enabled), model=model or os.environ.get(MODEL_ENV)
                   or DEFAULT_MODEL)


class HypeError(Exception):
    """The LLM gave no usable question (or failed)."""


_PREFIX = re.compile(r"^\s*(?:[-*•·]+|\(?\d{1,2}[.)\]:]|\(?[a-zA-Z][.)]|#+|Q\d*[:.])\s*")
_PREAMBLE = re.compile(r"^(here (are|is)|sure|certainly|okay|ok\b|below are|the following)",
                       re.IGNORECASE)


def parse_questions(text: str | None) -> list[str]:
    """Clean an LLM answer into at most 10 distinct questions.

    Strips numbering, bullets, quotes and markdown emphasis; drops blank
    lines, preambles ("Here are some questions:"), duplicates and lines
    longer than 300 characters. Raises HypeError when nothing is left.
    """
    out: list[str] = []
    seen: set[str] = set()
    for raw in (text or "").splitlines():
        line = raw.strip()
        for _ in range(3):  # "1. - **"How ...?"**" has several layers
            line = _PREFIX.sub("", line).strip().strip("*_`").strip().strip("\"'“”‘’").strip()
        if not line or len(line) > MAX_QUESTION_CHARS:
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


def _is_retryable(exc: Exception) -> bool:
    """Rate limits and transient outages are retried; auth/config errors are not."""
    text = str(exc).lower()
    if any(word in text for word in ("credential", "api_key", "api key", "auth")):
        return False
    return type(exc).__name__ in ("RateLimitError", "APIConnectionError", "Timeout",
                                  "APITimeoutError", "ServiceUnavailableError") \
        or "rate limit" in text


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
            return parse_questions(response.choices[0].message.content)
        except HypeError:
            raise
        except Exception as exc:
            if attempt == config.retries or not _is_retryable(exc):
                raise
            log.info("HyPE call failed (%s), retrying in %.1fs", type(exc).__name__, delay)
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


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

    def one(item: tuple[str, str, str]) -> tuple[str, list[str] | None, str | None]:
        key, title, body = item
        with lock:
            if failures_in_row[0] >= config.breaker:
                return key, None, "skipped: the LLM failed repeatedly in this run"
        try:
            result = generate(config, title, body)
        except HypeError as exc:  # the LLM answered, just not usefully: not an outage
            return key, None, f"HypeError: {exc}"
        except Exception as exc:  # the document is kept either way
            with lock:
                failures_in_row[0] += 1
            return key, None, f"{type(exc).__name__}: {_redact(str(exc))[:300]}"
        with lock:
            failures_in_row[0] = 0
        return key, result, None

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


_SECRET = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|api[_-]?key[=:]\s*\S+|Bearer\s+\S+)", re.IGNORECASE)


def _redact(text: str) -> str:
    """Error texts go into the database: never let a key ride along."""
    return _SECRET.sub("[redacted]", text)

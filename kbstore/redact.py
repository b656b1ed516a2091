"""One redaction rule for every text kbstore stores or logs (issue 10, rule 4).

Error messages from LLM clients carry keys in every shape: URLs with
``?key=``, ``https://user:pw@host``, headers, JSON bodies, INI snippets,
bare tokens. Instead of a list of vendor prefixes, :func:`redact` removes
what *looks* secret by its place or its shape:

1. the value of any environment variable of this process whose name says it
   is secret (contains KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL or
   AUTH), whatever it looks like, also URL-encoded;
2. the user-info part of a URL (``scheme://[redacted]@host``);
3. the value after a secret-looking name in ``name=value`` (query strings,
   INI, env assignments), ``"name": value`` (JSON, Python reprs) and
   ``Name: value`` (HTTP headers);
4. the credential after ``Bearer`` / ``Basic``;
5. two well-known shapes too short or too dotted for rule 6: AWS access key
   ids (``AKIA``/``ASIA`` + 16 capitals and digits, 20 characters) and JSON
   web tokens (``eyJ...``.``eyJ...``.signature, whose parts are short);
6. long random-looking tokens: runs of 24+ of ``[A-Za-z0-9+/=_-]`` with 20+
   letters/digits and 8+ distinct characters that are mostly not words.
   "Not words" is measured twice: how often the run switches between a lowercase word, a capital, an
   all-caps run and a number (camelCase and model names switch rarely;
   random text every other character), and how many of its letter pairs are
   among the 160 pairs common in identifiers and English text.

What survives, by design and tested: ordinary prose, file paths, ISO dates,
model names (and whatever is passed as ``keep``, e.g. the configured model),
class names, UUID-free numbers, and content hashes printed alone as 40 or 64
lowercase hex digits (git commits, sha256: they identify content, not
access). Other hex runs of 24+ (UUIDs, 32-digit keys) are redacted.

Known limits, measured: a random run of letters only (a bare ``hf_`` token
outside any ``key=``/header/URL context and not in the environment) passes
as a word about 4 times in 10,000; a random run of lowercase letters and
digits about 2 in 1,000. The other way round, about 1 in 7,000 ordinary
runs of 24+ characters (some model names such as ``qwen3-30b-a3b-fp8``,
long non-English compounds) is redacted; pass such names as ``keep``.

:func:`install` redacts every log record of the ``kbstore`` logger
hierarchy (and of the LLM client libraries kbstore calls, which log request
URLs) when the record is created, so no handler ever sees a secret.
"""

from __future__ import annotations

import logging
import os
import re
import traceback
from collections.abc import Iterable, Mapping
from functools import cache, lru_cache

PLACEHOLDER = "[redacted]"


@cache
def _rx(pattern: str) -> re.Pattern[str]:
    # Compiled on first use, not at import: importing kbstore stays fast.
    return re.compile(pattern)


# Environment variable names whose values are secrets, whatever they look like.
_SECRET_ENV_NAME = r"(?i)KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH"
# Values too short or too common to be anyone's secret (TOKENIZERS_PARALLELISM=false);
# replacing them would mangle ordinary words.
_MIN_ENV_SECRET = 6
_FLAG_VALUES = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null", "enabled",
                          "disabled", "default"})

# Words that make a field name secret in text: "api_key", "X-Api-Key", "authToken".
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pass",
                           "pwd", "credential", "credentials", "auth", "authorization",
                           "signature", "sig", "cookie", "session", "sessionid", "jwt",
                           "bearer", "privatekey"})
_SECRET_SUFFIXES = ("key", "token", "secret", "password", "passwd")
# Standalone names that are headers or obvious labels even without a separator;
# "key:" alone is left out: "API key: not set" is prose.
_STANDALONE_NAMES = frozenset({"authorization", "password", "passwd", "secret", "token",
                               "cookie", "apikey", "credentials", "bearer"})
_NAME_WORD = r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+"

_URL_USERINFO = r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s/?#]+)@"
_VALUE = r"""(?P<value>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[^\s&,;"'<>()\[\]{}]+)"""
_QUOTED_NAME = r"""(?P<q>["'])(?P<name>[A-Za-z0-9_.\- ]{1,64})(?P=q)(?P<sep>\s*:\s*)""" + _VALUE
_NAME = r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,63})"
_EQUALS = _NAME + r"(?P<sep>[ \t]*=[ \t]*)" + _VALUE
_AUTH_SCHEME = r"(?:(?P<scheme>Basic|Bearer|Token|Digest|ApiKey|Key)[ \t]+)?"
_COLON = _NAME + r"(?P<sep>[ \t]*:[ \t]*)" + _AUTH_SCHEME + _VALUE
_BEARER = r"\b(?P<scheme>Bearer|Basic)[ \t]+(?P<value>[A-Za-z0-9._~+/\-]{8,}=*)"
_TOKEN_RUN = r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/=_\-]{24,}"
_KNOWN_SHAPES = (r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"
                 r"|(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}"
                 r"\.[A-Za-z0-9_\-]*")
_LETTERS = r"[A-Za-z]+"
_HEX_RUN = r"[0-9a-fA-F\-]+"
_CONTENT_HASH = r"[0-9a-f]{40}|[0-9a-f]{64}"
_SEPARATORS = r"[^A-Za-z0-9]+"

# Letter pairs common in identifiers and English (the top 160 of Python
# docstrings and identifiers plus model names); random letters hit ~24% of
# them, words 50-95%.
_COMMON_PAIRS = frozenset((
    "ab ac ad ag ai al am an ap ar as at au ba be bo ca ce ch ci ck cl co cr ct da de di do dr "
    "ea ec ed ee eg el em en ep er es et ev ex fi fo ge gi gr ha he ho ib ic id ie ig il im in "
    "io ip is it ka ke ks la le li ll lm lo ls lt ma me mi mo mp ms na nc nd ne nf ng ni no ns "
    "nt oc od ol om on oo op or os ot ou ow ox pa pe pi pl po pr pt pu py qu ra rc rd re ri rm "
    "ro rr rs rt ru sa sc se sh si so sp ss st ta te th ti to tp tr ts tt tu ty ue ul um un up "
    "ur us ut va ve vi xt xy yc yp").split())
_MIN_TOKEN_ALNUM = 20
_MIN_DISTINCT = 8           # random 24-character tokens have 12-20 distinct characters
_MAX_WORD_SWITCHES = 0.28   # switches per character at or above this: random
_MIN_COMMON_PAIRS = 0.5     # share of common letter pairs below this: random


def redact(text: str, *, keep: Iterable[str] = (), env: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret-looking part replaced by ``[redacted]``.

    ``keep``: strings that must survive as they are (the configured model
    name). ``env``: the environment to take secret values from (default:
    this process's).
    """
    if not isinstance(text, str):
        text = str(text)
    if not text:
        return text
    keep = tuple(k for k in keep if k)
    values = _env_secrets(tuple(sorted((os.environ if env is None else env).items())))
    if values is not None:
        text = values.sub(PLACEHOLDER, text)
    text = _rx(_URL_USERINFO).sub(lambda m: f"{m['scheme']}{PLACEHOLDER}@", text)
    text = _rx(_QUOTED_NAME).sub(_named_value, text)
    text = _rx(_EQUALS).sub(_named_value, text)
    text = _rx(_COLON).sub(_header_value, text)
    text = _rx(_BEARER).sub(_bearer_value, text)
    text = _rx(_KNOWN_SHAPES).sub(PLACEHOLDER, text)
    return _rx(_TOKEN_RUN).sub(lambda m: PLACEHOLDER if _looks_random(m[0], keep) else m[0], text)


def is_secret_name(name: str) -> bool:
    """A field/header/parameter name that says its value is secret."""
    words = [w.lower() for w in _rx(_NAME_WORD).findall(name)]
    if any(w in _SECRET_WORDS for w in words):
        return True
    joined = "".join(words)
    return joined in _SECRET_WORDS or any(w.endswith(_SECRET_SUFFIXES) for w in words)


@lru_cache(maxsize=8)
def _env_secrets(items: tuple[tuple[str, str], ...]) -> re.Pattern[str] | None:
    from urllib.parse import quote  # not at import: kbstore keeps start-up lean

    values: set[str] = set()
    for name, value in items:
        value = value.strip()
        if not _rx(_SECRET_ENV_NAME).search(name) or len(value) < _MIN_ENV_SECRET:
            continue
        # A path (SSH_AUTH_SOCK, GOOGLE_APPLICATION_CREDENTIALS) says where a
        # secret lives, it is not one; error messages need paths.
        if value.lower() in _FLAG_VALUES or value.startswith(("/", "~", "./")) or \
                re.match(r"^[A-Za-z]:[\\/]", value):
            continue
        values.add(value)
        values.add(quote(value, safe=""))
    if not values:
        return None
    return re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))


def _quoted_placeholder(value: str) -> str:
    if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
        return f"{value[0]}{PLACEHOLDER}{value[0]}"
    return PLACEHOLDER


def _named_value(m: re.Match[str]) -> str:
    if not is_secret_name(m["name"]) or m["value"] == PLACEHOLDER:
        return m[0]
    quote_char = m.groupdict().get("q") or ""
    return f"{quote_char}{m['name']}{quote_char}{m['sep']}{_quoted_placeholder(m['value'])}"


def _header_value(m: re.Match[str]) -> str:
    name = m["name"]
    if not m["scheme"] and m.string.startswith(" " + PLACEHOLDER, m.end()):
        return m[0]  # "Authorization: Basic [redacted]" is already done
    compound = bool(re.search(r"[_\-.]", name)) or bool(re.search(r"[a-z][A-Z]", name))
    if not is_secret_name(name) or not (compound or name.lower() in _STANDALONE_NAMES):
        return m[0]
    if m["value"].startswith("//"):  # "auth://host" is a URL, handled above
        return m[0]
    scheme = f"{m['scheme']} " if m["scheme"] else ""
    return f"{name}{m['sep']}{scheme}{_quoted_placeholder(m['value'])}"


def _bearer_value(m: re.Match[str]) -> str:
    value = m["value"]
    if value.isalpha() and value.islower():  # "Basic information", "Bearer tokens"
        return m[0]
    return f"{m['scheme']} {PLACEHOLDER}"


def _looks_random(run: str, keep: tuple[str, ...]) -> bool:
    if any(run in k for k in keep):
        return False
    alnum = sum(ch.isalnum() for ch in run)
    if alnum < _MIN_TOKEN_ALNUM or len(set(run)) < _MIN_DISTINCT:  # "xxxx...", "0000..."
        return False
    if _rx(_HEX_RUN).fullmatch(run):
        digits = sum(ch.isdigit() for ch in run)
        letters = sum(ch.isalpha() for ch in run)
        return digits >= 2 and letters >= 2 and not _rx(_CONTENT_HASH).fullmatch(run)
    switches = 0
    for part in _rx(_SEPARATORS).split(run):
        words = _rx(_NAME_WORD).findall(part)
        switches += max(0, len(words) - 1)
    if switches / alnum >= _MAX_WORD_SWITCHES:
        return True
    pairs = [(a + b).lower() for letters in _rx(_LETTERS).findall(run)
             for a, b in zip(letters, letters[1:], strict=False)]
    return len(pairs) >= 8 and sum(p in _COMMON_PAIRS for p in pairs) / len(pairs) \
        < _MIN_COMMON_PAIRS


# -- logging ---------------------------------------------------------------------

# kbstore's own loggers, and the client libraries its LLM calls go through
# (httpx logs every request URL, with a Gemini ``?key=`` in it, at INFO).
REDACTED_LOGGERS = ("kbstore", "LiteLLM", "litellm", "httpx", "httpcore", "openai", "anthropic")


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """Format the record's message, traceback and stack now, redacted, so no
    handler or formatter can see the originals."""
    try:
        message = record.getMessage()
    except Exception:  # bad format arguments: keep what there is, still redacted
        message = f"{record.msg} {record.args!r}"
    record.msg, record.args = redact(message), None
    if record.exc_info and record.exc_info[0] is not None:
        text = "".join(traceback.format_exception(*record.exc_info))
        record.exc_text, record.exc_info = redact(text.rstrip("\n")), None
    elif record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    return record


class RedactingFilter(logging.Filter):
    """A logging filter that redacts records (never drops one). Attach it to
    your own handlers to apply the same rule to everything they write."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


def _covered(name: str) -> bool:
    return any(name == root or name.startswith(root + ".") for root in REDACTED_LOGGERS)


_installed = False


def install() -> None:
    """Redact every record of the covered logger hierarchies (idempotent).

    A filter on the ``kbstore`` logger alone would not do: Python applies a
    logger's filters only to records logged on that very logger, not to
    those propagating up from ``kbstore.hype``. So the record factory is
    wrapped (chaining whatever factory was set before) and redacts records
    of the covered names as they are made; the filter is also attached to
    each covered logger in case a later factory replaces ours.
    """
    global _installed
    if _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if _covered(record.name):
            redact_record(record)
        return record

    logging.setLogRecordFactory(factory)
    for name in REDACTED_LOGGERS:
        logging.getLogger(name).addFilter(RedactingFilter())
    _installed = True


install()  # importing kbstore is enough: no code path can log before this runs

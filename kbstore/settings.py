"""Every environment variable and tunable default kbstore reads, resolved in
ONE place. Modules receive a :class:`Settings` instead of reading the
environment themselves, so a test (or an embedding application) can pass
its own."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from .errors import KBStoreError

# Environment variables (the CLI's --db also reads DB_ENV).
DB_ENV = "KBSTORE_DB"
BINDING_ENV = "KBSTORE_SQLITE_BINDING"      # auto | stdlib | sqlean
BUSY_TIMEOUT_ENV = "KBSTORE_BUSY_TIMEOUT_MS"
HYPE_ENV = "KBSTORE_HYPE"                   # 0/false/no/off disables HyPE on import
HYPE_MODEL_ENV = "KBSTORE_HYPE_MODEL"       # litellm model name
NOMIC_MODEL_DIR_ENV = "KBSTORE_NOMIC_MODEL_DIR"  # a folder holding the nomic .gguf
CACHE_DIR_ENV = "KBSTORE_CACHE_DIR"          # derived model files, the query-vector cache
QUERY_CACHE_ENV = "KBSTORE_QUERY_CACHE"      # 0/false/no/off: do not cache query vectors
EMBED_THREADS_ENV = "KBSTORE_EMBED_THREADS"  # intra-op threads (default: embed_minilm.bulk_threads)

DEFAULT_HYPE_MODEL = "openai/gpt-4o-mini"
# Documents per batch (planned, embedded and sent to the LLM together): big
# enough to amortise embedding calls, small enough that a crash or a bad
# batch costs little. Batches produced quickly share one write transaction
# (kbstore/writer.py, GROUP_DOCS); an LLM-bound batch commits on its own.
BATCH_SIZE = 64

_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Settings:
    binding: str = "auto"
    busy_timeout_ms: int = 10_000
    hype_enabled: bool = True
    hype_model: str = DEFAULT_HYPE_MODEL
    nomic_model_dir: str | None = None
    batch_size: int = BATCH_SIZE
    # The WAL file is truncated back to this size after a checkpoint resets
    # it (without a limit it keeps its largest size forever).
    journal_size_limit: int = 64 * 1024 * 1024
    cache_dir: str = ""               # "" = $XDG_CACHE_HOME/kbstore or ~/.cache/kbstore
    query_cache: bool = True
    embed_threads: int | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        binding = (env.get(BINDING_ENV) or "auto").strip().lower()
        timeout = env.get(BUSY_TIMEOUT_ENV, "").strip()
        try:
            busy = int(timeout) if timeout else cls.busy_timeout_ms
        except ValueError:
            raise KBStoreError(f"{BUSY_TIMEOUT_ENV}={timeout!r}: expected milliseconds") from None
        if busy < 0:
            raise KBStoreError(f"{BUSY_TIMEOUT_ENV}={timeout!r}: must not be negative")
        threads = (env.get(EMBED_THREADS_ENV) or "").strip()
        if threads and (not threads.isdigit() or int(threads) < 1):
            raise KBStoreError(f"{EMBED_THREADS_ENV}={threads!r}: expected a positive integer")
        cache = (env.get(CACHE_DIR_ENV) or "").strip() or os.path.join(
            (env.get("XDG_CACHE_HOME") or "").strip() or os.path.expanduser("~/.cache"),
            "kbstore")
        return cls(
            binding=binding,
            cache_dir=cache,
            query_cache=env.get(QUERY_CACHE_ENV, "1").strip().lower() not in _FALSE,
            embed_threads=int(threads) if threads else None,
            busy_timeout_ms=busy,
            hype_enabled=env.get(HYPE_ENV, "1").strip().lower() not in _FALSE,
            hype_model=(env.get(HYPE_MODEL_ENV) or "").strip() or DEFAULT_HYPE_MODEL,
            nomic_model_dir=(env.get(NOMIC_MODEL_DIR_ENV) or "").strip() or None,
        )

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

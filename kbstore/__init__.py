"""kbstore: an agent's knowledge base in one SQLite file (or PostgreSQL),
with hybrid search."""

from typing import TYPE_CHECKING, Any

from . import redact as _redact
from .errors import (
    DatabaseNotFoundError,
    EmbedderChangedError,
    EmbedderMismatchError,
    EmbedderUnavailableError,
    EmptyQueryError,
    ExchangeError,
    ExtensionLoadError,
    InvalidDocumentError,
    InvalidQueryError,
    KBStoreError,
    NotAKnowledgeBaseError,
    ReadOnlyError,
    SchemaOutdatedError,
    SchemaTooNewError,
    WriteLockTimeoutError,
)

if TYPE_CHECKING:
    from .embed import Embedder, FakeEmbedder
    from .embedders import get_embedder
    from .model import Document, Hit, ImportReport
    from .settings import Settings
    from .store import KnowledgeStore

# Imported on first use (PEP 562), so `kbstore search` and other commands
# load only the modules they run: the names work as before.
_LAZY = {"Embedder": "embed", "FakeEmbedder": "embed", "get_embedder": "embedders",
         "Document": "model", "Hit": "model", "ImportReport": "model", "Settings": "settings",
         "KnowledgeStore": "store"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kbstore' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

# Secrets never reach logs: every kbstore log record is redacted when made.
_redact.install()

__all__ = [
    "DatabaseNotFoundError",
    "Document",
    "Embedder",
    "EmbedderChangedError",
    "EmbedderMismatchError",
    "EmbedderUnavailableError",
    "EmptyQueryError",
    "ExchangeError",
    "ExtensionLoadError",
    "FakeEmbedder",
    "Hit",
    "ImportReport",
    "InvalidDocumentError",
    "InvalidQueryError",
    "KBStoreError",
    "KnowledgeStore",
    "NotAKnowledgeBaseError",
    "ReadOnlyError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "Settings",
    "WriteLockTimeoutError",
    "get_embedder",
]

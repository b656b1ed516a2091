"""kbstore: an agent's knowledge base in one SQLite file (or PostgreSQL),
with hybrid search."""

from . import redact as _redact
from .embed import Embedder, FakeEmbedder
from .embedders import get_embedder
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
)
from .model import Document, Hit, ImportReport
from .settings import Settings
from .store import KnowledgeStore

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
    "get_embedder",
]

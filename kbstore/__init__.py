"""kbstore: an agent's knowledge base in one SQLite file, with hybrid search."""

from .embed import Embedder, FakeEmbedder, get_embedder
from .errors import (
    EmbedderMismatchError,
    EmbedderUnavailableError,
    EmptyQueryError,
    ExtensionLoadError,
    InvalidDocumentError,
    KBStoreError,
    SchemaTooNewError,
)
from .ingest import Document
from .search import Hit
from .store import ImportReport, KnowledgeStore

__version__ = "0.1.0"

__all__ = [
    "Document",
    "Embedder",
    "EmbedderMismatchError",
    "EmbedderUnavailableError",
    "EmptyQueryError",
    "ExtensionLoadError",
    "FakeEmbedder",
    "Hit",
    "ImportReport",
    "InvalidDocumentError",
    "KBStoreError",
    "KnowledgeStore",
    "SchemaTooNewError",
    "get_embedder",
]

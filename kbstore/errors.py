"""Exceptions raised by kbstore. Every message says what to do next."""

from __future__ import annotations


class KBStoreError(Exception):
    """Base class for every error kbstore raises on purpose."""


class ExtensionLoadError(KBStoreError):
    """No SQLite binding on this Python can load the sqlite-vec extension."""


class SchemaTooNewError(KBStoreError):
    """The database was written by a newer kbstore; it is left untouched."""


class NotInitializedError(KBStoreError):
    """The database has no embedder fingerprint yet (run `kbstore init`)."""


class EmbedderMismatchError(KBStoreError):
    """The database was embedded with another model than the one requested."""


class EmbedderUnavailableError(KBStoreError):
    """The embedding model cannot be loaded on this machine."""


class EmptyQueryError(KBStoreError, ValueError):
    """A search query was empty or blank."""


class InvalidDocumentError(KBStoreError, ValueError):
    """A document (path, title, tags, dates) cannot be stored as given."""

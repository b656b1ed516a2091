"""The documents every reliability scenario writes, and the stand-in LLM.

Every document carries a *marker* (``m<writer>x<version>``) in its title AND
at the end of its body, written by the same upsert: a reader that ever sees
two different markers in one document has seen a half-written document.
No model and no LLM is used: FakeEmbedder, and HyPE questions come from a
stand-in for ``kbstore.hype.generate``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from kbstore import Document, FakeEmbedder, KnowledgeStore
from kbstore.documents import make_document

DIM = 64
SEED_MARKER = "m0x0"  # the version every scenario's seeded documents carry
MARKER = re.compile(r"\bm\d+x\d+\b")
VOCAB = ("alpha backup cache deploy error flask git http index json kernel lambda merge "
         "network oauth python queue redis sqlite token unicode vector webhook yaml zeta "
         "sourdough garden battery sensor journal release rollback schema docker").split()


def doc_path(i: int) -> str:
    return f"projects/doc-{i:04d}.md"


def make_docs(ids: Iterable[int], marker: str) -> list[Document]:
    """Short bodies (< 150 chars) so a search snippet always shows the marker."""
    docs = []
    for i in ids:
        words = " ".join(VOCAB[(i * k + k) % len(VOCAB)] for k in (1, 3, 7, 11, 13))
        docs.append(make_document(doc_path(i), title=f"doc {i} {marker}",
                                  body=f"{words} note {i}. marker {marker}",
                                  tags=[VOCAB[i % len(VOCAB)]]))
    return docs


def markers(text: str) -> set[str]:
    return set(MARKER.findall(text))


@contextlib.contextmanager
def fake_hype() -> Iterator[None]:
    """Stand in for the LLM: two questions per document, instantly."""
    from kbstore import hype

    real = hype.generate
    hype.generate = lambda config, title, body: [f"what is {title}?", f"how do I use {title}?"]
    try:
        yield
    finally:
        hype.generate = real


# -- where a scenario's stores live ------------------------------------------------------

PG_ENV = "KBSTORE_RELIABILITY_PG"  # the server URL when the harness runs on PostgreSQL


def use_postgres(server_url: str) -> None:
    """Every store the scenarios create from now on (in this process and its
    children) is a knowledge base on this PostgreSQL server."""
    os.environ[PG_ENV] = server_url


def is_postgres(db: str | os.PathLike[str]) -> bool:
    return str(db).startswith(("postgresql://", "postgres://"))


def new_store(workdir: Path, name: str) -> str | Path:
    """Where a scenario's store called ``name`` lives: ``workdir/name.sqlite``,
    or on PostgreSQL a new database of its own (so a race can clone it) with
    the knowledge base ``rel``."""
    server = os.environ.get(PG_ENV)
    if not server:
        return workdir / f"{name}.sqlite"
    import psycopg

    from tests import pg_server

    url = pg_server.create_database(server, prefix=f"rel_{re.sub(r'[^a-z0-9]', '_', name)}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return pg_server.kb_url(url, "rel")


def clone_store(template: str | Path, workdir: Path, name: str) -> str | Path:
    """A copy of the (closed) store ``template`` called ``name``."""
    if not is_postgres(template):
        db = workdir / f"{name}.sqlite"
        shutil.copyfile(template, db)
        return db
    import psycopg
    from psycopg import sql

    from tests import pg_server

    server = os.environ[PG_ENV]
    source = urlsplit(str(template)).path.lstrip("/")
    target = f"{source[:40]}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(target), sql.Identifier(source)))
    return pg_server.kb_url(pg_server.with_database(server, target), "rel")


def open_store(db: str | os.PathLike[str], hype: bool = True) -> KnowledgeStore:
    return KnowledgeStore.open(db, FakeEmbedder(DIM), hype=hype)


def seed_store(db: Path | str, n: int, hype: bool = True) -> None:
    """Documents 0..n-1 at the seed's version (with HyPE questions unless
    ``hype`` is off)."""
    with fake_hype(), open_store(db, hype=hype) as store:
        store.upsert_many(make_docs(range(n), SEED_MARKER))

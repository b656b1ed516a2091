"""The demo command's queries on the bundled sample knowledge base, top 10
through the public API on both backends (MiniLM, no HyPE):
`python -m benchmarks.pg_sample_parity > benchmarks/results/pg_sample_parity.json`.
The server is the test suite's bundled one (or KBSTORE_TEST_PG_URL)."""

from __future__ import annotations

import json
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from kbstore import KnowledgeStore
from kbstore.cli.content import DEMO_QUERIES
from tests import pg_server

NOW = "2026-12-01T00:00:00+00:00"


def main() -> None:
    server = pg_server.start(durable=False)
    try:
        url = pg_server.kb_url(pg_server.create_database(server.url, "kbstore_parity"), "sample")
        workspace = Path(str(resources.files("kbstore.sample_kb")))
        folder = Path(tempfile.mkdtemp())
        details: list[dict[str, Any]] = []
        with KnowledgeStore.open(folder / "kb.sqlite", "minilm", hype=False) as lite, \
                KnowledgeStore.open(url, "minilm", hype=False) as pg:
            lite.import_directory(workspace)
            pg.import_directory(workspace)
            for text in DEMO_QUERIES:
                a = [h.path for h in lite.search(text, limit=10, now=NOW)]
                b = [h.path for h in pg.search(text, limit=10, now=NOW)]
                details.append({"query": text, "sqlite": a, "postgres": b,
                                "same_top10": a == b, "same_set": set(a) == set(b)})
            documents = len(lite)
        print(json.dumps({
            "documents": documents, "queries": len(details),
            "same_top10_order": sum(d["same_top10"] for d in details),
            "same_top10_set": sum(d["same_set"] for d in details),
            "same_first": sum(d["sqlite"][:1] == d["postgres"][:1] for d in details),
            "details": details}, indent=1))
    finally:
        server.stop()


if __name__ == "__main__":
    main()

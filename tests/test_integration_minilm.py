"""Integration: the real offline MiniLM embedder (weights ship in a package,
no network) on the bundled sample knowledge base finds documents by
paraphrase -- queries that share no content word with the document."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kbstore import KnowledgeStore

pytestmark = pytest.mark.integration

# query -> (document path relative to the knowledge root, must be within top n)
PARAPHRASES = {
    "how often should I feed my bread culture": ("domains/sourdough-starter-care.md", 3),
    "what city does my boss live in and which clock offset": (
        "user/profile-lena-hartmann.md", 1),
    "background coroutine crashed quietly and I had no idea": (
        "domains/python-asyncio-error-handling.md", 3),
}


@pytest.fixture(scope="module")
def minilm_store(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    workspace = tmp_path_factory.mktemp("sample") / "workspace"
    shutil.copytree(Path(str(resources.files("kbstore.sample_kb"))), workspace,
                    ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    path = workspace.parent / "kb.sqlite"
    store = KnowledgeStore.open(path, "minilm", hype=False)
    report = store.import_directory(workspace)
    store.workspace = workspace  # for the tests below
    store.report = report
    yield store
    store.close()


def test_sample_kb_is_indexed(minilm_store: KnowledgeStore) -> None:
    report = minilm_store.report
    assert report.skipped == []
    assert 20 <= report.added <= 40 and report.embedded == report.added
    types = {r[0] for r in minilm_store.conn.execute("SELECT DISTINCT doc_type FROM documents")}
    assert types == {"entry", "skill", "journal"}
    fp = minilm_store.status()["embedder"]
    assert fp["name"] == "minilm" and fp["dim"] == 384
    vec = minilm_store.embedder.embed_queries(["hello world"])[0]
    assert vec.shape == (384,) and np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("query", list(PARAPHRASES))
def test_vector_retriever_finds_paraphrase_first(minilm_store: KnowledgeStore,
                                                 query: str) -> None:
    expected, _ = PARAPHRASES[query]
    hits = minilm_store.search(query, limit=40, explain=True)
    by_vector = {h.explain["ranks"]["vector"]: h.path for h in hits
                 if h.explain["ranks"]["vector"] is not None}
    assert by_vector[1] == expected


# RRF gives a document found by one stray query word in FTS the same rank
# credit as a real match. With the tuned defaults (k=20, title-only overlap
# at 0.25) the bread query ranks its target in the top 3; the "boss" query
# still loses to documents matching 'live'/'city' in FTS plus a weak vector
# rank. Kept visible as a known limit of rank fusion (see quality.md).
RRF_GAP = pytest.mark.xfail(reason="fused RRF ranking: stray FTS keyword matches outrank a "
                                   "vector-only rank-1 paraphrase hit", strict=False)


@pytest.mark.parametrize("query", [
    pytest.param(q, marks=RRF_GAP) if "boss" in q else q for q in PARAPHRASES])
def test_hybrid_search_finds_paraphrase(minilm_store: KnowledgeStore, query: str) -> None:
    expected, top_n = PARAPHRASES[query]
    hits = minilm_store.search(query, limit=10, explain=True)
    top = [h.path for h in hits[:top_n]]
    assert expected in top, [(h.path, h.explain["ranks"]) for h in hits[:5]]


def test_reimport_with_real_model_embeds_only_the_edit(minilm_store: KnowledgeStore) -> None:
    workspace = minilm_store.workspace
    assert minilm_store.import_directory(workspace).embedded == 0
    note = workspace / "knowledge" / "domains" / "sourdough-starter-care.md"
    note.write_text(note.read_text(encoding="utf-8") + "\nRye flour makes it sour.\n",
                    encoding="utf-8")
    report = minilm_store.import_directory(workspace)
    assert (report.updated, report.embedded) == (1, 1)


def test_demo_prints_results(minilm_store: KnowledgeStore) -> None:
    from kbstore.cli import _register, cli

    _register()
    # Reuse the already-embedded file: the demo's import then embeds nothing.
    result = CliRunner().invoke(cli, ["demo", "--db", str(minilm_store.path),
                                      "how often should I feed my bread culture"],
                                catch_exceptions=False)
    assert result.exit_code == 0
    assert "indexed the sample knowledge base" in result.output
    assert "> how often should I feed my bread culture" in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("  1. ")]
    assert len(lines) == 1 and ".md" in lines[0] and "score" in lines[0]

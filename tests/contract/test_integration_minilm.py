"""Integration: the real offline MiniLM embedder (weights ship in a package,
no network) on the bundled sample knowledge base finds documents by
paraphrase -- queries that share no content word with the document."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from kbstore import KnowledgeStore

pytestmark = pytest.mark.integration

# query -> (document path relative to the knowledge root, must be within top n)
PARAPHRASES = {
    # rank 3 before the text lists' agreement weight (agreement_ratio), 1 with it
    "how often should I feed my bread culture": ("domains/sourdough-starter-care.md", 1),
    # The profile shares no word with the query and is found by its vector
    # alone (rank 1, cosine 0.42 vs 0.31 next); every full-text hit matches
    # one or two stray query words ('city', 'live', 'clock'), and a journal
    # at fts 2 / vector 2 outscored it (rank 11 under plain RRF, 7 with the
    # agreement weight). The vector rank 1's standout (vec_standout 4: its
    # RRF term x 1 + 4 x (0.42 - 0.31) / (1 - 0.31)) puts it first; rank 7
    # without.
    "what city does my boss live in and which clock offset": (
        "user/profile-lena-hartmann.md", 1),
    "background coroutine crashed quietly and I had no idea": (
        "domains/python-asyncio-error-handling.md", 3),
}


@pytest.fixture(scope="module")
def minilm_store(tmp_path_factory, backend):  # type: ignore[no-untyped-def]
    pytest.importorskip("onnxruntime")
    workspace = tmp_path_factory.mktemp("sample") / "workspace"
    shutil.copytree(Path(str(resources.files("kbstore.sample_kb"))), workspace,
                    ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    store = KnowledgeStore.open(backend("minilm"), "minilm", hype=False)
    report = store.import_directory(workspace)
    store.workspace = workspace  # for the tests below
    store.report = report
    yield store
    store.close()


def test_sample_kb_is_indexed(minilm_store: KnowledgeStore) -> None:
    report = minilm_store.report
    assert report.skipped == []
    assert 20 <= report.added <= 40 and report.embedded == report.added
    assert {d.doc_type for d in minilm_store.documents()} == {"entry", "skill", "journal"}
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


@pytest.mark.parametrize("query", list(PARAPHRASES))
def test_hybrid_search_finds_paraphrase(minilm_store: KnowledgeStore, query: str) -> None:
    expected, top_n = PARAPHRASES[query]
    hits = minilm_store.search(query, limit=max(10, top_n), explain=True)
    top = [h.path for h in hits[:top_n]]
    assert expected in top, [(h.path, h.explain["ranks"]) for h in hits[:5]]


def test_vector_standout_is_what_ranks_the_profile_first(minilm_store: KnowledgeStore) -> None:
    query = "what city does my boss live in and which clock offset"
    expected, _ = PARAPHRASES[query]
    on = minilm_store.search(query, limit=10, explain=True)
    off = minilm_store.search(query, limit=10, explain=True, vec_standout=0.0)
    assert on[0].path == expected and on[0].explain["vector_gap"] > 0.1
    assert expected in [h.path for h in off] and off[0].path != expected
    assert off[0].explain["ranks"]["fts"] and off[0].explain["ranks"]["vector"]


def test_reimport_with_real_model_embeds_only_the_edit(minilm_store: KnowledgeStore) -> None:
    workspace = minilm_store.workspace
    assert minilm_store.import_directory(workspace).embedded == 0
    note = workspace / "knowledge" / "domains" / "sourdough-starter-care.md"
    note.write_text(note.read_text(encoding="utf-8") + "\nRye flour makes it sour.\n",
                    encoding="utf-8")
    report = minilm_store.import_directory(workspace)
    assert (report.updated, report.embedded) == (1, 1)


def test_demo_prints_results(backend, run_cli) -> None:  # type: ignore[no-untyped-def]
    location = backend("demo")
    result = run_cli("demo", "--db", location, "how often should I feed my bread culture")
    assert result.exit_code == 0, result.output
    assert "indexed the sample knowledge base" in result.output
    assert "> how often should I feed my bread culture" in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("  1. ")]
    assert len(lines) == 1 and ".md" in lines[0] and "score" in lines[0]
    with KnowledgeStore.open(location, read_only=True) as store:  # the demo's store is kept
        assert store.status()["embedder"]["name"] == "minilm" and len(store) > 20

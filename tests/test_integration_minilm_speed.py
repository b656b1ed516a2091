"""Integration: the leaner MiniLM pipeline (edited model graph, int8 weights
at run time, token-budgeted batches, query-vector cache) gives the vectors
the original pipeline gave, with the real model shipped in a package."""

from __future__ import annotations

import os
import random
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from kbstore import FakeEmbedder, KnowledgeStore, embed_cache
from kbstore.embed import embedding_text
from kbstore.embed_minilm import MAX_TOKENS, MiniLMEmbedder, model_files, session_options
from kbstore.embed_onnx_graph import gather_before_dequantize

pytestmark = pytest.mark.integration
ort = pytest.importorskip("onnxruntime")

QUERIES = ["how do I recover when a release breaks production?", "sourdough",
           "what does my human do for fun on saturdays", "x"]


@pytest.fixture
def cache_dir() -> Path:
    """The test session's cache folder (tests/conftest.py points kbstore at it)."""
    return Path(os.environ[embed_cache.CACHE_DIR_ENV])


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The sample KB's embedding texts (parsed by kbstore itself) and queries."""
    root = Path(str(resources.files("kbstore.sample_kb")))
    path = tmp_path_factory.mktemp("parse") / "kb.sqlite"
    with KnowledgeStore.open(path, FakeEmbedder(), hype=False) as store:
        store.import_directory(root)
        docs = [store.get(p) for p in store.paths()]
    out = [embedding_text(d.title, d.tags, d.body) for d in docs if d is not None]
    assert len(out) >= 20
    return out + QUERIES


def reference_vectors(texts: list[str]) -> np.ndarray:
    """The pipeline as it was: original model file, onnxruntime's default
    optimisation (int8 folded into float32), the tokenizer padding each
    batch, batches of 32 sorted by character length."""
    from tokenizers import Tokenizer

    model, tokenizer_file = model_files()
    tok = Tokenizer.from_file(str(tokenizer_file))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model), sess_options=options,
                                   providers=["CPUExecutionProvider"])
    out = np.zeros((len(texts), 384), np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), 32):
        idx = order[start:start + 32]
        enc = tok.encode_batch([texts[i] for i in idx])
        ids = np.array([e.ids for e in enc], np.int64)
        mask = np.array([e.attention_mask for e in enc], np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                    "token_type_ids": np.zeros_like(ids)})[0]
        w = mask[..., None].astype(np.float32)
        pooled = (hidden * w).sum(axis=1) / np.clip(w.sum(axis=1), 1e-9, None)
        out[idx] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return out


@pytest.fixture(scope="module")
def reference(texts: list[str]) -> np.ndarray:
    return reference_vectors(texts)


@pytest.fixture
def embedder(cache_dir: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(query_cache=False)


def _assert_same(a: np.ndarray, b: np.ndarray, tol: float = 1e-5) -> None:
    assert a.shape == b.shape
    assert float((a * b).sum(axis=1).min()) >= 1.0 - tol
    assert float(np.abs(a - b).max()) < tol


def test_new_pipeline_matches_the_original(embedder: MiniLMEmbedder, texts: list[str],
                                           reference: np.ndarray) -> None:
    _assert_same(embedder.embed_documents(texts), reference)
    # different texts stay apart: the comparison above is not trivially true
    assert float(reference[0] @ reference[1]) < 0.95


@pytest.mark.parametrize("budget", [1, 300, 1024, 100_000])
def test_batch_shapes_and_order_do_not_change_vectors(budget: int, texts: list[str],
                                                      reference: np.ndarray,
                                                      cache_dir: Path) -> None:
    emb = MiniLMEmbedder(token_budget=budget, query_cache=False)
    order = list(range(len(texts)))
    random.Random(budget).shuffle(order)
    vectors = emb.embed_documents([texts[i] for i in order])
    _assert_same(vectors, reference[order])


def test_the_model_edit_and_session_settings(texts: list[str], reference: np.ndarray,
                                             cache_dir: Path) -> None:
    model, _ = model_files()
    edited, count = gather_before_dequantize(model.read_bytes())
    assert count == 2  # word and position embedding tables
    for threads in (1, 2):
        for folded in (False, True):
            options = session_options(ort, threads)
            if folded:
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            emb = MiniLMEmbedder(query_cache=False)
            emb._load()
            emb._session = ort.InferenceSession(edited, sess_options=options,
                                                providers=["CPUExecutionProvider"])
            _assert_same(emb.embed_documents(texts[:8]), reference[:8])
    # the embedder loaded the edited model from the cache directory
    assert [p.read_bytes() == edited for p in cache_dir.glob("minilm-*.onnx")] == [True]


def test_cached_query_vectors_are_the_models(cache_dir: Path, reference: np.ndarray,
                                             texts: list[str]) -> None:
    first = MiniLMEmbedder()
    miss = first.embed_queries([QUERIES[0]])
    assert first.cache_hits == 0 and first.calls == 1
    second = MiniLMEmbedder()
    hit = second.embed_queries([QUERIES[0]])
    assert second.cache_hits == 1 and second.calls == 0 and second._session is None
    assert np.array_equal(miss, hit)
    _assert_same(hit, reference[[texts.index(QUERIES[0])]])


def test_folded_session_for_long_lived_processes_keeps_vectors(
        cache_dir: Path, reference: np.ndarray, texts: list[str]) -> None:
    from kbstore.embed_minilm import FOLD_AFTER_QUERIES

    emb = MiniLMEmbedder(query_cache=False)
    lean = [emb.embed_queries([q])[0] for q in QUERIES[:FOLD_AFTER_QUERIES]]
    assert emb.folded.wait(120), "the folded session was not built"
    assert emb._session.get_session_options().graph_optimization_level == \
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    folded = emb.embed_documents(QUERIES[:FOLD_AFTER_QUERIES])
    idx = [texts.index(q) for q in QUERIES[:FOLD_AFTER_QUERIES]]
    _assert_same(np.stack(lean), reference[idx])
    _assert_same(folded, reference[idx])


def test_exit_during_the_background_fold_is_clean(cache_dir: Path) -> None:
    """The process ends right after the query that starts the fold: onnxruntime
    aborted such a process (exit 134) while the fold thread was a daemon."""
    import subprocess
    import sys

    script = (
        "from kbstore.embed_minilm import FOLD_AFTER_QUERIES, MiniLMEmbedder\n"
        "e = MiniLMEmbedder(query_cache=False)\n"
        "for n in range(FOLD_AFTER_QUERIES):\n"
        "    e.embed_queries([f'query number {n}'])\n"
        "print('done', e._fold_started)\n")
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env={**os.environ, embed_cache.CACHE_DIR_ENV: str(cache_dir)},
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.strip() == "done True"

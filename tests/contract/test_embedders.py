"""Embedders: nomic's calls (with nomic.embed.text monkeypatched, as seed 000
suggests: no model, no network), its model folder from Settings, the
registry and its dimension checks, and the offline MiniLM."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kbstore import (
    EmbedderUnavailableError,
    FakeEmbedder,
    KBStoreError,
    KnowledgeStore,
    Settings,
    get_embedder,
)
from kbstore.embed_nomic import GGUF, MODEL_DIR_ENV, NomicEmbedder
from kbstore.embedders import embedder_from_fingerprint


@pytest.fixture
def nomic_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    from nomic import embed

    calls: list[dict] = []

    def fake_text(texts, **kwargs):
        calls.append({"texts": list(texts), **kwargs})
        rng = np.random.default_rng(len(calls))
        return {"embeddings": (rng.standard_normal((len(texts), kwargs["dimensionality"])) * 3
                               ).tolist()}

    monkeypatch.setattr(embed, "text", fake_text)
    return calls


def test_nomic_task_types_dimension_and_normalisation(nomic_calls: list[dict]) -> None:
    emb = NomicEmbedder(dim=256, inference_mode="local")
    docs = emb.embed_documents(["alpha", "beta"])
    query = emb.embed_queries(["what is alpha?"])
    assert [c["task_type"] for c in nomic_calls] == ["search_document", "search_query"]
    assert all(c["model"] == "nomic-embed-text-v1.5" and c["dimensionality"] == 256
               and c["inference_mode"] == "local" for c in nomic_calls)
    assert docs.shape == (2, 256) and query.shape == (1, 256)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert emb.fingerprint() == {"name": "nomic", "model": "nomic-embed-text-v1.5", "dim": 256,
                                 "document_prefix": "search_document",
                                 "query_prefix": "search_query"}


def test_nomic_model_dir_comes_from_settings_and_disables_downloads(
        nomic_calls: list[dict], tmp_path: Path, location: str,  # type: ignore[type-arg]
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / GGUF).write_bytes(b"gguf")
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path))
    assert Settings.from_env().nomic_model_dir == str(tmp_path)  # read there, once
    with KnowledgeStore.open(location, "nomic", hype=False, dim=64) as store:
        store.upsert("projects/a.md", title="A", body="offline")
    assert nomic_calls[0]["model_path"] == str(tmp_path)
    assert nomic_calls[0]["allow_download"] is False
    with KnowledgeStore.open(location, hype=False) as store:  # from the stored fingerprint
        # The fake's vectors are random: no floor (nomic's default would call
        # every query out of the knowledge base).
        assert store.search("offline", limit=1, min_similarity=None)[0].path == "projects/a.md"
    assert nomic_calls[-1]["task_type"] == "search_query"
    assert nomic_calls[-1]["model_path"] == str(tmp_path)
    # The class itself reads no environment: only Settings does.
    NomicEmbedder().embed_documents(["x"])
    assert "model_path" not in nomic_calls[-1]


def test_nomic_model_dir_without_the_file_is_a_clear_error(
        nomic_calls: list[dict], tmp_path: Path) -> None:  # type: ignore[type-arg]
    with pytest.raises(EmbedderUnavailableError, match=GGUF):
        NomicEmbedder(model_dir=str(tmp_path)).embed_documents(["x"])
    assert nomic_calls == []


def test_nomic_failure_names_the_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    from nomic import embed

    def offline(texts, **kwargs):
        raise ConnectionError("gpt4all.io unreachable")

    monkeypatch.setattr(embed, "text", offline)
    with pytest.raises(EmbedderUnavailableError) as info:
        NomicEmbedder().embed_queries(["x"])
    message = str(info.value)
    assert MODEL_DIR_ENV in message and "--embedder minilm" in message
    assert "ConnectionError" in message


def test_nomic_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="dimension"):
        NomicEmbedder(dim=300)
    with pytest.raises(ValueError, match="inference_mode"):
        NomicEmbedder(inference_mode="cloud")


@pytest.mark.parametrize("name, dim, needle", [
    ("minilm", 128, "minilm always makes 384"), ("fake", 0, "positive integer"),
    ("fake", -8, "positive integer"), ("fake", 12, "multiple of 8"), ("fake", 4104, "8..4096"),
    ("nomic", 300, "nomic dimension"), ("fake", True, "positive integer"),
    ("fake", 8.0, "positive integer"),
])
def test_the_registry_refuses_a_dimension_the_model_cannot_make(name: str, dim, needle: str
                                                                ) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KBStoreError, match=needle):
        get_embedder(name, dim=dim)


def test_the_registry_rebuilds_an_embedder_from_its_fingerprint() -> None:
    assert get_embedder("minilm", dim=384).dim == 384
    for embedder in (FakeEmbedder(48), NomicEmbedder(dim=256), get_embedder("minilm")):
        again = embedder_from_fingerprint(embedder.fingerprint())
        assert type(again) is type(embedder) and again.fingerprint() == embedder.fingerprint()
    with pytest.raises(KBStoreError, match="damaged"):
        embedder_from_fingerprint({"dim": 64})


def test_registry_and_fake_embedder_are_deterministic() -> None:
    assert isinstance(get_embedder("fake", dim=32), FakeEmbedder)
    with pytest.raises(KBStoreError, match="unknown embedder"):
        get_embedder("word2vec")
    a = FakeEmbedder(32).embed_documents(["deploying servers"])
    b = FakeEmbedder(32).embed_documents(["deploying servers"])
    assert np.array_equal(a, b)
    # shared (suffix-stripped) words make vectors close, no shared words much less so
    near = float(a[0] @ FakeEmbedder(32).embed_queries(["deploy server"])[0])
    far = float(a[0] @ FakeEmbedder(32).embed_queries(["quiet harbor"])[0])
    assert near == pytest.approx(1.0) and abs(far) < 0.8


@pytest.mark.integration
def test_minilm_batches_match_single_texts() -> None:
    """Padding per batch (not to the tokenizer's fixed 128) leaves vectors unchanged."""
    emb = get_embedder("minilm")
    texts = ["short text", "a somewhat longer sentence about sourdough starters " * 3,
             "sqlite full text search with fts5 and bm25 ranking"]
    batch = emb.embed_documents(texts)
    singles = np.stack([emb.embed_documents([t])[0] for t in texts])
    assert batch.shape == (3, 384)
    assert np.allclose(np.sum(batch * singles, axis=1), 1.0, atol=1e-3)
    assert float(batch[1] @ batch[2]) < 0.9  # different texts stay apart

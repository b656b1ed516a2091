"""nomic-embed-text-v1.5 through ``nomic.embed.text`` (the default embedder).

Task types matter: documents are embedded as ``search_document`` and queries
(and HyPE questions, which are queries too) as ``search_query``. Local mode
runs GPT4All's Embed4All; it downloads the .gguf on first use unless
``KBSTORE_NOMIC_MODEL_DIR`` names a directory that already holds it, in which
case downloads are disabled and nothing leaves the machine.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import EmbedderUnavailableError
from .settings import NOMIC_MODEL_DIR_ENV as MODEL_DIR_ENV
from .vectors import normalize

if TYPE_CHECKING:
    import numpy as np

MODEL = "nomic-embed-text-v1.5"
GGUF = "nomic-embed-text-v1.5.f16.gguf"
MATRYOSHKA_DIMS = (768, 512, 256, 128, 64)
INFERENCE_MODES = ("local", "remote", "dynamic")
MAX_TOKENS = 8192  # nomic-embed-text-v1.5's context window
# Confidence floor (default min_similarity of a new database). NOT measured
# here (the model cannot be downloaded on this machine): nomic's cosine
# similarities run higher than MiniLM's (unrelated texts ~0.3-0.4), so its
# floor sits above MiniLM's. Re-measure with benchmarks.agent_memory.
MIN_SIMILARITY = 0.4


class NomicEmbedder:
    name = "nomic"
    max_tokens = MAX_TOKENS
    min_similarity = MIN_SIMILARITY

    def __init__(self, dim: int = 768, inference_mode: str = "local",
                 model_dir: str | None = None) -> None:
        if dim not in MATRYOSHKA_DIMS:
            raise ValueError(f"nomic dimension must be one of {MATRYOSHKA_DIMS}, got {dim}")
        if inference_mode not in INFERENCE_MODES:
            raise ValueError(f"inference_mode must be one of {INFERENCE_MODES}")
        self.dim = dim
        self.inference_mode = inference_mode
        self.model_dir = model_dir  # Settings.nomic_model_dir (env KBSTORE_NOMIC_MODEL_DIR)
        self.calls = 0

    def fingerprint(self) -> dict[str, Any]:
        # inference_mode is not part of it: local and remote vectors are compatible.
        return {"name": self.name, "model": MODEL, "dim": self.dim,
                "document_prefix": "search_document", "query_prefix": "search_query"}

    def _local_kwargs(self) -> dict[str, Any]:
        model_dir = self.model_dir
        if self.inference_mode == "remote" or not model_dir:
            return {}
        if not os.path.isfile(os.path.join(model_dir, GGUF)):
            raise EmbedderUnavailableError(
                f"{MODEL_DIR_ENV}={model_dir} does not contain {GGUF}; put the file there "
                "or unset the variable")
        return {"model_path": model_dir, "allow_download": False}

    def _embed(self, texts: Sequence[str], task_type: str) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), np.float32)
        try:
            from nomic import embed  # type: ignore[import-untyped]
        except ImportError as exc:
            raise EmbedderUnavailableError(
                "the nomic embedder needs `pip install 'nomic[local]'`") from exc
        kwargs: dict[str, Any] = {}
        if self.inference_mode != "remote":
            kwargs = self._local_kwargs()
        try:
            output = embed.text(list(texts), model=MODEL, task_type=task_type,
                                dimensionality=self.dim, inference_mode=self.inference_mode,
                                **kwargs)
        except EmbedderUnavailableError:
            raise
        except Exception as exc:
            raise EmbedderUnavailableError(
                f"nomic-embed-text-v1.5 could not run ({type(exc).__name__}: {exc}). "
                f"Offline: download {GGUF} once and set {MODEL_DIR_ENV}=<its directory>; "
                "or use inference_mode='remote' with NOMIC_API_KEY; or the offline "
                "embedder shipped with kbstore: `--embedder minilm`") from exc
        self.calls += len(texts)
        return normalize(np.asarray(output["embeddings"], dtype=np.float32))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "search_document")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "search_query")

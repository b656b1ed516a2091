"""Embedders: one small interface and a deterministic fake for tests.

An embedder turns documents and queries into L2-normalised float32 vectors
and describes itself with a *fingerprint* (name, model, dimension, task
prefixes). The fingerprint is stored at ``kbstore init``; vectors made by a
different fingerprint are never mixed into the same table.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .model import embedding_text, fingerprint_id, same_model
from .vectors import normalize

__all__ = ["Embedder", "FakeEmbedder", "embedding_text", "fingerprint_id", "normalize",
           "same_model"]

if TYPE_CHECKING:  # numpy is imported lazily: searching needs no numpy at all
    import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """What kbstore needs from an embedding model.

    Two optional attributes (read with getattr, so embedders written before
    them keep working): ``max_tokens``, the model's input window -- longer
    documents also get chunk vectors (kbstore.chunks), so a fact past the
    window is still embedded; absent: no chunks. ``min_similarity``, the
    confidence floor a new database stores for this model (search's default
    ``min_similarity``); absent or None: no floor. The shipped embedders
    declare both.
    """

    name: str
    dim: int

    def fingerprint(self) -> dict[str, Any]: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


_WORD = re.compile(r"\w+", re.UNICODE)


class FakeEmbedder:
    """Deterministic bag-of-words hashing embedder for tests (no model).

    Each lower-cased word adds +-1 to a hashed coordinate, so texts sharing
    words are close and texts sharing none are near-orthogonal. Crude
    suffix stripping lets 'running' meet 'run'. ``calls`` counts texts embedded.
    Its window is small (``max_tokens``, 128 by default) so tests exercise
    chunking; like a real model it reads only the first ``max_tokens`` words.
    """

    name = "fake"

    def __init__(self, dim: int = 64, max_tokens: int = 128,
                 min_similarity: float | None = None) -> None:
        self.dim = dim
        self.max_tokens = max_tokens
        self.min_similarity = min_similarity  # no floor unless a test asks for one
        self.calls = 0

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "model": "hashing-bow", "dim": self.dim,
                "document_prefix": "", "query_prefix": ""}

    @staticmethod
    def _stem(word: str) -> str:
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                return word[: -len(suffix)]
        return word

    def _one(self, text: str) -> np.ndarray:
        import numpy as np

        vec = np.zeros(self.dim, dtype=np.float32)
        for word in _WORD.findall(text.lower())[:self.max_tokens]:
            digest = hashlib.blake2b(self._stem(word).encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dim
            vec[index] += 1.0 if digest[4] & 1 else -1.0
        if not vec.any():  # no words: a fixed direction rather than a zero vector
            vec[0] = 1.0
        return vec

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        self.calls += len(texts)
        return normalize(np.stack([self._one(t) for t in texts])) if texts else np.zeros(
            (0, self.dim), np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)

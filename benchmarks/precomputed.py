"""An Embedder that returns vectors decided in advance (latency benchmark).

The latency benchmark measures the search and write paths, not a model: each
document text and each HyPE question is assigned a vector up front, and this
embedder hands it back when kbstore asks. Imports nothing heavy, so a cold-start
subprocess can open a benchmark database without loading any model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported lazily: a cold-start search needs no numpy
    import numpy as np

NAME = "precomputed"
MODEL = "benchmark-clustered-random"


class PrecomputedEmbedder:
    """texts -> rows of ``vectors`` via ``index`` (text -> row). Without a
    table (``index`` None) it only carries the fingerprint: opening and
    searching with an explicit query vector never embeds."""

    name = NAME

    def __init__(self, dim: int, index: dict[str, int] | None = None,
                 vectors: np.ndarray | None = None) -> None:
        self.dim = dim
        self.index = index
        self.vectors = vectors
        self.calls = 0

    def fingerprint(self) -> dict[str, Any]:
        return {"name": NAME, "model": MODEL, "dim": self.dim,
                "document_prefix": "", "query_prefix": ""}

    def _lookup(self, texts: Sequence[str]) -> np.ndarray:
        if self.index is None or self.vectors is None:
            raise RuntimeError("this PrecomputedEmbedder has no vectors: nothing may be embedded")
        import numpy as np

        self.calls += len(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return self.vectors[[self.index[t] for t in texts]]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._lookup(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._lookup(texts)

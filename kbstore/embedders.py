"""Embedders by name: 'nomic' (the default), 'minilm' (offline, its weights
ship in a package) and 'fake' (tests). The model modules import their heavy
dependencies only when a model is first used."""

from __future__ import annotations

from typing import Any

from .embed import Embedder, FakeEmbedder
from .embed_minilm import MiniLMEmbedder
from .embed_nomic import MATRYOSHKA_DIMS, NomicEmbedder
from .errors import KBStoreError

EMBEDDER_NAMES = ("nomic", "minilm", "fake")
DEFAULT_EMBEDDER = "nomic"


def _dim(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise KBStoreError(f"--dim must be a positive integer, got {value!r}")
    return value


def get_embedder(name: str, **options: Any) -> Embedder:
    """Build an embedder by name. Options: ``dim`` (nomic: one of its
    Matryoshka sizes; fake: any multiple of 8), ``inference_mode`` and
    ``model_dir`` (nomic)."""
    dim = _dim(name, options.get("dim"))
    if name == "fake":
        dim = dim or 64
        if dim % 8 or not 8 <= dim <= 4096:
            raise KBStoreError(f"fake embedder dimension must be a multiple of 8 in 8..4096, "
                               f"got {dim}")
        return FakeEmbedder(dim=dim)
    if name == "minilm":
        if dim not in (None, MiniLMEmbedder.dim):
            raise KBStoreError(f"minilm always makes {MiniLMEmbedder.dim}-dimensional vectors; "
                               f"--dim {dim} cannot be used with it")
        return MiniLMEmbedder()
    if name == "nomic":
        if dim not in (None, *MATRYOSHKA_DIMS):
            raise KBStoreError(f"nomic dimension must be one of {MATRYOSHKA_DIMS}, got {dim}")
        return NomicEmbedder(dim=dim or 768,
                             inference_mode=options.get("inference_mode") or "local",
                             model_dir=options.get("model_dir"))
    raise KBStoreError(f"unknown embedder {name!r}; choose one of: {', '.join(EMBEDDER_NAMES)}")


def embedder_from_fingerprint(fingerprint: dict[str, Any], **options: Any) -> Embedder:
    """Rebuild the embedder a database was made with."""
    name = fingerprint.get("name")
    if not isinstance(name, str):
        raise KBStoreError(f"the stored embedder fingerprint is damaged: {fingerprint!r}")
    dim = fingerprint.get("dim")
    return get_embedder(name, **{**options, "dim": dim if name != "minilm" else None})

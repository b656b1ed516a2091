"""Pure-Python references for the fusion the search statement computes
(STYLE habit 7: fusion defined once in the backend's SQL, cross-checked here)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

RETRIEVERS = ("fm", "fts", "vec")
EXPLAIN_NAMES = {"fm": "frontmatter", "fts": "fts", "vec": "vector", "hype": "hype",
                 "hype_fts": "hype_fts", "date": "date"}
# Every ranked list of the statement and the setting that weighs it.
LIST_WEIGHTS = {"fm": "w_fm", "fts": "w_fts", "vec": "w_vec", "hype": "w_hype",
                "hype_fts": "w_hype_fts", "date": "w_date"}


def rrf_reference(rank_lists: dict[str, dict[int, int]], weights: dict[str, float],
                  k: float) -> dict[int, float]:
    """Weighted Reciprocal Rank Fusion: sum over retrievers of w / (k + rank)."""
    scores: dict[int, float] = {}
    for name, ranks in rank_lists.items():
        for doc, rank in ranks.items():
            scores[doc] = scores.get(doc, 0.0) + weights[name] / (k + rank)
    return scores


def vector_gap(similarities: Sequence[float], others: Sequence[float] = ()) -> float:
    """The vector list's standout: (s1 - s2) / (1 - s2), s1 its best
    similarity, s2 = max(0, the best of the rest of the list and of
    ``others``, other documents' best question similarities); 0 if s2 >= s1,
    with no s2 or s1 <= 0."""
    ranked = sorted(similarities, reverse=True)
    rest = ranked[1:2] + list(others)
    if not ranked or not rest or ranked[0] <= 0:
        return 0.0
    second = max(max(rest), 0.0)
    return max(ranked[0] - second, 0.0) / (1.0 - second) if second < 1 else 0.0


def vec_rank_weight(rank: int | None, gap: float, standout: float) -> float:
    """The factor on a vector-list hit's RRF weight: 1 + standout x gap at rank 1."""
    return 1.0 + standout * gap if rank == 1 else 1.0


def convex_reference(score_lists: dict[str, dict[int, float]],
                     weights: dict[str, float]) -> dict[int, float]:
    """Sum of w x min-max-normalised score (a single-valued list counts as 1)."""
    out: dict[int, float] = {}
    for name, scores in score_lists.items():
        if not scores:
            continue
        lo, hi = min(scores.values()), max(scores.values())
        for doc, s in scores.items():
            norm = (s - lo) / (hi - lo) if hi > lo else 1.0
            out[doc] = out.get(doc, 0.0) + weights[name] * norm
    return out


def boost_for(doc_type: str, params: dict[str, Any]) -> float:
    return {"skill": params["boost_skill"], "journal": params["boost_journal"]}.get(
        doc_type, params["boost_entry"])


def decay_for(doc_type: str, updated: str | None, now: str, half_life: float | None,
              recency_weight: float = 1.0) -> float:
    """Journal recency: 1 - recency_weight * (1 - 2^(-age / half_life)),
    bounded below by 1 - recency_weight (recency_weight 1: plain decay)."""
    if doc_type != "journal" or not updated or not half_life:
        return 1.0
    ref = dt.datetime.fromisoformat(now)
    when = dt.datetime.fromisoformat(updated)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    age = max((ref - when).total_seconds() / 86400, 0.0)
    return 1.0 - recency_weight * (1.0 - math.exp(-math.log(2) * age / half_life))

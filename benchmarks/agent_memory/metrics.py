"""Per-query metrics and their breakdowns (definitions: FORMAT.md).

Written out rather than delegated to trec_eval so that each query's value is
at hand for breakdowns by any field; tests check nDCG against pytrec_eval.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from typing import Any

AGE_BUCKETS = (("< 30 d", 0, 30), ("30-90 d", 30, 90), ("> 90 d", 90, None))
LATEST_TYPES = ("latest", "superseded")


def recall_at(ranked: Sequence[str], rels: dict[str, int], k: int) -> float:
    """Share of the relevant paths (grade >= 1) among the top k."""
    relevant = {p for p, g in rels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant & set(ranked[:k])) / len(relevant)


def ndcg_at(ranked: Sequence[str], rels: dict[str, int], k: int) -> float:
    """trec_eval's ndcg_cut: gain = grade, discount log2(rank + 1), ideal =
    the judged grades sorted descending."""
    dcg = sum(rels.get(p, 0) / math.log2(i + 2) for i, p in enumerate(ranked[:k]))
    ideal = sorted((g for g in rels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def reciprocal_rank(ranked: Sequence[str], rels: dict[str, int]) -> float:
    for i, p in enumerate(ranked):
        if rels.get(p, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def answer_paths(rels: dict[str, int]) -> list[str]:
    """The paths with the query's highest grade: the answer itself."""
    top = max(rels.values(), default=0)
    return sorted(p for p, g in rels.items() if g == top and g > 0)


def age_bucket(age_days: float) -> str:
    for name, lo, hi in AGE_BUCKETS:
        if age_days >= lo and (hi is None or age_days < hi):
            return name
    return AGE_BUCKETS[0][0]  # a document dated after `now` counts as new


def newest_relevant(rels: dict[str, int], dates: dict[str, dt.datetime | None]) -> str | None:
    """The entry a "latest" question wants at rank 1: the newest among the
    best-graded ones (an overview updated later but graded lower is not it)."""
    dated = [(rels[p], dates[p], p) for p in rels if rels[p] > 0 and dates.get(p) is not None]
    if not dated:
        return None
    best = max(grade for grade, _, _ in dated)
    return max((d, p) for grade, d, p in dated if grade == best)[1]


def score_query(ranked: Sequence[str], rels: dict[str, int]) -> dict[str, float]:
    return {"recall@5": recall_at(ranked, rels, 5), "recall@10": recall_at(ranked, rels, 10),
            "ndcg@10": ndcg_at(ranked, rels, 10), "mrr": reciprocal_rank(ranked, rels)}


def mean(values: Iterable[float]) -> float | None:
    vals = list(values)
    return sum(vals) / len(vals) if vals else None


def summarize(per_query: dict[str, dict[str, float]], qids: Iterable[str]) -> dict[str, Any]:
    ids = [q for q in qids if q in per_query]
    out: dict[str, Any] = {"n": len(ids)}
    for metric in ("recall@5", "recall@10", "ndcg@10", "mrr"):
        out[metric] = mean(per_query[q][metric] for q in ids)
    return out


def by_field(queries: Sequence[dict[str, Any]], per_query: dict[str, dict[str, float]],
             field: str) -> dict[str, dict[str, Any]]:
    """Summary per value of a query field, over answerable queries that have it."""
    groups: dict[str, list[str]] = {}
    for q in queries:
        if q["id"] in per_query and q.get(field) not in (None, ""):
            groups.setdefault(str(q[field]), []).append(q["id"])
    return {value: summarize(per_query, ids) for value, ids in sorted(groups.items())}


def by_age(queries: Sequence[dict[str, Any]], ranked: dict[str, list[str]],
           qrels: dict[str, dict[str, int]], dates: dict[str, dict[str, dt.datetime | None]],
           now: dict[str, dt.datetime | None], k: int = 5) -> dict[str, dict[str, Any]]:
    """recall@k over (query, answer path) pairs, bucketed by the answer's age at `now`.
    ``dates`` is kb -> path -> updated."""
    counts = {name: [0, 0] for name, _, _ in AGE_BUCKETS}
    for q in queries:
        rels = qrels.get(q["id"])
        when = now.get(q["id"])
        if not rels or when is None:
            continue
        top = set(ranked.get(q["id"], [])[:k])
        for path in answer_paths(rels):
            updated = dates[q["kb"]].get(path)
            if updated is None:
                continue
            bucket = age_bucket((when - updated).total_seconds() / 86400)
            counts[bucket][0] += 1
            counts[bucket][1] += path in top
    return {name: {"pairs": n, f"recall@{k}": (hit / n if n else None)}
            for name, (n, hit) in counts.items()}


def latest_accuracy(queries: Sequence[dict[str, Any]], ranked: dict[str, list[str]],
                    qrels: dict[str, dict[str, int]],
                    dates: dict[str, dict[str, dt.datetime | None]],
                    types: Sequence[str] = LATEST_TYPES) -> dict[str, dict[str, Any]]:
    """Per type: share of queries whose rank 1 is the newest relevant document."""
    out: dict[str, dict[str, Any]] = {}
    for kind in types:
        hits = n = 0
        for q in queries:
            if q["type"] != kind or not qrels.get(q["id"]):
                continue
            newest = newest_relevant(qrels[q["id"]], dates[q["kb"]])
            if newest is None:
                continue
            n += 1
            top = ranked.get(q["id"], [])
            hits += bool(top) and top[0] == newest
        if n:
            out[kind] = {"n": n, "correct": hits, "accuracy": hits / n}
    return out


def newest_five_share(queries: Sequence[dict[str, Any]], ranked: dict[str, list[str]],
                      newest: dict[str, list[str]]) -> dict[str, Any]:
    """How many answerable queries get exactly the kb's five newest documents
    (at their `now`) as their top 5, in any order. ``newest``: qid -> paths."""
    n = same = 0
    for q in queries:
        five = newest.get(q["id"], [])[:5]
        if len(five) < 5:
            continue
        n += 1
        same += set(ranked.get(q["id"], [])[:5]) == set(five)
    return {"n": n, "count": same, "share": same / n if n else None}

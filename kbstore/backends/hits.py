"""Rows of the search statement -> Hits, for every backend.

Both statements return the same columns (the SQLite one is mirrored on
PostgreSQL); only the driver's types differ (PostgreSQL gives numerics as
Decimal and tags as a list, SQLite floats and a JSON text).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..model import Hit, SearchRequest
from ..query import make_snippet


def to_hits(rows: Iterable[dict[str, Any]], request: SearchRequest) -> list[Hit]:
    return [Hit(path=row["path"], title=row["title"], tags=_tags(row["tags"]),
                doc_type=row["doc_type"], topic=row["topic"], updated=row["updated"],
                score=float(row["score"]), snippet=snippet(row, request.terms),
                explain=explain_row(row) if request.explain else None)
            for row in rows]


def _tags(value: Any) -> list[str]:
    return json.loads(value) if isinstance(value, str) else list(value)


def _num(value: Any) -> Any:
    return None if value is None else value if isinstance(value, int) else float(value)


def snippet(row: dict[str, Any], terms: tuple[str, ...]) -> str:
    """Around the first query term; inside the best-matching chunk when a
    chunk vector is what found the document."""
    body = row["body"]
    start, end = row["chunk_start"], row["chunk_end"]
    if start is not None and end is not None and 0 <= start < end <= len(body):
        piece = make_snippet(body[start:end], terms)
        return ("…" if start > 0 and not piece.startswith("…") else "") + piece
    return make_snippet(body, terms)


def explain_row(row: dict[str, Any]) -> dict[str, Any]:
    """Every factor that made a hit's score."""
    return {
        "ranks": {"frontmatter": row["fm_rank"], "fts": row["fts_rank"], "vector": row["vec_rank"],
                  "hype": row["hype_rank"], "hype_fts": row["hype_fts_rank"],
                  "date": row["date_rank"]},
        # tag match: share of the query's words the tags cover; title-only: w_fm_title
        "frontmatter_weight": _num(row["fm_weight"]),
        # question_cosine: mean of the document's hype_top best questions
        "raw": {"bm25": _num(row["fts_score"]), "cosine": _num(row["vec_score"]),
                "question_cosine": _num(row["hype_score"])},
        "similarity": _num(row["similarity"]),  # best vector of any kind (the floor's input)
        "rrf": {"frontmatter": _num(row["rrf_fm"]), "fts": _num(row["rrf_fts"]),
                "vector": _num(row["rrf_vec"]), "hype": _num(row["rrf_hype"]),
                "hype_fts": _num(row["rrf_hype_fts"]), "date": _num(row["rrf_date"])},
        "convex": _num(row["convex"]),
        # the text lists' (fts, fm) query-adaptive weight: text-vector agreement
        "text_weight": _num(row["text_weight"]),
        # the vector rank 1's relative cosine gap to rank 2 (its RRF term x
        # 1 + vec_standout x this gap)
        "vector_gap": _num(row["vec_gap"]),
        "relevance": _num(row["relevance"]),
        "boost": _num(row["boost"]),
        "recency": _num(row["recency"]),
        "decay": _num(row["recency"]),  # the recency factor's former name
        "latest_rank": row["latest_rank"],  # set when a "latest" question reordered the hit
        "matched_vector": row["matched_kind"] if row["vec_rank"] is not None else None,
        "matched_chunk": ([row["chunk_start"], row["chunk_end"]]
                          if row["chunk_start"] is not None else None),
        "matched_question": row["matched_question"],
    }

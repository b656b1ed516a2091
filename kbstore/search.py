"""Turning a user's query into the parameters of ``sql/search.sql``, running
it, and shaping the rows into hits. Query text is data: it is tokenised in
Python and every term is quoted, so FTS5 syntax in a query is just words."""

from __future__ import annotations

import datetime as dt
import json
import re
from array import array
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import EmptyQueryError

if TYPE_CHECKING:
    import numpy as np

# Words as unicode61 sees them: letters and digits; '_' and punctuation split.
_TERM = re.compile(r"[^\W_]+", re.UNICODE)
MAX_QUERY_TERMS = 64  # a 100 KB query must not become a 100 KB MATCH
# Very common English words: they match almost every document (BM25 gives them
# ~0 weight) but make an OR query visit every posting list. Dropped from the
# FTS query only; the vector side sees the whole query.
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other ought our ours
ourselves out over own same she should so some such than that the their theirs them themselves
then there these they this those through to too under until up very was we were what when
where which while who whom why will with would you your yours yourself yourselves often
""".split())

# Fusion defaults come from benchmarks/results/quality.md: chosen on Cranfield,
# confirmed on SciFact and CISI. The seed's k=60 with the frontmatter retriever
# at full weight scored BELOW the best single retriever on all three (title
# overlap is a weak, BM25-correlated signal; at k=60 a stray rank-1 counts as
# much as a real one). k=20 and w_fm=0.25: +0.034 / +0.041 / +0.019 nDCG@10
# over the best single retriever (SciFact / Cranfield / CISI). Those
# collections have no tags: w_fm_title (0.25) is what was measured; an exact
# tag match, curated metadata, keeps the frontmatter weight w_fm (1.0).
DEFAULTS: dict[str, Any] = {
    "fusion": "rrf", "k_rrf": 20.0, "w_fm": 1.0, "w_fm_title": 0.25, "w_fts": 1.0,
    "w_vec": 1.0,
    "w_title": 2.0, "w_tags": 1.5, "w_body": 1.0,
    "boost_skill": 1.2, "boost_journal": 0.8, "boost_entry": 1.0, "half_life_days": 30.0,
    "fm_limit": 100, "fts_limit": 100, "vec_limit": 100,
    # KNN candidates per vec0 partition before exact rescoring; None = auto,
    # max(VEC_K_AUTO[kind], 4 x limit). vec0's KNN cost grows with k x rows.
    # Documents: sign bits of real MiniLM vectors need 256 (recall@10 against
    # exact search on SciFact: 0.92 at 64, 0.97 at 128, 0.99 at 256).
    # Questions: 128. There are ~6 per document, so the HyPE partition is 6x
    # larger (221 of 326 ms per query at 100k docs with 256) while a document
    # needs only one of its questions among the candidates; recall@10 at 128
    # is 1.000 on the latency benchmark's clustered vectors (real questions
    # need an LLM: not measured here).
    "vec_k_doc": None, "vec_k_hype": None,
    "min_similarity": None, "drop_stopwords": True,
}
FUSIONS = ("rrf", "convex")
VEC_K_MAX = 4096  # sqlite-vec's cap on k
VEC_K_AUTO = {"vec_k_doc": 256, "vec_k_hype": 128}


@lru_cache(maxsize=1)
def search_sql() -> str:
    # A plain path, not importlib.resources (which imports tempfile/shutil at start-up).
    return (Path(__file__).parent / "sql" / "search.sql").read_text(encoding="utf-8")


def query_terms(query: str) -> list[str]:
    """Lower-cased terms in order, repeats kept (they weigh in BM25)."""
    return _TERM.findall(query.lower())[:MAX_QUERY_TERMS]


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def fts_expression(terms: list[str], drop_stopwords: bool = True) -> str | None:
    """An OR of quoted terms: any term matches, BM25 ranks. None if empty."""
    kept = [t for t in terms if not (drop_stopwords and t in STOPWORDS)] or terms
    return " OR ".join(_quote(t) for t in kept) or None


TITLE_TERMS = 12


def title_expression(terms: list[str]) -> str | None:
    """Titles sharing at least two distinct query words (one for a one-word
    query): a single common word in a title is noise, yet RRF would give it
    the same rank-1 credit as a real match. Written as an OR of pairs."""
    kept = [t for t in dict.fromkeys(terms) if t not in STOPWORDS][:TITLE_TERMS]
    if len(kept) <= 1:
        return _quote(kept[0]) if kept else None
    pairs = [f"({_quote(a)} AND {_quote(b)})" for i, a in enumerate(kept) for b in kept[i + 1:]]
    return " OR ".join(pairs)


def tag_candidates(query: str, terms: list[str]) -> list[str]:
    """Strings that count as an exact tag match: each term, adjacent pairs
    joined by '-' and ' ' (multi-word tags), and the whole query."""
    out = list(dict.fromkeys(terms))
    for a, b in zip(terms, terms[1:], strict=False):
        out += [f"{a}-{b}", f"{a} {b}"]
    whole = " ".join(query.lower().split())
    if whole:
        out.append(whole)
    return list(dict.fromkeys(out))


def build_params(query: str, query_vector: np.ndarray | bytes | list[float] | None, *,
                 topic: str | None,
                 limit: int, now: str | None = None, **overrides: Any) -> dict[str, Any]:
    # A query of only NUL bytes is as blank as one of only spaces.
    if not isinstance(query, str) or not query.replace("\x00", " ").strip():
        raise EmptyQueryError("search query is empty; pass some words to search for")
    unknown = set(overrides) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown search parameter(s): {', '.join(sorted(unknown))}")
    settings = {**DEFAULTS, **{k: v for k, v in overrides.items() if v is not None}}
    if settings["fusion"] not in FUSIONS:
        raise ValueError(f"fusion must be one of {FUSIONS}, got {settings['fusion']!r}")
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    query = query.replace("\x00", " ")
    terms = query_terms(query)
    params = {k: v for k, v in settings.items() if k != "drop_stopwords"}
    for key in ("vec_k_doc", "vec_k_hype"):
        wanted = params[key] if params[key] is not None else max(VEC_K_AUTO[key], 4 * limit)
        params[key] = max(1, min(int(wanted), VEC_K_MAX))
    params.update(
        fts_query=fts_expression(terms, settings["drop_stopwords"]),
        title_query=title_expression(terms),
        tag_terms=json.dumps(tag_candidates(query, terms)),
        qvec=None if query_vector is None else vector_blob(query_vector),
        topic=topic,
        now=now or dt.datetime.now(dt.timezone.utc).isoformat(),
        limit=limit,
    )
    return params


def vector_blob(vector: Any) -> bytes:
    """float32 bytes for sqlite-vec from bytes, a list of floats or a numpy
    array (numpy is not imported unless the caller already uses it)."""
    if isinstance(vector, (bytes, bytearray, memoryview)):
        return bytes(vector)
    if isinstance(vector, (list, tuple)):
        return array("f", vector).tobytes()
    import numpy as np

    return np.asarray(vector, dtype=np.float32).tobytes()


@dataclass
class Hit:
    path: str
    title: str
    tags: list[str]
    doc_type: str
    topic: str
    updated: str | None
    score: float
    snippet: str
    explain: dict[str, Any] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["explain"] is None:
            del data["explain"]
        return data


def make_snippet(body: str, terms: list[str], width: int = 200) -> str:
    """About ``width`` characters of ``body`` around the first query term."""
    text = " ".join(body.split())
    lower = text.lower()
    positions = [p for p in (lower.find(t) for t in terms if t not in STOPWORDS) if p >= 0]
    start = max(0, min(positions) - width // 4) if positions else 0
    piece = text[start:start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


def explain_row(row: dict[str, Any]) -> dict[str, Any]:
    """Every factor that made a hit's score."""
    return {
        "ranks": {"frontmatter": row["fm_rank"], "fts": row["fts_rank"], "vector": row["vec_rank"]},
        "frontmatter_weight": row["fm_weight"],  # 1.0 tag match, w_fm_title title-only
        "raw": {"bm25": row["fts_score"], "cosine": row["vec_score"]},
        "rrf": {"frontmatter": row["rrf_fm"], "fts": row["rrf_fts"], "vector": row["rrf_vec"]},
        "convex": row["convex"],
        "boost": row["boost"],
        "decay": row["decay"],
        "matched_vector": row["matched_kind"] if row["vec_rank"] is not None else None,
        "matched_question": row["matched_question"],
    }

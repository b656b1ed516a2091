"""Query analysis: a user's query and search settings turned into a
backend-neutral :class:`~kbstore.model.SearchRequest`.

Query text is data: it is split into words here, and each backend quotes
every word for its own full-text syntax, so FTS operators in a query are
just words. Every setting is validated here, once, for every backend.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from .errors import EmptyQueryError, InvalidQueryError
from .model import SearchRequest
from .query_dates import LATEST_CUE_WORDS, date_ranges, relative_words, wants_latest

# Words as unicode61 sees them: letters and digits; '_' and punctuation split.
_TERM = re.compile(r"[^\W_]+", re.UNICODE)
MAX_QUERY_TERMS = 64  # a 100 KB query must not become a 100 KB MATCH
TITLE_TERMS = 12
MAX_LIMIT = 1000
# Very common English words: they match almost every document (BM25 gives them
# ~0 weight) but make an OR query visit every posting list. Dropped from the
# full-text query only; the vector side sees the whole query.
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
    "w_vec": 1.0, "w_hype": 1.0, "w_hype_fts": 1.5, "w_date": 1.5,
    # HyPE: a document's question-vector score is the mean of its hype_top best
    # questions (chosen on Cranfield, see benchmarks/results/quality.md).
    "hype_top": 3,
    "w_title": 2.0, "w_tags": 1.5, "w_body": 1.0,
    # Type factors: measured on the dev split of benchmarks/agent_memory/
    # picobot_kb (nDCG@10 0.823 at 1.0/1.0, 0.821 at 1.02/0.98, 0.796 at the
    # seed's 1.2/0.8, which let a skill ranked 2nd in both lists beat the
    # entry ranked 1st in both): off by default, still settable.
    "boost_skill": 1.0, "boost_journal": 1.0, "boost_entry": 1.0,
    # Recency (journal entries): a bounded factor 1 - recency_weight * (1 -
    # 2^(-age / half_life_days)); half_life_days None or 0: off.
    "half_life_days": 30.0, "recency_weight": 0.05,
    # "Latest" questions: of the latest_top best hits, those within
    # latest_ratio of the best score come newest first (chosen on the dev
    # split of benchmarks/agent_memory/sessions: the top 5 only keeps the
    # evidence's recall@5 when every session scores alike). latest None:
    # detected from the query; True/False: forced.
    # latest_topical: an eligible entry must also score at least that share
    # of the best BM25 of the question's topical words (its full-text words
    # without the cue words, LATEST_CUE_WORDS; a name most entries hold
    # weighs ~0), so a newer entry that only mentions the person is not
    # eligible; 0: off. latest_top 8 with latest_topical 0.4 chosen on the
    # dev split of benchmarks/agent_memory/sessions (latest + superseded at
    # rank 1: 15 -> 17 of 34; 0.3 gave 18 but cost picobot_kb's test split
    # 2 of 5 latest questions; latest_top 5 with the filter: 14-15).
    # An entry below the confidence floor (min_similarity; kept there only for
    # its words) is eligible only if its topical BM25 is the best: its date
    # must not lift a hit that the vectors call unrelated and stray words
    # keep (a kitchen entry at cosine 0.20, topical 0.60 via "home" and "go",
    # led picobot_kb's "when did the power last go out"); the best words on
    # the topic still count (sessions: the one entry saying "manager", at
    # cosine 0.24). No new setting. Dev splits: rank 1 unchanged (sessions
    # 17/34, picobot_kb 6/11), nDCG@10 sessions 0.764 = 0.764, picobot_kb
    # 0.847 -> 0.853; test: picobot_kb latest@1 4/5 -> 5/5, nDCG@10 0.840 ->
    # 0.846, sessions 0.803 -> 0.804 (recall@5 0.842 -> 0.841: a relevant
    # entry at cosine 0.24, topical 0.73, no longer promoted). Without the
    # best-words exception: sessions dev nDCG@10 0.762 (superseded -0.02).
    # Rules measured and not taken, and what the remaining misses are:
    # benchmarks/results/latest_misses.md.
    "latest": None, "latest_ratio": 0.6, "latest_top": 8, "latest_topical": 0.4,
    "fm_limit": 100, "fts_limit": 100, "vec_limit": 100, "date_limit": 100,
    # KNN candidates per vector kind before exact rescoring; None = auto,
    # max(VEC_K_AUTO[kind], 4 x limit). Documents: sign bits of real MiniLM
    # vectors need 256 (recall@10 against exact search on SciFact: 0.92 at
    # 64, 0.97 at 128, 0.99 at 256). Questions: 128 (~6 per document, so the
    # HyPE partition is 6x larger while a document needs only one of its
    # questions among the candidates). Chunks: like documents.
    "vec_k_doc": None, "vec_k_hype": None, "vec_k_chunk": None,
    # Vector plan per kind (SQLite, see search.sql): 'auto' = exact cosine over
    # the float vectors while a kind holds at most exact_ratio x its k vectors,
    # else the sign-bit KNN; 'exact' / 'bits' force one (benchmarks/speed.py).
    "vec_plan": "auto", "exact_ratio": 8,
    "min_similarity": None, "drop_stopwords": True,
    # Text-vector agreement (search.sql text_agreement): the text lists weigh
    # min(1, agreement / agreement_ratio)^2 (at least the top full-text
    # hit's standout), agreement = mean similarity of the agreement_top best
    # full-text hits / the best vector similarity. Chosen on the dev split of
    # benchmarks/agent_memory/picobot_kb (paraphrase queries, whose text hits
    # share only stray words); never below 0.7 on the test collections, so
    # it changes none of them at 0.6. 0: off.
    "agreement_ratio": 0.6, "agreement_top": 3,
    # The vector list's rank 1 weighs 1 + vec_standout x its gap to the best
    # similarity s2 of any other document, (s1 - s2) / (1 - s2) (search.sql
    # vec_gap): a paraphrase found by its vector alone, far above the next,
    # is not outvoted by hits ranked ~2nd in both lists on stray words.
    # Chosen on the dev splits of benchmarks/agent_memory (nDCG@10 at 0 / 3 /
    # 4 / 5: longdocs 0.886 / 0.910 / 0.910 / 0.902, sessions 0.765 / 0.770 /
    # 0.764 / 0.761 (latest@1 15 / 16 / 15 / 14 of 19), picobot_kb 0.845 /
    # 0.848 / 0.847 / 0.847) and Cranfield (0.424 / 0.425 / 0.426 / 0.426);
    # 4: the smallest that ranks the MiniLM paraphrase of
    # tests/contract/test_integration_minilm.py first (3: second). See
    # benchmarks/results/quality_standout_check.md. 0: off.
    "vec_standout": 4.0,
}
# Values the first release stored in every database's 'fusion' defaults for
# settings whose meaning or default has changed since (recency became a
# bounded factor; type boosts were re-measured; the confidence floor is on
# by default). A stored value equal to one of these was never chosen by
# anyone, so today's default applies to that database too.
# latest_top 5: every database made before the topical test (latest_topical)
# stored it; with the test the pool is 8.
LEGACY_DEFAULTS: dict[str, Any] = {"boost_skill": 1.2, "boost_journal": 0.8,
                                   "half_life_days": 30.0, "min_similarity": None,
                                   "latest_top": 5}
FUSIONS = ("rrf", "convex")
VEC_PLANS = ("auto", "exact", "bits")
VEC_K_MAX = 4096  # sqlite-vec's cap on k
VEC_K_AUTO = {"vec_k_doc": 256, "vec_k_hype": 128, "vec_k_chunk": 256}
VEC_K_KEYS = tuple(VEC_K_AUTO)
# Settings for which None is a value (off / automatic), not "use the default".
NULLABLE = frozenset({"half_life_days", "min_similarity", "latest", *VEC_K_KEYS})
_POSITIVE = ("k_rrf", "boost_skill", "boost_journal", "boost_entry")
_WEIGHTS = ("w_fm", "w_fm_title", "w_fts", "w_vec", "w_hype", "w_hype_fts", "w_date",
            "w_title", "w_tags", "w_body", "vec_standout")
_SHARES = ("recency_weight", "latest_ratio", "latest_topical", "agreement_ratio")  # numbers in 0..1
_COUNTS = ("fm_limit", "fts_limit", "vec_limit", "date_limit", "latest_top", "agreement_top")
_SMALL_COUNTS = {"hype_top": 31}  # at most the questions a document can have


def query_terms(query: str) -> list[str]:
    """Lower-cased terms in order, repeats kept (they weigh in BM25)."""
    return _TERM.findall(query.lower())[:MAX_QUERY_TERMS]


def fts_terms(terms: list[str], drop_stopwords: bool = True) -> list[str]:
    """Terms for the full-text OR query; all of them if every one is a stopword."""
    return [t for t in terms if not (drop_stopwords and t in STOPWORDS)] or terms


def title_terms(terms: list[str]) -> list[str]:
    return [t for t in dict.fromkeys(terms) if t not in STOPWORDS][:TITLE_TERMS]


def tag_candidates(query: str, terms: list[str]) -> list[str]:
    """Strings that count as an exact tag match: each term, adjacent pairs
    joined by '-' and ' ' (multi-word tags), and the whole query."""
    return list(tag_weights(query, terms))


def tag_weights(query: str, terms: list[str]) -> dict[str, float]:
    """Each tag candidate with the share of the query's content words it
    covers: a tag equal to the whole query weighs 1, a tag matching one of
    eight content words 1/8 -- so a tag that happens to be a common word of
    a long question ("running") cannot outvote the text and vectors.
    Stopwords alone are no tag match."""
    content = [t for t in dict.fromkeys(terms) if t not in STOPWORDS and len(t) > 1]
    n = max(1, len(content))
    out: dict[str, float] = {}

    def put(candidate: str, words: list[str]) -> None:
        share = min(1.0, sum(1 for w in set(words) if w in content) / n)
        if share > 0:
            out[candidate] = max(out.get(candidate, 0.0), share)

    for t in dict.fromkeys(terms):
        put(t, [t])
    for a, b in zip(terms, terms[1:], strict=False):
        put(f"{a}-{b}", [a, b])
        put(f"{a} {b}", [a, b])
    whole = " ".join(query.lower().split())
    if whole:
        out[whole] = 1.0
    return out


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidQueryError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidQueryError(f"{name} must be finite, got {value!r}")
    return number


def _count(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidQueryError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return value


def validate_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Check every fusion setting; returns them with numbers as floats/ints.
    ``half_life_days`` None or 0 turns recency decay off."""
    out = dict(settings)
    if out["fusion"] not in FUSIONS:
        raise InvalidQueryError(f"fusion must be one of {FUSIONS}, got {out['fusion']!r}")
    for name in _POSITIVE:
        out[name] = _number(name, out[name])
        if out[name] <= 0:
            raise InvalidQueryError(f"{name} must be > 0, got {out[name]}")
    for name in _WEIGHTS:
        out[name] = _number(name, out[name])
        if out[name] < 0:
            raise InvalidQueryError(f"{name} must be >= 0, got {out[name]}")
    for name in _SHARES:
        out[name] = _number(name, out[name])
        if not 0.0 <= out[name] <= 1.0:
            raise InvalidQueryError(f"{name} must be in 0..1, got {out[name]}")
    for name in _COUNTS:
        out[name] = _count(name, out[name], 1, MAX_LIMIT)
    for name, high in _SMALL_COUNTS.items():
        out[name] = _count(name, out[name], 1, high)
    if out["latest"] is not None and not isinstance(out["latest"], bool):
        raise InvalidQueryError("latest must be True, False or None (detect from the query)")
    half_life = out["half_life_days"]
    if half_life is not None:
        half_life = _number("half_life_days", half_life)
        if half_life < 0:
            raise InvalidQueryError("half_life_days must be >= 0 (0 or None: no decay)")
        out["half_life_days"] = half_life or None
    if out["min_similarity"] is not None:
        out["min_similarity"] = _number("min_similarity", out["min_similarity"])
        if not -1.0 <= out["min_similarity"] <= 1.0:
            raise InvalidQueryError("min_similarity is a cosine similarity in -1..1")
    for name in VEC_K_KEYS:  # 0: that kind of vector is not searched
        if out[name] is not None:
            out[name] = _count(name, out[name], 0, VEC_K_MAX)
    if out["vec_plan"] not in VEC_PLANS:
        raise InvalidQueryError(f"vec_plan must be one of {VEC_PLANS}, got {out['vec_plan']!r}")
    out["exact_ratio"] = _count("exact_ratio", out["exact_ratio"], 0, 1000)
    if not isinstance(out["drop_stopwords"], bool):
        raise InvalidQueryError("drop_stopwords must be True or False")
    return out


def embedder_defaults(embedder: Any) -> dict[str, Any]:
    """Defaults that depend on the embedder: its confidence floor (cosine
    similarities of unrelated texts differ by model; see each embedder's
    ``min_similarity``)."""
    return {"min_similarity": getattr(embedder, "min_similarity", None)}


def new_database_defaults(embedder: Any) -> dict[str, Any]:
    """What a new database stores as its fusion defaults (meta 'fusion')."""
    return {**DEFAULTS, **embedder_defaults(embedder)}


def stored_defaults(stored: Mapping[str, Any] | None, embedder: Any) -> dict[str, Any]:
    """A database's defaults: the embedder's, then what the file stores
    (except untouched values of settings that changed since, see
    LEGACY_DEFAULTS). Unknown keys are ignored."""
    out = embedder_defaults(embedder) if embedder is not None else {}
    for key, value in (stored or {}).items():
        if key not in DEFAULTS:
            continue
        if key in LEGACY_DEFAULTS and value == LEGACY_DEFAULTS[key]:
            continue
        out[key] = value
    return out


def resolve_settings(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Code defaults < the database's stored defaults < the call's overrides.
    An override of None means "not given", except for the NULLABLE keys."""
    unknown = set(overrides) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown search parameter(s): {', '.join(sorted(unknown))}")
    given = {k: v for k, v in overrides.items() if v is not None or k in NULLABLE}
    stored = {k: v for k, v in defaults.items() if k in DEFAULTS}
    return validate_settings({**DEFAULTS, **stored, **given})


def parse_now(now: Any) -> str:
    """The instant recency is measured at, as ISO 8601 (UTC if naive)."""
    if now is None:
        return dt.datetime.now(dt.timezone.utc).isoformat()
    if isinstance(now, dt.datetime):
        moment = now
    elif isinstance(now, dt.date):
        moment = dt.datetime(now.year, now.month, now.day)
    elif isinstance(now, str):
        try:
            moment = dt.datetime.fromisoformat(now.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidQueryError(f"now must be an ISO 8601 date or time, got {now!r}") from None
    else:
        raise InvalidQueryError(f"now must be an ISO 8601 date or time, got {now!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.isoformat()


def is_blank(query: str) -> bool:
    """No letter, digit or symbol: only spaces, punctuation ("???", "..."), lone combining marks
    and control or format characters. Such a query gives no word to
    any text retriever and means nothing to an embedder: it is empty."""
    return not any(unicodedata.category(ch)[0] in "LNS" or unicodedata.category(ch) in (
        "Co", "Cs", "Cn") for ch in query if not ch.isspace())


def analyse(query: Any, vector: bytes | None, *, topic: Any = None, limit: Any = 10,
            now: Any = None, settings: Mapping[str, Any], explain: bool = False
            ) -> SearchRequest:
    """A validated request. ``settings`` are already resolved (see
    :func:`resolve_settings`); ``vector`` is float32 bytes or None."""
    if not isinstance(query, str) or is_blank(query):
        raise EmptyQueryError("search query is empty; pass some words to search for")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidQueryError(f"limit must be an integer in 1..{MAX_LIMIT}, got {limit!r}")
    if topic is not None and (not isinstance(topic, str) or not topic.strip()):
        raise InvalidQueryError(f"topic must be a topic name or None, got {topic!r}")
    text = query.replace("\x00", " ")
    terms = query_terms(text)
    moment = parse_now(now)
    today = dt.datetime.fromisoformat(moment).date()
    # Words that only say when ("yesterday", "last week") match documents by
    # date (the date list), not by text; explicit months and years stay.
    when = relative_words(text, today)
    text_terms = [t for t in terms if t not in when] or terms
    weights = tag_weights(text, text_terms)
    latest = settings["latest"] if settings["latest"] is not None else wants_latest(text)
    search_terms = fts_terms(text_terms, settings["drop_stopwords"])
    topical = (tuple(t for t in search_terms if t not in LATEST_CUE_WORDS)
               if latest and settings["latest_topical"] > 0 else ())
    return SearchRequest(
        text=text, terms=tuple(terms),
        fts_terms=tuple(search_terms), topical_terms=topical,
        title_terms=tuple(title_terms(text_terms)), tag_terms=tuple(weights),
        vector=vector, topic=topic, limit=limit, now=moment, settings=settings,
        explain=explain, tag_weights=weights,
        date_ranges=tuple(date_ranges(text, today)), latest=bool(latest))


def vec_k(settings: Mapping[str, Any], key: str, limit: int) -> int:
    """KNN candidates for one vector kind (auto: max(default, 4 x limit); 0: none)."""
    wanted = settings[key] if settings[key] is not None else max(VEC_K_AUTO[key], 4 * limit)
    return max(0, min(int(wanted), VEC_K_MAX))


def make_snippet(body: str, terms: tuple[str, ...] | list[str], width: int = 200) -> str:
    """About ``width`` characters of ``body`` around the first query term."""
    text = " ".join(body.split())
    lower = text.lower()
    positions = [p for p in (lower.find(t) for t in terms if t not in STOPWORDS) if p >= 0]
    start = max(0, min(positions) - width // 4) if positions else 0
    piece = text[start:start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")

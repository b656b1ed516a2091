"""The PostgreSQL side of the search pipeline: a neutral SearchRequest
compiled into the parameters of ``search.sql``.

``search.sql`` is written with psql variables (``:'name'``) so it runs in
psql as it stands; here each becomes a named bind parameter. Every value is
passed as text, exactly the strings psql would substitute, so the statement
ranks the same from both. The request's word lists go in as JSON arrays;
the statement stems them with the documents' own text search configuration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...model import Hit, SearchRequest, fts_fold
from ...query import VEC_K_KEYS, analyse, resolve_settings, vec_k
from ..hits import to_hits

SQL_DIR = Path(__file__).resolve().parent
_PSQL_VAR = re.compile(r":'([a-z_]+)'")
# Session settings for the statement. relaxed_order lets a filtered HNSW
# scan continue past ef_search until LIMIT rows pass the filter (the
# statement re-sorts the candidates itself); ef_search 100: see DESIGN.md.
# The statement is best run as a server-side prepared statement (parsing its
# ~12 KB costs more than planning) but always with a custom plan: a generic
# plan cannot fold the "parameter is empty" tests and ran ~10x slower.
HNSW_SETTINGS = {"hnsw.ef_search": "100", "hnsw.iterative_scan": "relaxed_order"}
SESSION_SETTINGS = {**HNSW_SETTINGS, "plan_cache_mode": "force_custom_plan"}
# What psql gets for a parameter when kbstore's value is None.
NONE = ""


def _psycopg_form(text: str) -> str:
    if "%" in text:
        raise ValueError("search.sql must not contain '%' (it is the bind-parameter marker)")
    return _PSQL_VAR.sub(r"%(\1)s", text)


@lru_cache(maxsize=4)
def statement(name: str = "search.sql") -> str:
    """The statement with ``%(name)s`` bind parameters."""
    return _psycopg_form((SQL_DIR / name).read_text(encoding="utf-8"))


def statement_variables(name: str = "search.sql") -> list[str]:
    """Every psql variable the statement reads, in first-use order."""
    text = (SQL_DIR / name).read_text(encoding="utf-8")
    return list(dict.fromkeys(_PSQL_VAR.findall(text)))


def vector_text(vector: Any) -> str:
    """pgvector's text form; 9 significant digits round-trip a float32."""
    if isinstance(vector, (bytes, bytearray, memoryview)):
        from array import array

        values: Any = array("f", bytes(vector))
    else:
        values = vector
    return "[" + ",".join(format(float(x), ".9g") for x in values) + "]"


def as_text(value: Any) -> str:
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def vec_k_doc_auto(vec_limit: int, limit: int) -> int:
    """Document KNN depth when not given. SQLite's max(256, 4 x limit) is
    oversampling for its sign-bit prefilter, rescored exactly; an HNSW scan
    already ranks by exact distance, so the retriever's own depth suffices
    (recall@10 vs exact on SciFact: 0.9987 at 100, where 256 made the
    planner sort exactly at 1.7x the time). HyPE questions keep kbstore's
    automatic depth: ~6 per document, and a document needs only its best one."""
    return max(int(vec_limit), int(limit))


_NOT_SQL = ("drop_stopwords", "latest", *VEC_K_KEYS)  # settings used before the statement


def compile_params(request: SearchRequest) -> dict[str, str]:
    """Text parameters for search.sql (every psql variable it reads)."""
    settings = request.settings
    params: dict[str, Any] = {k: v for k, v in settings.items() if k not in _NOT_SQL}
    has_vector = request.vector is not None
    params.update(
        # folded as the documents' text is (fold.py), whatever the server's locale
        fts_terms=_json_words([fts_fold(t) for t in request.fts_terms]),
        topical_terms=_json_words([fts_fold(t) for t in request.topical_terms]),
        title_terms=_json_words([fts_fold(t) for t in request.title_terms]),
        tag_terms=_json_object({t: request.tag_weights.get(t, 1.0) for t in request.tag_terms}),
        date_ranges=json.dumps([list(r) for r in request.date_ranges]),
        latest=bool(request.latest),
        qvec=None if not has_vector else vector_text(request.vector),
        topic=request.topic, now=request.now, limit=request.limit,
    )
    # Without a vector the statement skips every KNN itself (qvec empty).
    for key in VEC_K_KEYS:
        params[key] = vec_k(settings, key, request.limit)
    if settings["vec_k_doc"] is None:
        params["vec_k_doc"] = vec_k_doc_auto(settings["vec_limit"], request.limit)
    return {key: as_text(value) for key, value in params.items()}


def _json_object(weights: dict[str, float]) -> str:
    """``_json_words``' cleaning for the keys of a JSON object."""
    clean = {w.encode("utf-8", "surrogatepass").decode("utf-8", "replace"): float(v)
             for w, v in weights.items()}
    return json.dumps(clean, ensure_ascii=False)


def _json_words(words: Sequence[str]) -> str:
    """A JSON array jsonb accepts: jsonb refuses the \\udXXX escapes of lone
    surrogates (which no document text can contain anyway), so they become
    U+FFFD; NUL (also refused) cannot occur, query analysis splits on it."""
    clean = [w.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for w in words]
    return json.dumps(clean, ensure_ascii=False)


def search_params(query: str, query_vector: Any, *, topic: str | None, limit: int,
                  now: str | None = None, **overrides: Any) -> dict[str, str]:
    """Parameters for a query and settings, analysed as KnowledgeStore.search
    does (code defaults < ``overrides``); ``query_vector`` may be None."""
    vector = None if query_vector is None else _float32(query_vector)
    request = analyse(query, vector, topic=topic, limit=limit, now=now,
                      settings=resolve_settings({}, overrides))
    return compile_params(request)


def _float32(vector: Any) -> bytes:
    if isinstance(vector, (bytes, bytearray, memoryview)):
        return bytes(vector)
    from array import array

    return array("f", (float(x) for x in vector)).tobytes()


def psql_script(params: dict[str, str], schema: str) -> str:
    """A psql script that runs the statement with these parameters."""
    def quoted(value: str) -> str:
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"

    lines = [f"SET search_path = {schema}, public;"]
    lines += [f"SET {k} = {v};" for k, v in HNSW_SETTINGS.items()]
    lines += [f"\\set {k} {quoted(v)}" for k, v in sorted(params.items())]
    lines.append(f"\\i {SQL_DIR / 'search.sql'}")
    return "\n".join(lines) + "\n"


# -- running the statement ---------------------------------------------------------------


def run(conn: Any, request: SearchRequest) -> list[Hit]:
    """ONE statement (so one snapshot: a hit's fields and snippet come from
    one version of its document), as a server-side prepared statement."""
    cursor = conn.execute(statement(), compile_params(request), prepare=True)
    columns = [c.name for c in cursor.description]
    rows = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
    return to_hits(rows, request)



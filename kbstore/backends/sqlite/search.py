"""The SQLite side of the search pipeline: a neutral SearchRequest compiled
into the parameters of ``search.sql`` (FTS5 expressions quoted here), run as
ONE statement that also returns each hit's body for its snippet, and the same
parameters written as a sqlite3-shell script (``kbstore search --shell``)."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...model import Hit, SearchRequest
from ...query import VEC_K_KEYS, vec_k
from ..hits import to_hits
from .bits_scan import PARAMS as BITS_PARAMS
from .bits_scan import BitsScan
from .connection import Connection, database_errors, snapshot, vec_path

log = logging.getLogger(__name__)

SQL_FILE = Path(__file__).with_name("search.sql")


@lru_cache(maxsize=1)
def search_sql() -> str:
    # A plain path, not importlib.resources (which imports tempfile/shutil at start-up).
    return SQL_FILE.read_text(encoding="utf-8")


_BITS_ARMS = re.compile(r"[ ]*-- \[bits index\]\n.*?-- \[/bits index\]\n", re.DOTALL)


# The check each read of a float32 copy makes (search.sql's header): it
# costs ~0.1 us a row twice (+10% on an exact scan of 7k 384-d vectors), so
# the statement runs without it and only a statement that failed runs again
# with it.
_GUARD = re.compile(r"typeof\((\w+)\.embedding\) = 'blob' AND length\(\1\.embedding\) = :vec_bytes")


@lru_cache(maxsize=4)
def statement(bits_index: bool, guarded: bool = True) -> str:
    """search.sql, or for a file without the bits indexes (schema v3/v4
    read as it is) the same statement without its scans of them: a UNION
    ALL arm each, between "[bits index]" marks (vec0's KNN ranks every
    size there; :plain_docs is 0). Unguarded, the checks of the float32
    copies' type and size are constant true (SQLite drops them)."""
    sql = search_sql()
    sql = sql if bits_index else _BITS_ARMS.sub("", sql)
    return sql if guarded else _GUARD.sub("1", sql)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def fts_expression(terms: tuple[str, ...]) -> str | None:
    """An OR of quoted terms: any term matches, BM25 ranks. None if empty."""
    return " OR ".join(_quote(t) for t in terms) or None


# search.sql's max-score pruning of the FTS list: the common terms whose BM25
# bounds add up to at most FTS_PRUNE x the largest term's bound are scored
# only for rows holding a rarer term, when that decides the list (0: off).
# It changes how many rows are scored, never the list. FTS5 pays per row it
# iterates and the term counts cost a pass over each term's rows, so below
# FTS_PRUNE_ROWS indexed rows the pruning costs more than it saves. Measured
# on the real-vector corpora of benchmarks/speed.py (benchmarks/fts_cost.py
# --before-prune-rows; the documents_fts list alone, fastest of 4 runs per
# query, 30 test-collection queries; benchmarks/results/fts_prune_rows.json),
# unpruned -> pruned: 1k 1.8 -> 2.3 ms, 2k 3.4 -> 3.7, 3k 4.4 -> 3.8, 5k
# 6.0 -> 4.9, 10k 13.4 -> 10.2, 20k 21.0 -> 16.4 (the list identical in all
# 180 queries). It was 30,000 rows, from an earlier measurement on the
# latency corpora (pruned 1.1x slower at 10k and 20k; fts_cost_1k_10k.json).
FTS_PRUNE = 0.4
FTS_PRUNE_ROWS = 3000
# The question KNN on sign bits returns HYPE_OVERSAMPLE x vec_k_hype
# candidates; their exact cosine keeps the best vec_k_hype, the questions the
# exact plan would keep. Measured on the real-vector corpora of
# benchmarks/speed.py (100 queries, recall@10 of the vector lists against
# exact search): 1k 0.978 -> 0.992, 5k 0.975 -> 0.993, 10k 0.980 -> 0.990,
# 20k 0.985 -> 0.994 (1.25x: 0.986 at 1k and 5k); the misses before were all
# questions the sign bits ranked below 128, none the document vectors. A
# deeper KNN WITHOUT the cut ranks more documents by their mean question and
# loses single-question matches (k = 256: 0.944 at 10k).
HYPE_OVERSAMPLE = 1.5
# Above HYPE_OVERSAMPLE_ROWS questions the sign bits rank more of the exact top
# k further down: with the query vectors pinned (benchmarks.speed), recall@10 at
# 1.5x was 0.983 at 5k documents (30k questions) but 0.972 at 10k (60k) and
# 0.977 at 20k (120k); 2.5x gave 0.990 / 0.990 at 10k / 20k for +11% / +29% of
# the statement's time (2.0x: 0.980 at 10k, on the edge). Counting the questions
# up to the bound costs ~1.5 ms at 10k.
HYPE_OVERSAMPLE_ROWS = 40000
HYPE_OVERSAMPLE_LARGE = 2.5
# Up to PLAIN_BITS_DOCS documents the sign bits are ranked by a scan of
# vector_data's bits indexes instead of vec0's KNN (search.sql vec_plan):
# one hamming distance per vector (~0.13 us with the top-k sort) against
# vec0's ~k comparisons per stored vector. Both grow with the vectors, so at
# these k the scan was faster at every size measured, 1k to 100k documents
# (benchmarks/results/speed_small_2.md); above, vec0 as before (unmeasured).
PLAIN_BITS_DOCS = 100000


def fts_words(terms: tuple[str, ...]) -> str:
    """The full-text terms, each quoted, repeats kept (JSON array): search.sql
    reads each term's document frequency for the pruning."""
    return json.dumps([_quote(t) for t in terms])


def title_expression(terms: tuple[str, ...]) -> str | None:
    """The title words as an OR; search.sql keeps the titles sharing at
    least two distinct query words (one for a one-word query): a single
    common word in a title is noise, yet RRF would give it the same rank-1
    credit as a real match. None if empty."""
    return fts_expression(terms)


def title_words(terms: tuple[str, ...]) -> str:
    """Each title word as its own quoted FTS5 term (JSON array): search.sql
    counts the words a title matches, one MATCH per word."""
    return json.dumps([_quote(t) for t in terms])


_NOT_SQL = ("drop_stopwords", "latest", *VEC_K_KEYS)  # settings used before the statement


def compile_params(request: SearchRequest, dim: int, bits_index: bool = True
                   ) -> dict[str, Any]:
    params = {k: v for k, v in request.settings.items() if k not in _NOT_SQL}
    has_vector = request.vector is not None
    params.update(
        fts_query=fts_expression(request.fts_terms),
        fts_words=fts_words(request.fts_terms), fts_prune=FTS_PRUNE,
        fts_prune_rows=FTS_PRUNE_ROWS, hype_oversample=HYPE_OVERSAMPLE,
        hype_oversample_rows=HYPE_OVERSAMPLE_ROWS, hype_oversample_large=HYPE_OVERSAMPLE_LARGE,
        plain_docs=PLAIN_BITS_DOCS if bits_index else 0,
        title_query=title_expression(request.title_terms),
        title_words=title_words(request.title_terms),
        # ASCII JSON: lone surrogates escaped
        tag_terms=json.dumps({t: request.tag_weights.get(t, 1.0) for t in request.tag_terms}),
        date_ranges=json.dumps([list(r) for r in request.date_ranges]),
        latest=int(request.latest),
        topical_query=fts_expression(request.topical_terms),
        # No vector side: float32 zeros and k = 0 give an empty KNN.
        has_vector=int(has_vector),
        qvec=request.vector if has_vector else bytes(4 * dim),
        vec_bytes=4 * dim,  # a float32 copy of another size is skipped
        topic=request.topic, now=request.now, limit=request.limit)
    # NULL: search.sql scans the sign bits itself (see run and bits_scan.py)
    params.update(dict.fromkeys(BITS_PARAMS.values()))
    for key in VEC_K_KEYS:
        params[key] = vec_k(request.settings, key, request.limit) if has_vector else 0
    return params


def run(conn: Connection, request: SearchRequest, dim: int, bits_index: bool = True,
        scan: BitsScan | None = None) -> list[Hit]:
    """The statement's rows as hits. With ``scan`` (a file with the bits
    indexes), the sign bits of a file searched again unchanged are ranked in
    numpy (bits_scan.py) and handed to the statement, which otherwise ranks
    them itself: the same candidates either way."""
    params = compile_params(request, dim, bits_index)
    # One snapshot: with a writer committing meanwhile, a hit's fields and
    # snippet still come from one version of the document.
    with snapshot(conn):
        if scan is not None and bits_index:
            ranked_bits(scan, conn, params, dim)
        try:
            rows = _rows(conn, statement(bits_index, guarded=False), params)
        except database_errors() as exc:
            # A float32 copy damaged by hand (wrong size, text) fails the
            # fast statement; the guarded one skips it. Anything else fails
            # the guarded one too, and that error is raised.
            rows = _rows(conn, statement(bits_index), params)
            log.warning("a stored vector is damaged (%s); it was skipped. Run `kbstore doctor "
                        "--fix` to re-embed it", exc)
    return to_hits(rows, request)


def ranked_bits(scan: BitsScan, conn: Connection, params: dict[str, Any], dim: int) -> None:
    """Set params' :bits_* to the ids scan ranks from its copy (NULL where it
    has none: no copy yet, a topic, no query vector). Inside the snapshot the
    statement then runs in."""
    if params["topic"] is None and params["has_vector"]:
        params.update(scan.params(conn, params["qvec"], dim, {
            "doc": params["vec_k_doc"], "chunk": params["vec_k_chunk"],
            # the most the statement asks for (vec_plan's hype_oversample)
            "hype": int(min(4096, params["vec_k_hype"] * HYPE_OVERSAMPLE_LARGE))}))


def _rows(conn: Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, params)
    columns = [c[0] for c in cursor.description]
    return [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]



def prepare(conn: Connection, request: SearchRequest, dim: int, bits_index: bool = True
            ) -> None:
    """Compile the statement on this connection now, before a query vector is
    computed: run once with every list empty (no words, no vector, no dates),
    which returns nothing and leaves the compiled statement in the
    connection's statement cache for the real search. Compiling it costs
    ~70 MB of transient planner memory; done before the embedding model
    loads, the model reuses that memory instead of adding to it (a first
    `kbstore search`: peak RSS ~170 -> ~110 MB)."""
    empty = dataclasses.replace(request, vector=None, terms=(), fts_terms=(), title_terms=(),
                                tag_terms=(), tag_weights={}, date_ranges=(), latest=False,
                                topical_terms=(), explain=False)
    with snapshot(conn):
        conn.execute(statement(bits_index, guarded=False),
                     compile_params(empty, dim, bits_index)).fetchall()


# -- the sqlite3-shell script --------------------------------------------------------


def _literal(value: Any) -> str:
    """A SQL literal the shell cannot mistake for anything else: newlines are
    spelled char(10)/char(13), so no line of the script can start a
    dot-command."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    text = str(value).replace("'", "''")
    for char, code in (("\r", 13), ("\n", 10)):
        text = text.replace(char, f"' || char({code}) || '")
    return f"'{text}'"


def _dot_arg(text: str) -> str:
    """A dot-command argument in double quotes (the shell resolves backslash
    escapes there), so spaces, quotes and newlines stay inside it."""
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r"))
    return f'"{escaped}"'


def shell_script(request: SearchRequest, dim: int, vector: list[float] | None,
                 location: str, bits_index: bool = True) -> str:
    params = compile_params(request, dim, bits_index)
    if vector is not None:  # the shell takes the query vector as a JSON array
        params["qvec"] = json.dumps([round(float(x), 7) for x in vector])
    else:
        params["qvec"] = json.dumps([0.0] * dim)
    lines = [
        f"-- kbstore search for {json.dumps(request.text)} in {json.dumps(location)}",
        "-- run with:  sqlite3 <database> < this-file",
        f".load {_dot_arg(vec_path())}",
        ".parameter init",
    ]
    # Rows in the shell's parameter table: plain SQL literals, no shell quoting.
    for key, value in sorted(params.items()):
        lines.append("INSERT OR REPLACE INTO temp.sqlite_parameters (key, value) "
                     f"VALUES ({_literal(':' + key)}, {_literal(value)});")
    # The statement itself, not a .read of its file: nothing in the script
    # depends on where kbstore is installed except the extension.
    lines += [".mode box", statement(bits_index).rstrip(), ""]
    return "\n".join(lines)

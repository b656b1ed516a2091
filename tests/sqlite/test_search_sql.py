"""The SQLite search statement (kbstore/backends/sqlite/search.sql): its
fusion part equals the pure-Python reference on random rank lists, and the
script `kbstore search --shell` prints ranks exactly like search() when run
in the sqlite3 shell -- with the file's stored fusion defaults too."""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite.search import search_sql
from kbstore.documents import make_document
from kbstore.query import DEFAULTS

from ..contract.reference import (
    RETRIEVERS,
    boost_for,
    convex_reference,
    decay_for,
    rrf_reference,
    vec_rank_weight,
    vector_gap,
)
from .util import SLOTS, connect_file, raw

NOW = "2026-06-30T12:00:00+00:00"
FUSION_START = "\nfused_ids AS ("
DOC_TYPES = ("entry", "skill", "journal")
SQLITE3 = shutil.which("sqlite3")


def fusion_sql() -> str:
    """search.sql's fusion, fed by rank lists from JSON instead of the retrievers."""
    sql = search_sql()
    assert FUSION_START in sql, "search.sql changed shape: update fusion_sql()"
    tail = sql[sql.index(FUSION_START):]

    def ranked(name: str, extra: str = "") -> str:
        return (f"{name}_ranked AS (SELECT json_extract(value, '$[0]') AS doc_id, "
                f"json_extract(value, '$[1]') AS score, json_extract(value, '$[2]') AS rank"
                f"{extra} FROM json_each(:{name}_json))")

    # the HyPE and date lists stay empty here (their ranks fuse like the others)
    empty = ("hype_ranked AS (SELECT 0 AS doc_id, 0.0 AS score, 0.0 AS best, 0 AS position, "
             "0 AS rank WHERE 0),\n"
             "hype_fts_ranked AS (SELECT 0 AS doc_id, 0.0 AS score, 0 AS rank WHERE 0),\n"
             "date_ranked AS (SELECT 0 AS doc_id, 0.0 AS score, 0 AS rank WHERE 0),")
    return ("WITH " + ranked("fm", ", 1.0 AS weight") + ",\n" + ranked("fts") + ",\n"
            + ranked("vec", f", json_extract(value, '$[0]') * {SLOTS} AS vector_id, "
                            "'doc' AS kind") + ",\n" + empty
            + tail)


@pytest.fixture(scope="module")
def fusion_store(tmp_path_factory):  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("fusion") / "f.sqlite"
    store = KnowledgeStore.open(path, FakeEmbedder(16), hype=False)
    rng = random.Random(7)
    docs = []
    for i in range(40):
        doc_type = DOC_TYPES[i % 3]
        folder = {"entry": "domains", "skill": "skills", "journal": "journal"}[doc_type]
        path_i = f"skills/s{i}/SKILL.md" if doc_type == "skill" else f"{folder}/d{i}.md"
        updated = (dt.datetime(2026, 6, 30, tzinfo=dt.timezone.utc)
                   - dt.timedelta(days=rng.uniform(-5, 200))).isoformat()
        docs.append(make_document(path_i, title=f"Doc {i}", body=f"body {i}", updated=updated))
    store.upsert_many(docs)  # one transaction
    yield store
    store.close()


def _random_lists(rng: random.Random, ids: list[int]) -> dict[str, list[tuple[int, float, int]]]:
    lists = {}
    for name in RETRIEVERS:
        chosen = rng.sample(ids, rng.randint(0, len(ids)))
        scores = sorted((rng.uniform(-5, 5) for _ in chosen), reverse=True)
        lists[name] = [(doc, score, rank) for rank, (doc, score)
                       in enumerate(zip(chosen, scores, strict=True), start=1)]
    return lists


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1),
       k=st.floats(1, 200), w=st.tuples(*[st.floats(0, 3)] * 3),
       boosts=st.tuples(*[st.floats(0.1, 2)] * 3), half_life=st.floats(1, 365),
       fusion=st.sampled_from(["rrf", "convex"]), standout=st.floats(0, 5))
def test_sql_fusion_equals_reference_on_random_rank_lists(
        fusion_store: KnowledgeStore, seed: int, k: float, w: tuple, boosts: tuple,  # type: ignore[type-arg]
        half_life: float, fusion: str, standout: float) -> None:
    conn = raw(fusion_store)
    rows = conn.execute("SELECT id, doc_type, updated FROM documents").fetchall()
    meta = {r[0]: (r[1], r[2]) for r in rows}
    rng = random.Random(seed)
    lists = _random_lists(rng, sorted(meta))
    weights = dict(zip(RETRIEVERS, w, strict=True))
    params = {**DEFAULTS, "fusion": fusion, "k_rrf": k, "w_fm": w[0], "w_fts": w[1],
              "w_vec": w[2], "boost_entry": boosts[0], "boost_skill": boosts[1],
              "boost_journal": boosts[2], "half_life_days": half_life, "now": NOW,
              "min_similarity": None, "limit": 1000, "latest": 0, "topical_query": None,
              "topic": None,
              "has_vector": 1,
              "qvec": bytes(4 * 16),
              "vec_bytes": 4 * 16,
              # the text lists' adaptive weight reads the documents' vectors
              # (tests/contract/test_text_agreement.py): off for random lists
              "agreement_ratio": 0.0, "vec_standout": standout,
              **{f"{n}_json": json.dumps(lists[n]) for n in RETRIEVERS}}
    cursor = conn.execute(fusion_sql(), params)
    columns = [c[0] for c in cursor.description]
    got = {r["doc_id"]: r for r in (dict(zip(columns, row, strict=True)) for row in cursor)}

    if fusion == "rrf":
        base = rrf_reference({n: {d: rank for d, _, rank in lists[n]} for n in RETRIEVERS},
                             weights, k)
        # the vector rank 1: x (1 + vec_standout x its score gap to rank 2)
        gap = vector_gap([score for _, score, _ in lists["vec"]])
        for doc, _, rank in lists["vec"][:1]:
            extra = vec_rank_weight(rank, gap, params["vec_standout"]) - 1.0
            base[doc] += weights["vec"] * extra / (k + rank)
    else:
        base = convex_reference({n: {d: s for d, s, _ in lists[n]} for n in RETRIEVERS},
                                weights)
    expected = {doc: b * boost_for(meta[doc][0], params)
                * decay_for(meta[doc][0], meta[doc][1], NOW, half_life,
                            params["recency_weight"])
                for doc, b in base.items()}
    assert set(got) == set(expected)
    for doc, score in expected.items():
        assert got[doc]["score"] == pytest.approx(score, rel=1e-7, abs=1e-12)
    order = [r[0] for r in sorted(expected.items(), key=lambda kv: (-kv[1], kv[0]))]
    produced = list(got)  # rows arrive in the statement's ORDER BY
    # equal scores may be ordered either way by float noise; compare by score
    assert [pytest.approx(expected[d], rel=1e-7, abs=1e-12) for d in order] == [
        expected[d] for d in produced]


# -- the sqlite3-shell script ----------------------------------------------------------


def _box_rows(output: str) -> list[dict[str, str]]:
    """Rows of the shell's `.mode box` output."""
    lines = [line for line in output.splitlines() if line.startswith("│")]
    cells = [[c.strip() for c in line.strip("│").split("│")] for line in lines]
    header, *rows = cells
    return [dict(zip(header, row, strict=True)) for row in rows]


def _corpus(path: Path) -> None:
    with KnowledgeStore.open(path, FakeEmbedder(64), hype=False) as store:
        store.upsert_many([
            make_document("domains/kettle.md", title="Copper kettle",
                          body="a copper kettle for green tea", tags=["tea"]),
            make_document("domains/leaves.md", title="Tea leaves",
                          body="green tea leaves steep briefly"),
            make_document("journal/2026-06-01-tea.md", title="Tea at noon",
                          body="drank green tea with lemon", updated="2026-06-01"),
            make_document("skills/brew/SKILL.md", title="Brew tea", body="steep green tea"),
            make_document("domains/walnut.md", title="Walnut tree", body="walnut harvest"),
        ])


def _shell_hits(run_cli, path: Path, query: str, tmp_path: Path) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    script = run_cli("search", "--db", path, query, "--shell")
    assert script.exit_code == 0, script.output
    done = subprocess.run([SQLITE3, str(path)], input=script.output, capture_output=True,  # type: ignore[list-item]
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [(row["path"], float(row["score"])) for row in _box_rows(done.stdout)]


@pytest.mark.skipif(SQLITE3 is None, reason="no sqlite3 shell on this machine")
@pytest.mark.parametrize("stored", [None, {"k_rrf": 2.0, "boost_skill": 3.0, "w_fts": 0.1,
                                           "half_life_days": 1.0}],
                         ids=["defaults", "stored-defaults"])
def test_the_shell_script_ranks_like_search(run_cli, tmp_path: Path, stored) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "kb.sqlite"
    _corpus(path)
    if stored is not None:
        conn = connect_file(path)
        try:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'fusion'",
                         (json.dumps({**DEFAULTS, **stored}),))
        finally:
            conn.close()
    with KnowledgeStore.open(path, read_only=True) as store:
        expected = [(h.path, h.score) for h in store.search("green tea")]
        plain = [(h.path, h.score) for h in store.search("green tea", **{
            k: DEFAULTS[k] for k in stored or {}})]
    assert len(expected) == 5
    if stored is not None:
        assert expected != plain  # the stored defaults really change the ranking
    got = _shell_hits(run_cli, path, "green tea", tmp_path)
    assert [p for p, _ in got] == [p for p, _ in expected]
    for (_, mine), (_, theirs) in zip(got, expected, strict=True):
        assert mine == pytest.approx(theirs, rel=1e-6)


@pytest.mark.skipif(SQLITE3 is None, reason="no sqlite3 shell on this machine")
def test_a_hostile_path_cannot_inject_shell_commands(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A newline and a dot-command in the path (or the query) stay data."""
    folder = tmp_path / "my notes\n.shell touch pwned"
    folder.mkdir()
    path = folder / "kb it's.sqlite"
    _corpus(path)
    script = run_cli("search", "--db", path, "green tea\n.shell touch pwned2", "--shell")
    assert script.exit_code == 0, script.output
    assert not any(line.startswith(".shell") for line in script.output.splitlines())
    done = subprocess.run([SQLITE3, str(path)], input=script.output, capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.rglob("pwned*"))
    assert _box_rows(done.stdout)[0]["path"] in ("domains/leaves.md", "domains/kettle.md",
                                                 "skills/brew/SKILL.md")

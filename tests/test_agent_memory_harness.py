"""The agent-memory harness: metrics on hand-checked rankings, and a run of
every system on a tiny in-test dataset through kbstore's public API
(FakeEmbedder, everything under tmp_path)."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pytest

from benchmarks.agent_memory import metrics as m
from benchmarks.agent_memory.data import load
from benchmarks.agent_memory.report import markdown
from benchmarks.agent_memory.run import (
    Runner,
    evaluate,
    output_path,
    parse_sets,
    with_findings,
)
from benchmarks.agent_memory.systems import ALL_SYSTEMS, KBSTORE_SYSTEMS
from kbstore import FakeEmbedder

# -- metrics -----------------------------------------------------------------


def test_recall_counts_relevant_paths_in_the_top_k() -> None:
    rels = {"a": 3, "b": 1, "c": 2}
    assert m.recall_at(["a", "x", "b", "y", "z", "c"], rels, 5) == pytest.approx(2 / 3)
    assert m.recall_at(["x", "y"], rels, 5) == 0.0
    assert m.recall_at(["a", "b", "c"], rels, 5) == 1.0


def test_ndcg_is_graded_with_a_log2_discount() -> None:
    rels = {"a": 3, "b": 1}
    # DCG = 0 + 3/log2(3) + 1/log2(4); ideal = 3/log2(2) + 1/log2(3)
    expected = (3 / math.log2(3) + 1 / 2) / (3 + 1 / math.log2(3))
    assert m.ndcg_at(["x", "a", "b"], rels, 10) == pytest.approx(expected)
    assert expected == pytest.approx(0.6590, abs=1e-4)
    assert m.ndcg_at(["a", "b"], rels, 10) == pytest.approx(1.0)
    # a grade-3 path beyond the cut-off earns nothing
    assert m.ndcg_at(["x", "b", "a"], rels, 1) == 0.0


def test_ndcg_matches_trec_eval() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {"q1": {"a": 3, "b": 1, "c": 2}, "q2": {"d": 1}}
    ranked = {"q1": ["x", "c", "a", "y", "b"], "q2": ["y", "x", "d"]}
    run = {q: {p: float(100 - i) for i, p in enumerate(ps)} for q, ps in ranked.items()}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recip_rank"}).evaluate(run)
    for q in qrels:
        assert m.ndcg_at(ranked[q], qrels[q], 10) == pytest.approx(ref[q]["ndcg_cut_10"])
        assert m.reciprocal_rank(ranked[q], qrels[q]) == pytest.approx(ref[q]["recip_rank"])


def test_reciprocal_rank_of_the_first_relevant_path() -> None:
    assert m.reciprocal_rank(["x", "y", "b", "a"], {"a": 3, "b": 1}) == pytest.approx(1 / 3)
    assert m.reciprocal_rank(["x"], {"a": 3}) == 0.0


def _day(n: int) -> dt.datetime:
    return dt.datetime(2024, 1, 1) + dt.timedelta(days=n)


def test_latest_accuracy_wants_the_newest_relevant_document_at_rank_1() -> None:
    dates = {"kb": {"old": _day(0), "mid": _day(50), "new": _day(100)}}
    qrels = {"q1": {"old": 1, "mid": 1, "new": 3}, "q2": {"old": 1, "new": 3},
             "q3": {"old": 1, "new": 3}}
    queries = [{"id": "q1", "kb": "kb", "type": "latest"},
               {"id": "q2", "kb": "kb", "type": "latest"},
               {"id": "q3", "kb": "kb", "type": "superseded"}]
    ranked = {"q1": ["new", "old"], "q2": ["old", "new"], "q3": ["new"]}
    out = m.latest_accuracy(queries, ranked, qrels, dates)
    assert out["latest"] == {"n": 2, "correct": 1, "accuracy": 0.5}
    assert out["superseded"]["accuracy"] == 1.0


def test_age_buckets_count_answer_paths_by_age_at_now() -> None:
    dates = {"kb": {"a": _day(0), "b": _day(80), "c": _day(195), "ctx": _day(1)}}
    # answer paths are the top grade (a, b, c); 'ctx' (grade 1) is context only
    qrels = {"q": {"a": 3, "b": 3, "c": 3, "ctx": 1}}
    queries = [{"id": "q", "kb": "kb", "type": "multi"}]
    now = {"q": _day(200)}
    out = m.by_age(queries, {"q": ["c", "b", "x", "y", "z", "a"]}, qrels, dates, now)
    assert out["< 30 d"] == {"pairs": 1, "recall@5": 1.0}      # c: 5 days
    assert out["30-90 d"] == {"pairs": 0, "recall@5": None}
    assert out["> 90 d"] == {"pairs": 2, "recall@5": 0.5}      # b in top 5, a at rank 6


def test_newest_five_share() -> None:
    newest = {"q1": ["e", "d", "c", "b", "a", "z"], "q2": ["e", "d", "c", "b", "a"]}
    queries = [{"id": "q1"}, {"id": "q2"}]
    ranked = {"q1": ["a", "b", "c", "d", "e", "z"], "q2": ["z", "e", "d", "c", "b"]}
    assert m.newest_five_share(queries, ranked, newest) == {"n": 2, "count": 1, "share": 0.5}


def test_breakdown_by_any_query_field() -> None:
    per_q = {"q1": {"recall@5": 1.0, "recall@10": 1.0, "ndcg@10": 1.0, "mrr": 1.0},
             "q2": {"recall@5": 0.0, "recall@10": 0.0, "ndcg@10": 0.0, "mrr": 0.0},
             "q3": {"recall@5": 0.5, "recall@10": 0.5, "ndcg@10": 0.5, "mrr": 0.5}}
    queries = [{"id": "q1", "answer_position": "inside"},
               {"id": "q2", "answer_position": "beyond"},
               {"id": "q3", "answer_position": "beyond"}, {"id": "q4"}]
    out = m.by_field(queries, per_q, "answer_position")
    assert out["inside"]["recall@5"] == 1.0
    assert out["beyond"] == {"n": 2, "recall@5": 0.25, "recall@10": 0.25, "ndcg@10": 0.25,
                             "mrr": 0.25}


def test_set_values_are_parsed() -> None:
    assert parse_sets(["half_life_days=1e9", "fusion=convex", "min_similarity=null",
                       "w_vec=1.5"]) == {"half_life_days": 1e9, "fusion": "convex",
                                         "min_similarity": None, "w_vec": 1.5}
    with pytest.raises(SystemExit):
        parse_sets(["no-equals-sign"])


# -- the harness on a tiny dataset --------------------------------------------

BODIES = {
    "2024-01-05-zeppelin": "We flew in a zeppelin over the lake; the pilot was called Ferdinand.",
    "2024-03-10-pottery": "Pottery class: made a lopsided mug and a bowl for the cat.",
    "2024-05-02-kitchen-quotes": "Two quotes for the kitchen renovation, both too expensive.",
    "2024-06-20-kitchen-delay": "Kitchen renovation delayed again: the worktop was cut wrong.",
    "2024-07-30-kitchen-done": "The kitchen renovation is finished and the window is lovely.",
    "2024-08-01-dentist": "Dentist appointment, a filling in a back tooth.",
}


def write_dataset(root: Path) -> Path:
    root.mkdir()
    corpus = []
    for kb in ("alice", "bob"):
        for slug, body in BODIES.items():
            day = slug[:10]
            corpus.append({"kb": kb, "path": f"journal/{slug}.md", "title": slug[11:],
                           "tags": ["home"] if "kitchen" in slug else [],
                           "created": day, "updated": day, "body": f"{kb}: {body}"})
    corpus.append({"kb": "bob", "path": "projects/boat.md", "title": "Boat", "tags": [],
                   "created": None, "updated": None, "body": "The boat needs new sails."})
    queries = [
        {"id": "a1", "kb": "alice", "text": "zeppelin pilot name", "type": "single",
         "now": "2024-08-10", "split": "dev", "answer_position": "inside"},
        {"id": "a2", "kb": "alice", "text": "latest on the kitchen renovation",
         "type": "latest", "now": "2024-08-10", "split": "test"},
        {"id": "a3", "kb": "alice", "text": "quantum chromodynamics lecture notes",
         "type": "absent", "now": "2024-08-10", "split": "dev"},
        {"id": "b1", "kb": "bob", "text": "boat sails", "type": "single",
         "now": "2024-08-10", "split": "test", "topic": "projects",
         "answer_position": "beyond"},
    ]
    qrels = [("a1", "journal/2024-01-05-zeppelin.md", 3),
             ("a2", "journal/2024-07-30-kitchen-done.md", 3),
             ("a2", "journal/2024-06-20-kitchen-delay.md", 1),
             ("a2", "journal/2024-05-02-kitchen-quotes.md", 1),
             ("b1", "projects/boat.md", 3)]
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels.tsv").write_text("query_id\tpath\tgrade\n" + "".join(
        f"{q}\t{p}\t{g}\n" for q, p, g in qrels))
    return root


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "tiny")


def test_load_checks_the_qrels(tiny: Path) -> None:
    ds = load(tiny)
    assert sorted(ds.docs) == ["alice", "bob"] and len(ds.docs["bob"]) == 7
    assert ds.qrels["a2"]["journal/2024-07-30-kitchen-done.md"] == 3
    assert "a3" not in ds.qrels
    with open(tiny / "qrels.tsv", "a") as fh:
        fh.write("a1\tprojects/boat.md\t1\n")  # bob's document, asked in alice's kb
    with pytest.raises(ValueError, match="not in kb"):
        load(tiny)


def test_every_system_runs_through_the_harness(tiny: Path) -> None:
    ds = load(tiny)
    results = evaluate(ds, FakeEmbedder(dim=64), by=("type", "answer_position"),
                       log=lambda *_: None)
    systems = results["systems"]
    assert list(systems) == list(ALL_SYSTEMS)
    for name, spec in KBSTORE_SYSTEMS.items():
        if spec.only:
            assert systems[name]["isolation"]["violations"] == 0
            assert systems[name]["isolation"]["queries"] == len(ds.queries)
    # a rare keyword: both keyword retrievers put the answer first
    for name in ("bm25", "kbstore_fts"):
        assert systems[name]["per_query"]["a1"][2] == 1.0  # reciprocal rank
    # the topic filter reaches every system: projects/boat.md is the one candidate
    # (the frontmatter retriever wants two query words in a title: no match)
    for name in systems:
        assert systems[name]["per_query"]["b1"][0] == (name != "kbstore_fm")
    assert systems["bm25"]["by"]["answer_position"]["inside"]["n"] == 1
    assert set(systems["bm25"]["by"]["type"]) == {"single", "latest"}  # absent: no metrics
    assert systems["kbstore"]["latest"]["latest"]["n"] == 1
    floors = results["floors"]
    assert floors["kbstore"]["none"]["absent_n"] == 1
    assert floors["dense"]["none"]["absent_empty"] == 0  # no floor: always an answer
    text = markdown(results)
    assert "| kbstore_vec |" in text and "recall@5 by answer_position" in text


def test_kbstore_rows_are_the_public_search_with_the_querys_now(tiny: Path,
                                                               tmp_path: Path) -> None:
    ds = load(tiny)
    runner = Runner(ds, FakeEmbedder(dim=64), tmp_path / "stores",
                    ["kbstore", "kbstore_nodecay"], {"k_rrf": 40, "half_life_days": 7})
    try:
        store = runner.stores.stores["bob"]
        calls = []
        search = store.search

        def recording(text, **kwargs):
            calls.append(kwargs)
            return search(text, **kwargs)

        store.search = recording
        q = next(q for q in ds.queries if q["id"] == "b1")
        direct = [h.path for h in search(q["text"], limit=100, now=q["now"],
                                         topic="projects", k_rrf=40, half_life_days=7)]
        assert runner.rank("kbstore", q) == direct
        assert calls[-1] == {"limit": 100, "now": "2024-08-10", "topic": "projects",
                             "explain": False, "k_rrf": 40, "half_life_days": 7}
        runner.rank("kbstore_nodecay", q)  # the system's own setting wins over --set
        assert calls[-1]["half_life_days"] is None and calls[-1]["k_rrf"] == 40
    finally:
        runner.close()


def test_a_rerun_keeps_the_hand_written_findings_of_the_report_it_replaces() -> None:
    old = "# Report\n\n| a | 1 |\n\n## Findings (by hand)\n\n- the default wins\n"
    new = "# Report\n\n| a | 2 |\n"
    text = with_findings(new, old)
    assert text.startswith(new.rstrip("\n")) and "| a | 1 |" not in text
    assert "## Findings (by hand)\n\n- the default wins" in text
    assert "previous run" in text
    assert with_findings(new, None) == new == with_findings(new, "# Report without findings\n")
    again = with_findings(text, text)  # a report that has findings keeps its own
    assert again == text


def test_an_output_name_with_a_dot_keeps_it(tmp_path: Path) -> None:
    assert output_path(tmp_path / "pk_dev_a0.6", ".md").name == "pk_dev_a0.6.md"
    assert output_path(tmp_path / "agent_memory_sessions", ".json").name == (
        "agent_memory_sessions.json")

"""Integrity of the two written agent-memory datasets (benchmarks/agent_memory/
longdocs and picobot_kb): labels point at real documents, every answerable query
has an answer, answer positions agree with the stored answer, dates parse, the
splits are balanced, and the committed files are what the sources produce.
No model: the MiniLM tokenizer file is only read to recount answer positions."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.agent_memory import build_kb_datasets as kbdata

ROOT = Path(kbdata.__file__).resolve().parent
DATASETS = ("longdocs", "picobot_kb")
PICOBOT_TYPES = {"paraphrase", "keyword", "tag", "temporal", "skill", "superseded", "deep",
                 "topic", "latest", "absent"}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _qrels(path: Path) -> list[tuple[str, str, int]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query_id\tpath\tgrade"
    return [(q, p, int(g)) for q, p, g in (line.split("\t") for line in lines[1:] if line)]


def _date(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


@pytest.fixture(scope="module", params=DATASETS)
def dataset(request: pytest.FixtureRequest) -> dict:
    root = ROOT / request.param
    return {"name": request.param, "root": root,
            "docs": _jsonl(root / "corpus.jsonl"), "queries": _jsonl(root / "queries.jsonl"),
            "qrels": _qrels(root / "qrels.tsv"),
            "zero": _qrels(root / "judged_nonrelevant.tsv")}


@pytest.fixture(scope="module")
def tokenizer():
    return kbdata.minilm_tokenizer()


def test_committed_files_are_what_the_sources_build(dataset: dict, tokenizer) -> None:
    built = kbdata.assemble(dataset["name"], tokenizer)
    for name, text in built.items():
        on_disk = (dataset["root"] / name).read_text(encoding="utf-8")
        assert on_disk == text, f"{dataset['name']}/{name} is stale: run build_kb_datasets"


def test_documents_are_unique_dated_and_in_one_kb(dataset: dict) -> None:
    paths = [d["path"] for d in dataset["docs"]]
    assert len(paths) == len(set(paths))
    assert {d["kb"] for d in dataset["docs"]} == {dataset["name"]}
    for d in dataset["docs"]:
        assert d["title"].strip() and d["body"].strip(), d["path"]
        if d["doc_type"] == "skill" and d["created"] is None:
            # picobot skills carry only name and description in their frontmatter.
            assert d["updated"] is None
        else:
            assert _date(d["created"]) <= _date(d["updated"]), d["path"]
        assert d["topic"] == d["path"].split("/", 1)[0]
        if d["doc_type"] == "journal":
            assert d["path"].split("/")[1][:10] == d["created"][:10], d["path"]
        if d["doc_type"] == "skill":
            assert d["path"].endswith("/SKILL.md") and d["tags"] == []
            assert d["title"] == d["path"].split("/")[1]


def test_queries_have_unique_ids_parsable_dates_and_no_future_documents(dataset: dict) -> None:
    ids = [q["id"] for q in dataset["queries"]]
    assert len(ids) == len(set(ids))
    newest = max(_date(d["updated"]) for d in dataset["docs"] if d["updated"])
    for q in dataset["queries"]:
        assert q["kb"] == dataset["name"] and q["text"].strip()
        # A document dated after the question would be memory from the future.
        assert _date(q["now"]) >= newest, q["id"]


def test_every_label_points_at_a_document_of_the_same_kb(dataset: dict) -> None:
    paths = {d["path"] for d in dataset["docs"]}
    ids = {q["id"] for q in dataset["queries"]}
    for qid, path, grade in dataset["qrels"]:
        assert qid in ids and path in paths, (qid, path)
        assert 1 <= grade <= 3
    for qid, path, grade in dataset["zero"]:
        assert qid in ids and path in paths and grade == 0
    judged = [(q, p) for q, p, _ in dataset["qrels"] + dataset["zero"]]
    assert len(judged) == len(set(judged)), "a document is judged twice for one query"


def test_every_answerable_query_has_a_grade_3_document_and_absent_ones_none(dataset: dict
                                                                             ) -> None:
    best: dict[str, int] = {}
    for qid, _, grade in dataset["qrels"]:
        best[qid] = max(best.get(qid, 0), grade)
    for q in dataset["queries"]:
        if q["type"] == "absent":
            assert q["id"] not in best, q["id"]
        else:
            assert best.get(q["id"]) == 3, q["id"]


def test_splits_are_fixed_and_balanced_per_stratum(dataset: dict) -> None:
    field = "answer_position" if dataset["name"] == "longdocs" else "type"
    per: dict[str, Counter] = {}
    for q in dataset["queries"]:
        assert q["split"] in ("dev", "test")
        per.setdefault(q[field], Counter())[q["split"]] += 1
    for stratum, counts in per.items():
        assert counts["dev"] > 0 and counts["test"] > 0, stratum
        assert abs(counts["dev"] - counts["test"]) <= 1, (stratum, counts)


def test_topic_filters_name_a_topic_of_the_kb(dataset: dict) -> None:
    topics = {d["topic"] for d in dataset["docs"]}
    relevant = {(q, p) for q, p, _ in dataset["qrels"]}
    for q in dataset["queries"]:
        if q.get("topic"):
            assert q["topic"] in topics
            # A label outside the filter could never be retrieved.
            assert all(p.split("/", 1)[0] == q["topic"] for qid, p in relevant
                       if qid == q["id"]), q["id"]


def test_answer_positions_agree_with_the_stored_answer(tokenizer) -> None:
    root = ROOT / "longdocs"
    docs = {d["path"]: d for d in _jsonl(root / "corpus.jsonl")}
    queries = _jsonl(root / "queries.jsonl")
    positions: Counter = Counter()
    encoded = {p: tokenizer.encode(kbdata.embedding_text(d)) for p, d in docs.items()
               if any(q["answer_doc"] == p for q in queries)}
    for q in queries:
        text = kbdata.embedding_text(docs[q["answer_doc"]])
        assert text[q["answer_char"]:].startswith(q["answer"]), q["id"]
        enc = encoded[q["answer_doc"]]
        starts = [s for s, e in enc.offsets if e > s]
        first = next(i for i, (s, e) in enumerate(enc.offsets) if e > s and s >= q["answer_char"])
        assert first == q["answer_token"], q["id"]
        assert q["answer_position"] == ("inside" if first < kbdata.WINDOW else "beyond"), q["id"]
        if q["answer_position"] == "inside":
            end = q["answer_char"] + len(q["answer"])
            assert sum(1 for s in starts if s < end) < kbdata.WINDOW - 1, q["id"]
        positions[q["answer_position"]] += 1
    share = positions["beyond"] / len(queries)
    assert 0.4 <= share <= 0.6, positions
    assert len(queries) >= 120


def test_longdocs_is_made_of_long_entries() -> None:
    docs = _jsonl(ROOT / "longdocs" / "corpus.jsonl")
    words = [len(d["body"].split()) for d in docs]
    assert sum(800 <= n <= 2000 for n in words) >= 60
    assert any(n < 800 for n in words)  # and some shorter ones, as in a real KB


def test_picobot_kb_covers_every_query_type_and_the_kb_shape() -> None:
    root = ROOT / "picobot_kb"
    docs = _jsonl(root / "corpus.jsonl")
    queries = _jsonl(root / "queries.jsonl")
    types = Counter(q["type"] for q in queries)
    assert set(types) == PICOBOT_TYPES
    assert len(queries) >= 100
    assert 0.07 <= types["absent"] / len(queries) <= 0.13
    assert 150 <= len(docs) <= 220
    assert 15 <= sum(d["doc_type"] == "skill" for d in docs) <= 25
    assert {d["topic"] for d in docs} == {"user", "projects", "domains", "self", "journal",
                                         "skills"}
    topical = [q for q in queries if q["type"] == "topic"]
    assert topical and all(q.get("topic") for q in topical)


def test_superseded_and_latest_queries_grade_the_newest_entry_highest() -> None:
    root = ROOT / "picobot_kb"
    updated = {d["path"]: _date(d["updated"] or "1970-01-01")
               for d in _jsonl(root / "corpus.jsonl")}
    labels: dict[str, dict[str, int]] = {}
    for qid, path, grade in _qrels(root / "qrels.tsv"):
        labels.setdefault(qid, {})[path] = grade
    for q in _jsonl(root / "queries.jsonl"):
        rels = labels.get(q["id"], {})
        if q["type"] == "latest":
            journals = sorted((p for p in rels if p.startswith("journal/")), key=updated.get)
            assert journals and rels[journals[-1]] == 3, q["id"]
            assert all(rels[p] < 3 for p in journals[:-1]), q["id"]
        elif q["type"] == "superseded":
            newest_3 = max(updated[p] for p, g in rels.items() if g == 3)
            outdated = [p for p, g in rels.items() if g == 1 and updated[p] < newest_3]
            assert outdated, f"{q['id']} keeps no older, outdated entry graded 1"


def test_corpus_matches_what_kbstore_imports_from_the_workspace(tmp_path: Path) -> None:
    from kbstore import FakeEmbedder, KnowledgeStore

    for name in DATASETS:
        rows = {d["path"]: d for d in _jsonl(ROOT / name / "corpus.jsonl")}
        store = KnowledgeStore.open(tmp_path / f"{name}.sqlite", FakeEmbedder(dim=16),
                                    hype=False)
        try:
            report = store.import_directory(ROOT / name / "workspace")
            assert not report.skipped
            assert store.paths() == sorted(rows)
            for path, row in rows.items():
                doc = store.get(path)
                assert doc is not None
                assert (doc.title, doc.body, doc.tags, doc.topic, doc.doc_type) == (
                    row["title"], row["body"], row["tags"], row["topic"], row["doc_type"]), path
                assert (doc.created, doc.updated) == (row["created"], row["updated"]), path
        finally:
            store.close()

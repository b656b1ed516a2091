"""benchmarks.agent_memory.latest_misses on the harness's tiny dataset
(FakeEmbedder, stores under tmp_path): a hit, and a miss with its reason."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.agent_memory.data import load
from benchmarks.agent_memory.latest_misses import diagnose, markdown
from benchmarks.agent_memory.systems import Stores
from kbstore import FakeEmbedder
from tests.test_agent_memory_harness import write_dataset


def test_a_miss_is_explained_by_the_test_that_fails(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "tiny")
    # A "latest" question whose newest relevant entry (labelled so here)
    # shares no word with it: its evidence and its topical share keep it out.
    with open(root / "queries.jsonl", "a") as fh:
        fh.write(json.dumps({"id": "a9", "kb": "alice", "text": "latest on the kitchen renovation",
                             "type": "latest", "now": "2024-08-10", "split": "dev"}) + "\n")
    with open(root / "qrels.tsv", "a") as fh:
        fh.write("a9\tjournal/2024-08-01-dentist.md\t3\n"
                 "a9\tjournal/2024-07-30-kitchen-done.md\t1\n")
    ds = load(root)
    stores = Stores(ds.docs, tmp_path / "stores", FakeEmbedder(dim=64))
    try:
        records = {r["id"]: r for r in diagnose(ds, stores, ds.queries, {})}
    finally:
        stores.close()
    assert set(records) == {"a2", "a9"}  # latest / superseded questions only
    assert records["a2"]["hit"] and records["a2"]["reason"] == ""
    miss = records["a9"]
    assert not miss["hit"] and miss["latest"]
    assert miss["reason"] == "ratio"  # the first test that fails, in the statement's order
    assert "of the best < 0.6" in miss["detail"] and "topical share 0.00 < 0.4" in miss["detail"]
    assert "kitchen" in miss["topical_terms"] and "latest" not in miss["topical_terms"]
    assert miss["above"][0]["path"] == "journal/2024-07-30-kitchen-done.md"
    assert miss["above"][0]["latest_rank"] == 1
    assert miss["expected"]["path"] == "journal/2024-08-01-dentist.md"
    text = markdown(list(records.values()), "tiny")
    assert "- latest (dev): 0/1" in text and "- latest (test): 1/1" in text
    assert "## a9 (latest, dev)" in text and "Reason: **ratio**" in text

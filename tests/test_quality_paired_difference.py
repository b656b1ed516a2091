"""benchmarks.quality's paired difference: each method row against the
shipped default's row, query by query (mean and standard error), and the
column the markdown report shows for it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.quality_eval import paired_difference
from benchmarks.quality_report import write_markdown


def test_the_mean_and_standard_error_of_per_query_differences() -> None:
    default = {"1": 0.5, "2": 0.2, "3": 0.9, "4": 0.0}
    other = {"1": 0.7, "2": 0.2, "3": 0.6, "4": 0.3}
    diff = paired_difference(other, default)
    diffs = [0.2, 0.0, -0.3, 0.3]
    mean = sum(diffs) / 4
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 3)
    assert diff["n"] == 4
    assert diff["mean"] == pytest.approx(mean)
    assert diff["se"] == pytest.approx(sd / 2)


def test_a_query_missing_from_the_other_run_counts_as_zero() -> None:
    diff = paired_difference({"1": 0.4}, {"1": 0.4, "2": 0.6})
    assert diff["mean"] == pytest.approx(-0.3)
    assert diff["se"] == pytest.approx(0.3)


def test_the_report_shows_each_rows_difference_to_the_default(tmp_path: Path) -> None:
    row = {"ndcg@10": 0.45, "recall@100": 0.7, "mrr@10": 0.6}
    results = {
        "started": "now", "commit": "abc", "embedder": "fake", "depth": 100,
        "tuned_on": "cranfield", "chosen": {"default": {}, "convex": {}},
        "tuning_top": [], "guide": {}, "anchors": {}, "targets": {},
        "datasets": {"cisi": {
            "documents": 3, "queries": 2, "plain_script": {}, "vector_recall@10_vs_exact": {},
            "methods": {
                "hybrid default (shipped DEFAULTS)": {
                    **row, "settings": {}, "vs_default": {"mean": 0.0, "se": 0.0, "n": 2}},
                "FTS5 alone": {**row, "ndcg@10": 0.40, "settings": {"w_vec": 0},
                               "vs_default": {"mean": -0.05, "se": 0.0123, "n": 2}},
            }}},
    }
    path = tmp_path / "quality.md"
    write_markdown(results, path)
    text = path.read_text()
    assert "| FTS5 alone | 0.400 | -0.0500 ± 0.0123 |" in text
    assert "vs default (± SE)" in text

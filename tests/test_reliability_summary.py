"""The harness's one-line summary never hides a problem: a non-empty error
list shows its length and first entries, and problems are counted (the run
then exits non-zero)."""

from __future__ import annotations

from benchmarks.reliability import summary


def test_a_clean_scenario_has_no_problems() -> None:
    line, problems = summary("path:init", {"trials": 100, "corrupt": 0, "half_indexed": 0,
                                           "lost": 0, "failures": [], "resumed": 100})
    assert problems == 0
    assert line.startswith("path:init: {") and '"trials": 100' in line


def test_errors_and_bad_counts_are_shown_and_counted() -> None:
    result = {"trials": 100, "corrupt": 1, "lost": 2, "killed_mid_way": 90,
              "failures": ["trial 7: database disk image is malformed", "trial 9: x", "a", "b"],
              "store_damage": {"orphans": 3}}
    line, problems = summary("path:copy", result)
    assert problems == 1 + 2 + 4 + 1
    assert line.startswith("path:copy: BAD ")
    assert "4: trial 7: database disk image is malformed; trial 9: x; a" in line
    assert '"b"' not in line and "orphans" in line

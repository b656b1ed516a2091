"""benchmarks/vector_layout_ab.py: the one-row-per-document and
one-row-per-(document, kind) forms of search.sql's rescoring shapes, which
read a slot of a concatenated float32 blob with vec_slice, must return the
same rows and scores as today's one-row-per-vector form; and the write A/B
must run every layout and count what it wrote."""

from __future__ import annotations

from pathlib import Path

from benchmarks.vector_layout_ab import DATA_ARMS, VEC0_ARMS, search_ab, write_ab


def test_vec_slice_forms_return_todays_rows(sample_db_with_questions: Path) -> None:
    db = sample_db_with_questions
    result = search_ab(db, dim=64, queries=4, rounds=1)
    assert set(result) >= {"hype KNN (400 candidates) rescored, top 40",
                           "every question of 40 documents (hype_scored)",
                           "exact scan: every document vector, top 50"}
    for name, r in result.items():
        assert r["same_results"], name
        assert r["rows_per_query"] > 0, name  # the comparison saw rows


def test_write_ab_runs_every_layout() -> None:
    result = write_ab(60, rounds=1)
    assert set(result) == {*VEC0_ARMS, *DATA_ARMS}
    assert all(r["cpu_us_per_doc"] > 0 and len(r["runs"]) == 1 for r in result.values())

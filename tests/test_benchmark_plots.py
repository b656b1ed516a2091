"""Without matplotlib (it comes with the ``bench`` extra, not ``dev``), a
benchmark's plot step says which plot it left out and returns: the run's
tables were written before it and the run does not fail at its end."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks import latency_report, quality_report, speed


@pytest.mark.parametrize("draw", [
    lambda path: quality_report.plot({"datasets": {}}, path),
    lambda path: latency_report.plot({}, [], path),
    lambda path: speed.plot({"results": {}}, path),
], ids=["quality", "latency", "speed"])
def test_a_missing_matplotlib_skips_the_plot_with_a_message(
        draw: Callable[[Path], None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    path = tmp_path / "plot.png"
    draw(path)
    assert not path.exists()
    err = capsys.readouterr().err
    assert "matplotlib is not installed" in err and str(path) in err

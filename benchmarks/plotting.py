"""matplotlib for the benchmark plots, when it is installed (the ``bench``
extra): without it a benchmark still writes its tables and says which plot
it left out, instead of failing after the whole run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def pyplot(path: Path) -> Any | None:
    """matplotlib.pyplot on the non-interactive backend, or None (with a line
    on stderr naming the plot not drawn) when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        print(f"matplotlib is not installed (pip install -e '.[bench]'): {path} not drawn",
              file=sys.stderr)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt

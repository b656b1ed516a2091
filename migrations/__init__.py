"""kbstore's schema migrations (installed as ``kbstore.migrations``).

One folder per backend (``sqlite/``, ``postgres/``); each step is a readable
.sql file named ``NNNN_name.sql`` and applied in file-name order. Append
only: never edit or reorder a released step. Each backend's runner applies
the pending steps and their bookkeeping rows in one transaction.
"""

from __future__ import annotations

from pathlib import Path

MIGRATION_SET = "kbstore"
_ROOT = Path(__file__).parent


def steps(backend: str) -> list[tuple[str, Path]]:
    """(name, file) of every step for ``backend``, in order."""
    files = sorted((_ROOT / backend).glob("[0-9][0-9][0-9][0-9]_*.sql"))
    return [(f.stem, f) for f in files]


def schema_version(backend: str) -> int:
    return len(steps(backend))

"""Random bad inputs for every importer."""

from __future__ import annotations

from typing import Any

FUZZERS: dict[str, Any] = {}

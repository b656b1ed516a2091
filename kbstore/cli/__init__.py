"""The ``kbstore`` command line. Each concern registers its commands on the
group in :mod:`kbstore.cli.common` from its own module; errors are one line
on stderr and exit 1."""

from __future__ import annotations

import os
import sys

from .common import cli

__all__ = ["cli", "main"]


def _register() -> None:
    """Import every command module (each registers its commands on import);
    ``main`` imports only the invoked command's (common.COMMAND_MODULES)."""
    from . import admin, content, doctor, exchange, hype_cmd, mcp_cmd  # noqa: F401


def main() -> None:
    try:
        cli(prog_name="kbstore")
    except BrokenPipeError:
        # `kbstore status | head`: the reader left; exit quietly like other tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(141) from None

"""Every CLI command is documented: it has help text, and README.md's command
table has a row for it (the sqlite-utils docs test, for kbstore)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from kbstore.cli import _register, cli

_register()
README = Path(__file__).resolve().parents[2] / "README.md"
# A row of the command table: | `kbstore NAME ...` | what it does |
ROW = re.compile(r"^\|\s*`kbstore ([a-z][a-z0-9-]*)(?:[ `][^|]*)?\|\s*(.*?)\s*\|\s*$")


def command_paths(group: click.Group = cli, prefix: tuple[str, ...] = ()
                  ) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name, command in sorted(group.commands.items()):
        out.append(((*prefix, name), command))
        if isinstance(command, click.Group):
            out += command_paths(command, (*prefix, name))
    return out


def readme_table() -> dict[str, str]:
    """command name -> its description in README.md's command table."""
    rows = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line.replace("\\|", "/"))
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_the_readme_has_a_command_table() -> None:
    rows = readme_table()
    assert {"init", "search", "import"} <= set(rows), rows


@pytest.mark.parametrize("path", [p for p, _ in command_paths()], ids="-".join)
def test_command_has_help_text(path: tuple[str, ...]) -> None:
    command = dict(command_paths())[path]
    assert (command.help or "").strip(), f"kbstore {' '.join(path)} has no help text"
    assert (command.get_short_help_str() or "").strip()


@pytest.mark.parametrize("path", [p for p, _ in command_paths()], ids="-".join)
def test_command_is_in_the_readme_table(path: tuple[str, ...]) -> None:
    rows = readme_table()
    name = " ".join(path)
    assert name in rows, f"README.md's command table has no row for `kbstore {name}`"
    assert rows[name].strip(), f"README.md says nothing about `kbstore {name}`"

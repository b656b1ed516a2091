"""A file name holding a newline, a carriage return or an escape sequence is
a legal document path (stored as it is), but a report line that names it
must stay ONE line: every CLI report and log line shows it escaped."""

from __future__ import annotations

import sqlite3
from pathlib import Path

NAMES = ("new\nline.md", "carriage\rreturn.md", "esc\x1b[2Kape.md")
SHOWN = [repr(f"projects/{n}") for n in NAMES]


def _workspace(root: Path) -> Path:
    folder = root / "ws" / "projects"
    folder.mkdir(parents=True)
    (folder / "plain.md").write_text("---\ntitle: Plain\n---\nplain note\n", encoding="utf-8")
    for name in NAMES:
        (folder / name).write_text(f"---\ntitle: {name[:3]}\n---\nbody\n", encoding="utf-8")
    return root / "ws"


def _one_line_each(text: str) -> None:
    """No raw control character but the line ends, and each name whole on a line."""
    assert not any(c in text for c in "\r\x1b"), text
    for name in NAMES:
        assert f"projects/{name}" not in text, text
    lines = text.splitlines()
    for name in ("line.md", "return.md", "ape.md"):
        for line in lines:
            if name in line:
                assert repr(f"projects/{next(n for n in NAMES if n.endswith(name))}") in line, line


def test_skipped_files_print_on_one_line_also_in_the_verbose_log(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = _workspace(tmp_path)
    for name in NAMES:  # NUL bytes: binary, skipped with the reason
        (ws / "projects" / name).write_bytes(b"bin\x00ary")
    db = tmp_path / "kb.sqlite"
    result = run_cli("-v", "import", "--db", db, ws, "--embedder", "fake", "--no-hype")
    assert result.exit_code == 0, result.stderr
    _one_line_each(result.stdout + result.stderr)
    for shown in SHOWN:  # the report and the log line each name it
        assert result.stderr.count(shown) == 2, result.stderr
        assert f"kbstore: skipped {shown}: binary content (NUL bytes)" in result.stderr


def test_deletions_of_import_and_copy_prune_print_on_one_line(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = _workspace(tmp_path)
    src, dst = tmp_path / "src.sqlite", tmp_path / "dst.sqlite"
    for i in range(6):  # enough documents that deleting three is not refused as a mass removal
        (ws / "projects" / f"keep-{i}.md").write_text(f"keep {i}\n", encoding="utf-8")
    assert run_cli("import", "--db", src, ws, "--embedder", "fake", "--no-hype").exit_code == 0
    assert run_cli("copy", src, dst).exit_code == 0
    for name in NAMES:
        (ws / "projects" / name).unlink()
    pruned = run_cli("-v", "import", "--db", src, ws, "--prune", "--no-hype")
    assert pruned.exit_code == 0, pruned.stderr
    _one_line_each(pruned.stdout + pruned.stderr)
    assert "deleting 3 document(s) whose files are gone: " + ", ".join(sorted(SHOWN)) \
        in pruned.stderr
    copied = run_cli("-v", "copy", src, dst, "--prune")
    assert copied.exit_code == 0, copied.stderr
    _one_line_each(copied.stdout + copied.stderr)
    assert "deleting 3 document(s) the source does not have: " + ", ".join(sorted(SHOWN)) \
        in copied.stderr


def test_doctor_samples_print_on_one_line(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = _workspace(tmp_path)
    db = tmp_path / "kb.sqlite"
    assert run_cli("import", "--db", db, ws, "--embedder", "fake", "--no-hype").exit_code == 0
    with sqlite3.connect(db) as conn:  # tags edited outside kbstore: reported by path
        conn.execute("UPDATE documents SET tags = '[1, \"Y\"]' WHERE path != 'projects/plain.md'")
    conn.close()
    for args in ((), ("--fix",)):
        result = run_cli("doctor", "--db", db, *args)
        assert result.exit_code == 1
        _one_line_each(result.stdout + result.stderr)
        line = next(x for x in result.stdout.splitlines() if x.startswith("FAIL   invalid_tags"))
        assert line.endswith(f"(e.g. {', '.join(sorted(SHOWN))}) [not fixable by --fix]"), line
    assert f"not a list of strings: {', '.join(sorted(SHOWN))})" in result.stdout

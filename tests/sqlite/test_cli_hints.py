"""What a new user is told when a command did less than they expected."""

from __future__ import annotations

from pathlib import Path

from kbstore import KnowledgeStore


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "projects").mkdir(parents=True)
    (ws / "projects" / "deploy.md").write_text("---\ntitle: Deploy\n---\nship it\n",
                                               encoding="utf-8")
    (ws / "projects" / "bread.md").write_text("---\ntitle: Bread\n---\nknead it\n",
                                              encoding="utf-8")
    return ws


def test_import_says_why_hype_is_pending_and_what_to_do(run_cli, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The suite's litellm.completion fails as an unreachable LLM would.
    KnowledgeStore.open(db_path, "fake").close()
    result = run_cli("import", "--db", db_path, _workspace(db_path.parent), "--hype")
    assert result.exit_code == 0
    assert "HyPE pending 2" in result.stdout
    assert (f"HyPE pending: the LLM gave no questions for 2 document(s) (no API key set? "
            f"the model unreachable?); they are stored and searchable without them. Retry: "
            f"kbstore hype --db {db_path} --pending; skip HyPE: --no-hype or KBSTORE_HYPE=0"
            in result.stderr)
    quiet = run_cli("import", "--db", db_path, _workspace(db_path.parent / "b"), "--no-hype")
    assert quiet.exit_code == 0 and "HyPE pending:" not in quiet.stderr


def test_import_of_a_folder_without_section_folders_says_so(run_cli, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    notes = db_path.parent / "notes"
    (notes / "ideas").mkdir(parents=True)
    (notes / "todo.md").write_text("# todo\nbuy bread\n", encoding="utf-8")
    (notes / "ideas" / "one.md").write_text("an idea\n", encoding="utf-8")
    result = run_cli("import", "--db", db_path, notes, "--no-hype", "--embedder", "fake")
    assert result.exit_code == 0
    assert result.stdout.startswith("added 0, updated 0, unchanged 0, deleted 0")
    assert (f"note: {notes} has none of the folders self/, user/, projects/, domains/, "
            "journal/, skills/ (nor knowledge/ holding them), so there is nothing to import "
            "from it" in result.stderr)
    # A workspace with a section folder, even an empty one, gets no note.
    (notes / "journal").mkdir()
    again = run_cli("import", "--db", db_path, notes, "--no-hype")
    assert again.exit_code == 0 and "note:" not in again.stderr


def test_search_in_a_topic_no_document_has_says_so(run_cli, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    with KnowledgeStore.open(db_path, "fake", hype=False) as store:
        store.upsert("projects/deploy.md", title="Deploy", body="ship it with a canary")
    typo = run_cli("search", "--db", db_path, "canary", "--topic", "project")
    assert typo.exit_code == 0 and typo.stdout.strip() == "no results"
    assert typo.stderr.strip() == ("note: no document has topic 'project' (picobot's topics: "
                                   "self, user, projects, domains, journal, skills)")
    right = run_cli("search", "--db", db_path, "canary", "--topic", "projects")
    assert "projects/deploy.md" in right.stdout and "note:" not in right.stderr


def test_export_force_never_replaces_a_pipe_or_device(run_cli, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`export --force /dev/full` (as root) used to rename the export over the
    device node, leaving a regular file where /dev/full was."""
    import os
    import stat

    with KnowledgeStore.open(db_path, "fake", hype=False) as store:
        store.upsert("projects/deploy.md", title="Deploy", body="ship it with a canary")
    pipe = db_path.parent / "pipe"
    os.mkfifo(pipe)
    result = run_cli("export", "--db", db_path, "--format", "jsonl", pipe, "--force")
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"Error: {pipe} is not a regular file (a device, pipe "
                                     "or socket); export writes a new file ('-' writes to "
                                     "stdout)")
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["kb.sqlite", "pipe"]


def test_a_file_name_with_control_characters_cannot_rewrite_a_listing(
        run_cli, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = _workspace(db_path.parent)
    (ws / "projects" / "third.md").write_text("third note\n", encoding="utf-8")
    evil = ws / "projects" / "evil\rdeleted 0 document(s)\x1b[2K.md"
    evil.write_text("an evil name\n", encoding="utf-8")
    assert run_cli("import", "--db", db_path, ws, "--no-hype", "--embedder", "fake").exit_code == 0
    hits = run_cli("search", "--db", db_path, "evil name", "--limit", "1")
    assert hits.stdout.splitlines()[0].split("  ")[1] == (
        "'projects/evil\\rdeleted 0 document(s)\\x1b[2K.md'")
    evil.unlink()
    result = run_cli("import", "--db", db_path, ws, "--no-hype")
    assert result.exit_code == 0
    assert ("deleting 1 document(s) whose files are gone: "
            "'projects/evil\\rdeleted 0 document(s)\\x1b[2K.md'\n") in result.stderr
    assert "\r" not in result.stderr and "\x1b" not in result.stderr


def test_a_query_starting_with_a_dash_is_told_to_go_after_double_dash(run_cli, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    KnowledgeStore.open(db_path, "fake").close()
    result = run_cli("search", "--db", db_path, "-zzz")
    assert result.exit_code == 2
    assert "No such option" in result.stderr
    assert "A query starting with '-' goes after '--': kbstore search -- -zzz" in result.stderr
    # and the way it names works
    ok = run_cli("search", "--db", db_path, "--", "-zzz")
    assert ok.exit_code == 0, ok.stderr

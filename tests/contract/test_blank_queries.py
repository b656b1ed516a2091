"""A query without a single letter, digit or symbol -- only punctuation,
spaces and control characters ("???", "...", "-- --") -- is an empty query:
the same refusal as "" through the API, the CLI and the MCP tool, on every
backend (it used to run, matching whatever the embedder made of "???")."""

from __future__ import annotations

import pytest

from kbstore import EmptyQueryError, FakeEmbedder, KnowledgeStore
from kbstore.mcp_schemas import ToolArgumentError
from kbstore.mcp_server import KnowledgeService

BLANK = ["???", "...", "-- --", "!!", "\u3000¿?", "«»", "( ) [ ]", ".\x00.", "\u200b"]


@pytest.fixture
def filled(location: str) -> str:
    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as store:
        store.upsert("projects/deploy.md", title="Deploy", body="ship it with a canary")
    return location


def _refusal(call) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(EmptyQueryError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("query", BLANK)
def test_punctuation_only_is_refused_as_empty_by_search(filled: str, query: str) -> None:
    with KnowledgeStore.open(filled, read_only=True) as store:
        assert _refusal(lambda: store.search(query)) == _refusal(lambda: store.search(""))
        assert _refusal(lambda: store.shell_script(query)) == _refusal(
            lambda: store.shell_script(""))


@pytest.mark.parametrize("query", ["C++", "$", "🎉", "-x-", "?a", "3.14"])
def test_a_letter_digit_or_symbol_still_searches(filled: str, query: str) -> None:
    with KnowledgeStore.open(filled, read_only=True) as store:
        assert isinstance(store.search(query), list)


def test_the_cli_gives_the_empty_query_error(run_cli, filled: str) -> None:  # type: ignore[no-untyped-def]
    empty = run_cli("search", "--db", filled, "")
    assert empty.exit_code == 1 and "search query is empty" in empty.stderr
    for query in ("???", "...", "-- --"):
        result = run_cli("search", "--db", filled, "--", query)  # "--" before "-- --"
        assert (result.exit_code, result.stdout, result.stderr) == (
            empty.exit_code, empty.stdout, empty.stderr)


def test_the_mcp_tool_gives_the_empty_query_error(filled: str) -> None:
    with KnowledgeStore.open(filled, read_only=True) as store:
        service = KnowledgeService(store)
        with pytest.raises(ToolArgumentError) as empty:
            service.call("search", {"query": " "})
        for query in ("???", "...", "-- --"):
            with pytest.raises(ToolArgumentError) as blank:
                service.call("search", {"query": query})
            assert str(blank.value) == str(empty.value) == "'query' must not be empty"


def test_picobot_answers_a_punctuation_query_as_an_empty_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kbstore.picobot import KnowledgeBase

    kb = KnowledgeBase(workspace=tmp_path / "ws", store=KnowledgeStore.open(
        tmp_path / "kb.sqlite", FakeEmbedder(64), hype=False))
    assert kb.search("???") == kb.search("") == "No results: the search query is empty."


def test_a_query_starting_with_a_dash_needs_double_dash_and_says_so(run_cli, filled: str) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("search", "--db", filled, "-foo")
    assert result.exit_code == 2
    assert "No such option" in result.stderr  # click's own error ...
    assert "kbstore search -- -foo" in result.stderr  # ... and how to search for it
    assert "Traceback" not in result.output
    passed = run_cli("search", "--db", filled, "--", "-x is a flag")
    assert passed.exit_code == 0 and passed.stderr == ""
    assert passed.stdout == "no results\n" or passed.stdout.startswith(" 1. ")
    assert "--" in run_cli("search", "--help").stdout.split("Options:")[0]  # the help says it

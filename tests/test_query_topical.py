"""Query analysis of "latest" questions: the topical words the search
statement's latest_topical test scores (backend-neutral, no database)."""

from __future__ import annotations

from kbstore.query import DEFAULTS, analyse, resolve_settings, stored_defaults


def _request(text: str, **settings: object):  # type: ignore[no-untyped-def]
    return analyse(text, None, now="2024-06-19", settings=resolve_settings({}, settings))


def test_topical_words_are_the_full_text_words_without_the_cue_words() -> None:
    request = _request("What's the latest on Maya's boiler these days?")
    assert request.latest
    assert "latest" in request.fts_terms and "days" in request.fts_terms
    assert request.topical_terms == tuple(t for t in request.fts_terms
                                          if t not in {"latest", "these", "days"})
    assert "boiler" in request.topical_terms and "maya" in request.topical_terms


def test_no_topical_words_without_a_latest_question_or_with_the_test_off() -> None:
    assert _request("What did Maya say about the boiler?").topical_terms == ()
    assert _request("What's the latest on the boiler?", latest_topical=0).topical_terms == ()
    assert _request("the boiler", latest=True).topical_terms == ("boiler",)


def test_a_stored_latest_top_of_5_is_the_old_default_and_gives_way() -> None:
    assert DEFAULTS["latest_top"] == 8
    assert "latest_top" not in stored_defaults({"latest_top": 5}, None)
    assert stored_defaults({"latest_top": 3}, None)["latest_top"] == 3

"""Bounds on work-driving inputs (REQ-BOUND-*) and the bounded document window."""

from __future__ import annotations

import pytest

from adapters.mcp.formatting import get_body, multi_get_body
from domain.bounds import (
    MAX_PATTERN_CHARS,
    MAX_PATTERN_WILDCARDS,
    MAX_REFERENCE_CHARS,
    check_pattern,
    check_reference,
)
from domain.errors import INVALID_ARGUMENT, QmdError
from domain.lexquery import MAX_QUERY_CHARS, MAX_QUERY_TERMS, check_query
from domain.text import slice_lines, window_lines


def _refused(call: object, *args: str) -> str:
    with pytest.raises(QmdError) as raised:
        call(*args)  # type: ignore[operator]
    assert raised.value.code == INVALID_ARGUMENT
    return raised.value.message


def test_queries_are_bounded_in_characters_and_terms() -> None:
    check_query("a b " * (MAX_QUERY_TERMS // 2))
    check_query('"' + "a " * 500 + '"')  # a phrase is one term
    assert "at most 128" in _refused(check_query, "a b " * 1000)
    assert f"at most {MAX_QUERY_CHARS}" in _refused(check_query, "x" * (MAX_QUERY_CHARS + 1))
    assert _refused(check_query, "-a " * 200).startswith("query has too many terms: 200")


def test_patterns_are_bounded_in_characters_and_wildcards() -> None:
    check_pattern("*a" * MAX_PATTERN_WILDCARDS)
    message = _refused(check_pattern, "*a" * (MAX_PATTERN_WILDCARDS + 1))
    assert message == "pattern is too complex: 65 wildcard characters (at most 64)"
    assert f"at most {MAX_PATTERN_CHARS}" in _refused(check_pattern, "x" * 600_000)


def test_references_are_bounded() -> None:
    check_reference("a/" * (MAX_REFERENCE_CHARS // 2))
    assert "at most 4096" in _refused(check_reference, "x" * (MAX_REFERENCE_CHARS + 1))


BODY = "\n".join(f"line {n:05d}" for n in range(1, 1001))  # 10 characters a line


def test_a_window_that_fits_is_the_plain_slice() -> None:
    for start, count in [(None, None), (5, 3), (999, 10), (2000, 5), (1, -2), (None, 0)]:
        window = window_lines(BODY, start, count, 10**9)
        assert window.text == slice_lines(BODY, start, count)
        assert not window.truncated


def test_a_window_is_cut_at_a_line_boundary_and_says_where_to_go_on() -> None:
    window = window_lines(BODY, 11, None, 105)  # 9 lines and 8 separators = 98 characters
    assert window.text.split("\n") == [f"line {n:05d}" for n in range(11, 20)]
    assert (window.first, window.last, window.total, window.truncated) == (11, 19, 1000, True)
    text = get_body(BODY, 11, None, True, 105)  # "11: " prefixes count: 7 lines fit
    assert text == "\n".join(f"{n}: line {n:05d}" for n in range(11, 18)) + (
        "\n\n[TRUNCATED: lines 11-17 of 1000 shown (at most 105 characters of a document "
        "per reply); continue with fromLine: 18]"
    )


def test_one_line_longer_than_the_budget_shows_its_start() -> None:
    body = "x" * 1000 + "\nnext"
    text = get_body(body, None, None, False, 100)
    assert text == "x" * 100 + (
        "\n\n[TRUNCATED: line 1 is longer than 100 characters; only its start is shown; "
        "continue with fromLine: 2]"
    )


def test_small_documents_come_back_unchanged() -> None:
    assert get_body(BODY, None, None, False) == BODY
    assert multi_get_body(BODY, 3, False) == (
        "line 00001\nline 00002\nline 00003\n\n[... truncated 997 more lines]"
    )
    assert multi_get_body(BODY, None, True, 30) == (
        "1: line 00001\n2: line 00002\n\n[TRUNCATED: lines 1-2 of 1000 shown "
        "(at most 30 characters of a document per reply); continue with fromLine: 3]"
    )
    assert get_body(BODY, None, None, True) == "\n".join(
        f"{n}: line {n:05d}" for n in range(1, 1001)
    )

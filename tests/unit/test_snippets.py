# ruff: noqa: E501  (frozen outputs of the original are kept verbatim)
"""extract_snippet against frozen outputs of the original's extractSnippet (QMD 2.8.3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.text import extract_intent_terms, extract_snippet

PAD = "\n".join(f"pad line {i + 1}" for i in range(300))
BIG = (
    "# Large Reference Manual\n\nIntro.\n\nParagraph 1 discusses indexing in the context of "
    "search. Engines build inverted indexes and ranks them with BM25. "
    + "More words about trade-offs between latency and recall. " * 4
    + "\n\n## Section 2: Ranking\n"
    + "filler\n" * 234
)

# (body, query, max_len, chunk_pos, chunk_len, intent, line, snippet text)
ORIGINAL = [
    (
        "# Title\nfoo bar\nbaz",
        "bar",
        300,
        None,
        None,
        None,
        2,
        "@@ -1,3 @@ (0 before, 0 after)\n# Title\nfoo bar\nbaz",
    ),
    (
        "# Title\nfoo bar\nbaz",
        "nomatch",
        300,
        None,
        None,
        None,
        1,
        "@@ -1,3 @@ (0 before, 0 after)\n# Title\nfoo bar\nbaz",
    ),
    (
        "one\ntwo\nthree\nfour\nfive\nsix",
        "FOUR five",
        300,
        None,
        None,
        None,
        4,
        "@@ -3,4 @@ (2 before, 0 after)\nthree\nfour\nfive\nsix",
    ),
    (
        PAD + "\nMARKER here\n" + PAD,
        "marker",
        300,
        None,
        None,
        None,
        301,
        "@@ -300,4 @@ (299 before, 298 after)\npad line 300\nMARKER here\npad line 1\npad line 2",
    ),
    (
        BIG,
        "BM25",
        300,
        None,
        None,
        None,
        5,
        "@@ -4,4 @@ (3 before, 235 after)\n\nParagraph 1 discusses indexing in the context of search. Engines build inverted indexes and ranks them with BM25. More words about trade-offs between latency and recall. More words about trade-offs between latency and recall. More words about trade-offs between latency and recall. More words abo...",
    ),
    (
        BIG,
        "BM25",
        500,
        None,
        None,
        None,
        5,
        "@@ -4,4 @@ (3 before, 235 after)\n\nParagraph 1 discusses indexing in the context of search. Engines build inverted indexes and ranks them with BM25. More words about trade-offs between latency and recall. More words about trade-offs between latency and recall. More words about trade-offs between latency and recall. More words about trade-offs between latency and recall. \n\n## Section 2: Ranking",
    ),
    ("a\nb\nc", "c", 5, None, None, None, 3, "@@ -2,2 @@ (1 before, 0 after)\nb\nc"),
    ("x😀😀😀😀 hit", "hit", 6, None, None, None, 1, "@@ -1,1 @@ (0 before, 0 after)\nx😀..."),
    (
        "alpha\nbeta API\ngamma sql\ndelta",
        "zzz",
        300,
        None,
        None,
        "looking for the SQL notes",
        3,
        "@@ -2,3 @@ (1 before, 0 after)\nbeta API\ngamma sql\ndelta",
    ),
    (
        "alpha\nbeta API\ngamma sql\ndelta",
        "alpha",
        300,
        None,
        None,
        "API docs",
        1,
        "@@ -1,3 @@ (0 before, 1 after)\nalpha\nbeta API\ngamma sql",
    ),
    (
        PAD,
        "line 250",
        300,
        2000,
        400,
        None,
        156,
        "@@ -155,4 @@ (154 before, 142 after)\nne 155\npad line 156\npad line 157\npad line 158",
    ),
    (
        PAD,
        "nothing",
        300,
        2000,
        400,
        None,
        163,
        "@@ -162,4 @@ (161 before, 135 after)\npad line 162\npad line 163\npad line 164\npad line 165",
    ),
    (
        PAD,
        "nothing",
        300,
        0,
        400,
        None,
        1,
        "@@ -1,3 @@ (0 before, 297 after)\npad line 1\npad line 2\npad line 3",
    ),
    (
        PAD,
        "line 5",
        300,
        0,
        100,
        None,
        5,
        "@@ -4,4 @@ (3 before, 293 after)\npad line 4\npad line 5\npad line 6\npad line 7",
    ),
    (
        "\n\n\n\n" + "x" * 500 + "\nhit",
        "zz",
        300,
        200,
        10,
        None,
        5,
        "@@ -5,1 @@ (4 before, 1 after)\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    ),
    ("short", "short", 300, 9999, 10, None, 1, "@@ -1,1 @@ (0 before, 0 after)\nshort"),
    ("", "", 300, None, None, None, 1, "@@ -1,1 @@ (0 before, 0 after)\n"),
    (
        "tab\there\xa0nbsp",
        "here\xa0nbsp",
        300,
        None,
        None,
        None,
        1,
        "@@ -1,1 @@ (0 before, 0 after)\ntab\there\xa0nbsp",
    ),
]


@pytest.mark.parametrize(
    ("body", "query", "max_len", "chunk_pos", "chunk_len", "intent", "line", "text"), ORIGINAL
)
def test_matches_original(
    body: str,
    query: str,
    max_len: int,
    chunk_pos: int | None,
    chunk_len: int | None,
    intent: str | None,
    line: int,
    text: str,
) -> None:
    snippet = extract_snippet(body, query, max_len, chunk_pos, chunk_len, intent)
    assert (snippet.line, snippet.text) == (line, text)


def test_header_of_the_recorded_run() -> None:
    # original-qmd-run.md §4.3: best line 5, header `@@ -4,4 @@ (3 before, 235 after)`.
    snippet = extract_snippet(BIG, "BM25")
    assert snippet.line == 5
    assert snippet.text.startswith("@@ -4,4 @@ (3 before, 235 after)\n\nParagraph 1")
    assert snippet.text.endswith("...")
    assert len(snippet.text.split("\n", 1)[1]) == 300


def test_absolute_line_after_300_pad_lines() -> None:
    snippet = extract_snippet(PAD + "\nMARKER here\n" + PAD, "marker")
    assert snippet.line == 301
    assert snippet.text.startswith("@@ -300,4 @@ (299 before, 298 after)")


def test_truncation_never_halves_an_astral_character() -> None:
    # JS would cut "😀" in half at 4 UTF-16 units; the whole character is dropped instead.
    snippet = extract_snippet("x😀😀 hit", "hit", max_len=7)
    assert snippet.text.split("\n", 1)[1] == "x😀..."


@pytest.mark.parametrize(
    ("intent", "terms"),
    [
        ("Looking for the API docs", ["api", "docs"]),
        ('"SQL" & CPU!', ["sql", "cpu"]),
        ("what is a CDN, about caching?", ["cdn", "caching"]),
        ("  ", []),
        ("e.g. x", ["e.g"]),
        ("l'école (été)", ["l'école", "été"]),
    ],
)
def test_intent_terms(intent: str, terms: list[str]) -> None:
    assert extract_intent_terms(intent) == terms


@given(st.text(), st.text(), st.integers(10, 600))
def test_header_counts_add_up(body: str, query: str, max_len: int) -> None:
    snippet = extract_snippet(body, query, max_len)
    header, _, text = snippet.text.partition("\n")
    start, count = header.split(" @@")[0][4:].split(",")
    before = int(header.split("(")[1].split(" before")[0])
    after = int(header.split(", ")[1].split(" after")[0])
    total = body.count("\n") + 1
    assert before == int(start) - 1
    assert before + int(count) + after == total
    assert 1 <= snippet.line <= total
    assert int(start) <= snippet.line < int(start) + int(count)
    assert len(text) <= max_len

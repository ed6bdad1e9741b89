"""Titles, line numbering, contexts and content hashes."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.text import add_line_numbers, content_hash, extract_title, resolve_context, slice_lines


@pytest.mark.parametrize(
    ("body", "filename", "title"),
    [
        # Cases checked against the original's extractTitle.
        ("# Hi\n", "a.md", "Hi"),
        ("Setext\n======\n", "notes/setext.md", "setext"),
        ("---\ntitle: X\n---\n# Heading After Frontmatter\n", "fm.md", "Heading After Frontmatter"),
        ("plain", "notes/no heading.md", "no heading"),
        ("# Notes\n## Real\n", "n.md", "Real"),
        ("## Notes\ntext", "n.md", "Notes"),
        ("# 📝 Notes\n", "n.md", "📝 Notes"),
        ("# 📝 Notes\nintro\n## Week 1\n", "n.md", "Week 1"),
        ("#\n\nfoo", "x.md", "foo"),
        ("# T\r\nx", "c.md", "T"),
        ("# T", "x.markdown", "x"),
        ("#+title: Org T\n", "a.org", "Org T"),
        ("* H\n", "a.org", "H"),
        ("x", "README", "README"),
        ("x", "a.b/c", "a"),
        ("###  H3\n## H2", "x.MD", "H2"),
        ("intro\n  # indented\n#NoSpace\n## Second Level  \n", "y.md", "Second Level"),
        ("# Title", "special-chars (v2) & more.md", "Title"),
        ("no heading", "notes/中文 笔记.md", "中文 笔记"),
        ("", "archive.tar.md", "archive.tar"),
    ],
)
def test_extract_title(body: str, filename: str, title: str) -> None:
    assert extract_title(body, filename) == title


def test_content_hash_is_sha256_of_utf8() -> None:
    body = "# Café 中文\n"
    assert content_hash(body) == hashlib.sha256(body.encode("utf-8")).hexdigest()
    assert len(content_hash("")) == 64


@pytest.mark.parametrize(
    ("text", "start", "expected"),
    [
        ("a\nb", 1, "1: a\n2: b"),
        ("", 500, "500: "),
        ("x\n", 7, "7: x\n8: "),
        (
            "@@ -4,4 @@ (3 before, 235 after)\n\nbody",
            5,
            "5: @@ -4,4 @@ (3 before, 235 after)\n6: \n7: body",
        ),
        ("a\r\nb", 1, "1: a\r\n2: b"),
    ],
)
def test_add_line_numbers(text: str, start: int, expected: str) -> None:
    assert add_line_numbers(text, start) == expected


THIRTEEN = "\n".join(f"line {i}" for i in range(1, 14))


@pytest.mark.parametrize(
    ("from_line", "max_lines", "expected"),
    [
        (None, None, THIRTEEN),
        (3, 2, "line 3\nline 4"),
        (0, 1, "line 1"),
        (-5, 1, "line 1"),
        (12, None, "line 12\nline 13"),
        (12, 10, "line 12\nline 13"),
        (500, None, ""),
        (500, 5, ""),
        (None, 2, "line 1\nline 2"),
        (1, 0, ""),
    ],
)
def test_slice_lines(from_line: int | None, max_lines: int | None, expected: str) -> None:
    assert slice_lines(THIRTEEN, from_line, max_lines) == expected


def test_slice_past_end_numbers_as_requested_line() -> None:
    assert add_line_numbers(slice_lines(THIRTEEN, 500, None), 500) == "500: "


CONTEXTS = {
    "": "Project handbook",
    "engineering/api": "HTTP API documentation",
    "engineering": "Engineering notes",
    "/work": "Work",
}


@pytest.mark.parametrize(
    ("global_context", "path", "expected"),
    [
        (None, "README.md", "Project handbook"),
        (
            None,
            "engineering/api/authentication.md",
            "Project handbook\n\nEngineering notes\n\nHTTP API documentation",
        ),
        ("Global", "engineering/x.md", "Global\n\nProject handbook\n\nEngineering notes"),
        (None, "workshop.md", "Project handbook\n\nWork"),
        (
            None,
            "/engineering/api.md",
            "Project handbook\n\nEngineering notes\n\nHTTP API documentation",
        ),
        ("", "other.md", "Project handbook"),
    ],
)
def test_resolve_context(global_context: str | None, path: str, expected: str) -> None:
    assert resolve_context(global_context, CONTEXTS, path) == expected


def test_resolve_context_none_and_root_slash() -> None:
    assert resolve_context(None, {}, "a.md") is None
    assert resolve_context("", {"sub": "S"}, "a.md") is None
    assert resolve_context(None, {"/": "root"}, "deep/a.md") == "root"
    assert resolve_context("G", {}, "a.md") == "G"


@given(st.text(), st.integers(-5, 50), st.integers(0, 50))
def test_slice_is_a_run_of_body_lines(body: str, from_line: int, max_lines: int) -> None:
    lines = body.split("\n")
    sliced = slice_lines(body, from_line, max_lines)
    start = max(1, from_line) - 1
    assert sliced == "\n".join(lines[start : start + max_lines])
    numbered = add_line_numbers(sliced, max(1, from_line))
    assert numbered.startswith(f"{max(1, from_line)}: ")

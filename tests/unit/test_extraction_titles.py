"""Which metadata titles name no document (REQ-EXTRACT-011): producers' defaults, print jobs,
file names and paths give way to a title found in the document itself."""

from __future__ import annotations

import pytest

from domain.extraction import placeholder_title


@pytest.mark.parametrize(
    "title",
    [
        "",
        "   ",
        "Microsoft Word - Kalman15.doc",
        "Microsoft PowerPoint - q3 review",
        "untitled",
        "Untitled-1",
        "Untitled document",
        "Document1",
        "Document 3",
        "PowerPoint Presentation",
        "Presentation1",
        "Slide 1",
        "Slide1",
        "Book1",
        "Title",
        "No title",
        "draft_v2.doc",
        "Kalman15.pdf",
        "main.dvi",
        "C:\\Users\\pat\\Desktop\\report",
        "/home/pat/thesis.tex",
        "1234",
        "--- * ---",
    ],
)
def test_placeholders(title: str) -> None:
    assert placeholder_title(title)


@pytest.mark.parametrize(
    "title",
    [
        "Kalman Filtering for Tide Gauges",
        "The Document Object Model",
        "Slides from the harbour talk",
        "Presentation skills 101",
        "Pages of history",
        "Book of Tides",
        "Q3",
        "Microsoft Word internals explained",
    ],
)
def test_titles(title: str) -> None:
    assert not placeholder_title(title)

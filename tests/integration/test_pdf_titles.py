"""A PDF title set over two lines is one title (issue 36): through the real parser in the
worker process, for a title found on the first page and for one in the Info dictionary.
REQ-EXTRACT-003, REQ-EXTRACT-011."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.extract.extractor import WorkerExtractor
from domain.extraction import Extracted
from tooling.docgen import write_pdf

BODY = ["Body text of the report runs on here", "and more body text follows", "to the end"]


@pytest.fixture(scope="module")
def extractor() -> Iterator[WorkerExtractor]:
    worker = WorkerExtractor(timeout_s=60)
    yield worker
    worker.close()


def _title(extractor: WorkerExtractor, path: Path) -> object:
    outcome = extractor.extract(str(path), "pdf")
    assert isinstance(outcome, Extracted), outcome
    return outcome.metadata.get("title")


def test_a_title_wrapped_over_two_lines_is_joined(
    tmp_path: Path, extractor: WorkerExtractor
) -> None:
    """The title lines are set at font size 1 and scaled to 24 pt by the text matrix, as
    many producers write them: by the font size alone every line looked alike, and the
    title was the first line only ("Harbour Survey of the Northern")."""
    pdf = write_pdf(
        tmp_path / "t.pdf",
        [BODY],
        title="untitled",
        heading=["Harbour Survey of the Northern", "Coastline and Its Tides"],
    )
    assert _title(extractor, pdf) == "Harbour Survey of the Northern Coastline and Its Tides"


def test_an_info_title_with_a_line_break_is_one_line(
    tmp_path: Path, extractor: WorkerExtractor
) -> None:
    pdf = write_pdf(tmp_path / "i.pdf", [BODY], title="Harbour Survey of the\r\nNorthern Coast")
    assert _title(extractor, pdf) == "Harbour Survey of the Northern Coast"

"""One contract for every DocumentExtractor: the worker-process adapter, the in-process one
(the benchmark's) and the counting fake. Real files come from tooling/docgen.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.extract.extractor import InProcessExtractor, WorkerExtractor
from domain.extraction import Extracted, ExtractionFailure, SourceDigest
from domain.ports import DocumentExtractor
from tests.fakes import FakeExtractor
from tooling.docgen import write_pdf, write_pptx, write_xlsx


@pytest.fixture(params=["worker", "in-process", "fake"])
def made(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, DocumentExtractor, Path]]:
    pdf = write_pdf(tmp_path / "a.pdf", [["alpha words"], None])
    extractor: DocumentExtractor
    if request.param == "worker":
        extractor = WorkerExtractor(timeout_s=60)
    elif request.param == "in-process":
        extractor = InProcessExtractor()
    else:
        extractor = FakeExtractor({str(pdf): "alpha words\f"})
    try:
        yield str(request.param), extractor, pdf
    finally:
        extractor.close()


def test_digest_is_a_stable_content_hash(made: tuple[str, DocumentExtractor, Path]) -> None:
    _, extractor, pdf = made
    first, again = extractor.digest(str(pdf)), extractor.digest(str(pdf))
    assert isinstance(first, SourceDigest) and first == again
    assert len(first.sha256) == 64 and first.size > 0


def test_a_missing_file_is_a_failure_not_an_exception(
    made: tuple[str, DocumentExtractor, Path],
) -> None:
    _, extractor, pdf = made
    outcome = extractor.digest(str(pdf.with_name("gone.pdf")))
    assert isinstance(outcome, ExtractionFailure) and outcome.reason == "unreadable"


def test_pages_become_headings_and_empty_pages_are_listed(
    made: tuple[str, DocumentExtractor, Path],
) -> None:
    _, extractor, pdf = made
    outcome = extractor.extract(str(pdf), "pdf")
    assert isinstance(outcome, Extracted)
    assert outcome.text.startswith("## Page 1\n\nalpha words\n\n## Page 2\n\n")
    assert outcome.pages == 2 and outcome.empty_pages == (2,)


def test_slides_and_sheets(tmp_path: Path) -> None:
    deck = write_pptx(tmp_path / "d.pptx", [("Revenue", "Up nine percent"), ("Risks", "Tariffs")])
    book = write_xlsx(tmp_path / "b.xlsx", {"Parts": [("part", "count"), ("gasket", 12)]})
    extractor = WorkerExtractor(timeout_s=60)
    try:
        slides = extractor.extract(str(deck), "pptx")
        sheets = extractor.extract(str(book), "xlsx")
    finally:
        extractor.close()
    assert isinstance(slides, Extracted), slides
    assert "## Slide 1\n\nRevenue\n\nUp nine percent" in slides.text
    assert "## Slide 2" in slides.text and slides.pages == 2
    assert slides.metadata["title"] == "Quarterly Review" and slides.metadata["slides"] == 2
    assert isinstance(sheets, Extracted), sheets
    assert "## Sheet: Parts\n\n| part | count |\n| --- | --- |\n| gasket | 12 |" in sheets.text
    assert sheets.metadata["author"] == "Xavi Xlsx"

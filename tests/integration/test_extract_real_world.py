"""Documents shaped like the ones users have (issue #26), through the real parsers in the
worker process: a Word chapter with tracked changes and publisher styles whose headings are
outline levels, a PDF whose Info title is a print job's name and which holds a blank page and
an image-only page. The two files in tests/data/extraction were made by LibreOffice
(scripts/gen_extraction_fixtures.py regenerates them); smaller cases come from
tooling/docgen.py. REQ-EXTRACT-002, REQ-EXTRACT-003, REQ-EXTRACT-008, REQ-EXTRACT-011."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.extract.extractor import WorkerExtractor
from domain.extraction import Extracted, SourceDigest
from tooling.docgen import write_docx, write_pdf, write_pptx

DATA = Path(__file__).resolve().parent.parent / "data" / "extraction"
CHAPTER = DATA / "tracked-changes.docx"
KALMAN = DATA / "producer-title.pdf"


@pytest.fixture(scope="module")
def extractor() -> Iterator[WorkerExtractor]:
    worker = WorkerExtractor(timeout_s=60)
    yield worker
    worker.close()


def _extract(extractor: WorkerExtractor, path: Path, file_format: str) -> Extracted:
    outcome = extractor.extract(str(path), file_format)
    assert isinstance(outcome, Extracted), outcome
    return outcome


def test_tracked_insertions_are_kept_and_deletions_dropped(extractor: WorkerExtractor) -> None:
    text = _extract(extractor, CHAPTER, "docx").text
    # One insertion splits a word ("witho" + "ut"), as Word records an edit inside a word.
    assert "Keepers very often acted without knowing the tide tables by heart." in text
    assert "The lamp was always trimmed at dusk and the brass lens polished" in text
    assert "never" not in text and "obsolete" not in text  # the deleted words


def test_outline_levels_of_publisher_styles_make_headings(extractor: WorkerExtractor) -> None:
    outcome = _extract(extractor, CHAPTER, "docx")
    headings = [line for line in outcome.text.splitlines() if line.startswith("#")]
    assert headings == [
        "# The Lighthouse Keeper's Ledger",  # `PUB Chapter`: outline level in the style
        "## Night Watches",  # `PUB A-Head`: level 2
        "# Storms of the Winter Season",  # `PUB Chapter Numbered`: inherited through basedOn
        "### Provisions Kept",  # outline level set on the paragraph itself
    ]
    # No title in the core properties: the first heading names it, not the file name.
    assert outcome.metadata["title"] == "The Lighthouse Keeper's Ledger"


def test_body_text_level_on_a_paragraph_overrides_its_heading_style(tmp_path: Path) -> None:
    """`w:outlineLvl` 9 on a paragraph makes it body text even in a heading style."""
    import docx
    from docx.oxml.ns import qn
    from docx.oxml.parser import OxmlElement

    from adapters.extract.formats import extract_docx

    document = docx.Document()
    document.add_heading("Real Heading", level=1)
    demoted = document.add_heading("Demoted line", level=2)
    level = OxmlElement("w:outlineLvl")
    level.set(qn("w:val"), "9")
    demoted._p.get_or_add_pPr().append(level)
    document.save(str(tmp_path / "d.docx"))
    outcome = extract_docx(str(tmp_path / "d.docx"))
    assert isinstance(outcome, Extracted)
    assert outcome.text == "# Real Heading\n\nDemoted line\n"


def test_content_controls_are_read_and_unfilled_prompts_are_not(tmp_path: Path) -> None:
    """Title pages put their text in content controls (`w:sdt`), which python-docx's body walk
    skips; one still showing its prompt holds no text of the document."""
    import docx
    from docx.oxml.parser import parse_xml

    from adapters.extract.formats import extract_docx

    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    document = docx.Document()
    body = document.element.body
    body.insert(
        0,
        parse_xml(
            f"<w:sdt {w}><w:sdtPr><w:alias w:val='Title'/></w:sdtPr><w:sdtContent>"
            "<w:p><w:pPr><w:pStyle w:val='Title'/></w:pPr><w:r><w:t>Annual Harbour Report"
            "</w:t></w:r></w:p></w:sdtContent></w:sdt>"
        ),
    )
    paragraph = document.add_paragraph("Prepared by ")
    paragraph._p.append(
        parse_xml(
            f"<w:sdt {w}><w:sdtPr><w:showingPlcHdr/></w:sdtPr><w:sdtContent><w:r>"
            "<w:t>Click or tap here to enter text.</w:t></w:r></w:sdtContent></w:sdt>"
        )
    )
    paragraph._p.append(
        parse_xml(
            f"<w:sdt {w}><w:sdtPr/><w:sdtContent><w:r><w:t>the harbour master</w:t></w:r>"
            "</w:sdtContent></w:sdt>"
        )
    )
    document.save(str(tmp_path / "c.docx"))
    outcome = extract_docx(str(tmp_path / "c.docx"))
    assert isinstance(outcome, Extracted)
    assert outcome.text == "# Annual Harbour Report\n\nPrepared by the harbour master\n"
    assert outcome.metadata["title"] == "Annual Harbour Report"


def test_a_producer_artefact_title_gives_way_to_the_largest_line(
    extractor: WorkerExtractor,
) -> None:
    outcome = _extract(extractor, KALMAN, "pdf")
    # Info says "Microsoft Word - Kalman15.doc"; page 1 sets the title in 24 pt over 11 pt
    # text, under a smaller "Technical Note 15" line.
    assert outcome.metadata["title"] == "Kalman Filtering for Tide Gauges"


def test_a_blank_page_is_told_apart_from_a_scanned_one(extractor: WorkerExtractor) -> None:
    outcome = _extract(extractor, KALMAN, "pdf")
    assert outcome.pages == 4
    assert outcome.empty_pages == (3,)  # the image-only page; page 2 is blank, not scanned
    assert "## Page 2\n\n[blank page]\n\n## Page 3\n\n[no text layer on this page]" in (
        outcome.text
    )
    assert "## Page 4\n\nAppendix: the gauge was calibrated" in outcome.text


def test_uniform_text_gives_its_first_meaningful_line_as_title(
    tmp_path: Path, extractor: WorkerExtractor
) -> None:
    pdf = write_pdf(tmp_path / "u.pdf", [["12", "Coastal survey", "The colony grew."]], "untitled")
    assert _extract(extractor, pdf, "pdf").metadata["title"] == "Coastal survey"


def test_a_real_title_is_kept_and_a_placeholder_without_text_is_dropped(
    tmp_path: Path, extractor: WorkerExtractor
) -> None:
    kept = write_pdf(tmp_path / "k.pdf", [["Some first line"]], title="Coastal Survey 2024")
    assert _extract(extractor, kept, "pdf").metadata["title"] == "Coastal Survey 2024"
    scan = write_pdf(tmp_path / "s.pdf", [None, ["42"]], title="Slide 1")
    assert "title" not in _extract(extractor, scan, "pdf").metadata


def test_blank_pages_only_are_not_a_scan(tmp_path: Path, extractor: WorkerExtractor) -> None:
    outcome = _extract(extractor, write_pdf(tmp_path / "b.pdf", [[], []]), "pdf")
    assert outcome.text.strip() == "" and outcome.empty_pages == ()


def test_office_placeholder_titles_give_way_to_the_content(
    tmp_path: Path, extractor: WorkerExtractor
) -> None:
    import docx
    import pptx

    deck = write_pptx(tmp_path / "d.pptx", [("Harbour Dredging Plan", "Phase one")])
    shown = pptx.Presentation(str(deck))
    shown.core_properties.title = "PowerPoint Presentation"
    shown.save(str(deck))
    assert _extract(extractor, deck, "pptx").metadata["title"] == "Harbour Dredging Plan"
    memo = write_docx(tmp_path / "m.docx", "Dredging Memo", [("Scope", ["The channel."])])
    document = docx.Document(str(memo))
    document.core_properties.title = "Document1"
    document.save(str(memo))
    assert _extract(extractor, memo, "docx").metadata["title"] == "Dredging Memo"
    html = tmp_path / "p.html"
    html.write_text("<title>Untitled</title><h1>Tide <b>Tables</b></h1><p>x</p>")
    assert _extract(extractor, html, "html").metadata["title"] == "Tide Tables"


def test_outcomes_cached_by_an_older_extractor_are_not_reused(extractor: WorkerExtractor) -> None:
    """57044c0 keyed its cache by the bare SHA-256 of a file's bytes, and kept the text it had
    extracted ("very oftenut knowing") for as long as the bytes stayed the same. The key now
    carries the extractor's output version, so that row is never found again and the file is
    extracted anew by the next `qmd update`."""
    digest = extractor.digest(str(CHAPTER))
    assert isinstance(digest, SourceDigest)
    assert digest.sha256 != hashlib.sha256(CHAPTER.read_bytes()).hexdigest()
    assert digest.size == CHAPTER.stat().st_size

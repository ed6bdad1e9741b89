"""A real folder of PDF, DOCX, HTML and markdown files through real `qmd` processes
(REQ-EXTRACT-001..REQ-EXTRACT-007): indexed, searchable, readable with line numbers; the
scanned page, the corrupt PDF and the zip bomb reported by `qmd status` and the `status` tool."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.conftest import Qmd, make_qmd
from tests.mcp_harness import StdioServer
from tooling.docgen import build_fixture

MASK = "**/*.{md,pdf,docx,html}"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Qmd, str]:
    qmd = make_qmd(tmp_path_factory.mktemp("extract"))
    build_fixture(qmd.root / "docs")
    added = qmd.run("collection", "add", str(qmd.root / "docs"), "--name", "docs", "--mask", MASK)
    assert added.returncode == 0, (added.stdout, added.stderr)
    return qmd, added.stdout + added.stderr


def test_update_indexes_each_format_and_reports_the_rest(indexed: tuple[Qmd, str]) -> None:
    qmd, output = indexed
    assert "broken.pdf" in output and "corrupt" in output, output
    assert "bomb.docx" in output and "zip-bomb" in output, output
    listed = qmd.run("ls", "docs")
    listing = listed.stdout
    assert listed.returncode == 0, listed.stderr
    for name in ("survey.pdf", "handbook.docx", "guide.html", "notes.md"):
        assert f"qmd://docs/{name}" in listing, listing
    assert "broken.pdf" not in listing and "bomb.docx" not in listing
    # named on stderr with the failure the update recorded, no extraction run again
    # (REQ-INDEX-LS-SKIPPED-001)
    named = dict(
        line[2:].split(": ", 1) for line in listed.stderr.splitlines() if line.startswith("  ")
    )
    assert named["broken.pdf"].startswith("could not be extracted: corrupt"), listed.stderr
    assert named["bomb.docx"].startswith("could not be extracted: zip-bomb"), listed.stderr


@pytest.mark.parametrize(
    ("word", "file"),
    [
        ("albatross", "survey.pdf"),
        ("estuary", "survey.pdf"),
        ("goggles", "handbook.docx"),
        ("lighthouse", "guide.html"),
        ("glacier", "notes.md"),
    ],
)
def test_search_finds_words_of_every_format(indexed: tuple[Qmd, str], word: str, file: str) -> None:
    qmd, _ = indexed
    found = qmd.ok("search", word, "--json")
    assert f"docs/{file}" in found, found


def test_script_text_of_html_is_not_indexed(indexed: tuple[Qmd, str]) -> None:
    qmd, _ = indexed
    assert "guide.html" not in qmd.ok("search", "scriptword", "--json")


def test_get_returns_extracted_text_with_page_headings_and_line_numbers(
    indexed: tuple[Qmd, str],
) -> None:
    qmd, _ = indexed
    text = qmd.ok("get", "docs/survey.pdf")
    for line in ("1: ## Page 1", "4: The albatross colony grew this season.", "6: ## Page 2"):
        assert f"\n{line}\n" in text, text
    assert "\n8: [no text layer on this page]\n" in text and "\n10: ## Page 3\n" in text
    # a line range counts lines of the extracted text
    numbered = qmd.ok("get", "docs/survey.pdf:6:3")
    assert "6: ## Page 2" in numbered and "8: [no text" in numbered, numbered
    assert "Sediment" not in numbered and "albatross" not in numbered
    assert "# Workshop Handbook" in qmd.ok("get", "docs/handbook.docx")


def test_status_reports_failures_and_the_scanned_page(indexed: tuple[Qmd, str]) -> None:
    qmd, _ = indexed
    status = qmd.ok("status")
    assert "2 files could not be extracted:" in status, status
    assert "docs/broken.pdf: corrupt" in status
    assert "docs/bomb.docx: zip-bomb" in status
    assert "docs/survey.pdf: no text layer on page 2" in status


def test_status_tool_of_the_default_surface_lists_them(indexed: tuple[Qmd, str]) -> None:
    qmd, _ = indexed
    env = {**qmd.env(), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    server = StdioServer(env)
    try:
        server.initialize()
        result = server.call("status", {})
    finally:
        server.close()
    text = result["content"][0]["text"]
    assert "2 files could not be extracted" in text, text
    extraction = result["structuredContent"]["extraction"]
    assert extraction["failedCount"] == 2
    assert {f["file"]: f["reason"] for f in extraction["failed"]} == {
        "docs/bomb.docx": "zip-bomb",
        "docs/broken.pdf": "corrupt",
    }
    assert extraction["pagesWithoutText"] == [{"file": "docs/survey.pdf", "pages": [2]}]


def test_failures_live_in_extra_tables_only(indexed: tuple[Qmd, str]) -> None:
    qmd, _ = indexed
    with sqlite3.connect(qmd.db) as conn:
        rows = dict(
            conn.execute(
                "SELECT path, reason FROM extraction_state WHERE status = 'failed'"
            ).fetchall()
        )
    assert rows == {"bomb.docx": "zip-bomb", "broken.pdf": "corrupt"}


def test_a_fully_scanned_pdf_is_reported_as_having_no_text_layer(tmp_path: Path) -> None:
    from tooling.docgen import write_pdf

    qmd = make_qmd(tmp_path)
    folder = tmp_path / "scans"
    folder.mkdir()
    write_pdf(folder / "scan.pdf", [None, None])
    (folder / "a.md").write_text("# A\n\nalpha\n")
    qmd.ok("collection", "add", str(folder), "--name", "scans", "--mask", "**/*.{md,pdf}")
    status = qmd.ok("status")
    assert "scans/scan.pdf: no-text-layer" in status, status


def test_extracted_metadata_is_filterable(indexed: tuple[Qmd, str]) -> None:
    """The extractor's fields join the document's metadata (REQ-META-001): a filter on the
    PDF's author finds it, and the DOCX's author does not match it."""
    qmd, _ = indexed
    by_author = '{"key": "author", "operator": "eq", "value": "Pat Pdf"}'
    found = qmd.ok("search", "albatross", "--json", "--filter", by_author)
    assert "docs/survey.pdf" in found, found
    assert "docs/survey.pdf" not in qmd.ok(
        "search", "albatross", "--json", "--filter", by_author.replace("Pat Pdf", "Dana Docx")
    )
    assert "docs/handbook.docx" in qmd.ok("search", "goggles", "--json", "--type", "docx")


def test_real_world_shaped_documents_through_update(tmp_path: Path) -> None:
    """Issue #26's files, made by LibreOffice (tests/data/extraction): a chapter with tracked
    changes and publisher heading styles, a PDF titled by a print job with a blank page and an
    image-only page. Words of insertions are found, deleted ones are not, both documents are
    titled from their content, and only the image page is reported as lacking text."""
    import json
    import shutil

    data = Path(__file__).resolve().parent.parent / "data" / "extraction"
    qmd = make_qmd(tmp_path)
    folder = tmp_path / "papers"
    folder.mkdir()
    for name in ("tracked-changes.docx", "producer-title.pdf"):
        shutil.copy(data / name, folder / name)
    qmd.ok("collection", "add", str(folder), "--name", "papers", "--mask", "**/*.{pdf,docx}")
    found = json.loads(qmd.ok("search", "acted without knowing", "--json"))
    assert [hit["file"] for hit in found] == ["qmd://papers/tracked-changes.docx"], found
    assert found[0]["title"] == "The Lighthouse Keeper's Ledger"
    assert json.loads(qmd.ok("search", "obsolete", "--json")) == []  # a deleted word
    kalman = json.loads(qmd.ok("search", "recursive estimator", "--json"))
    assert [hit["title"] for hit in kalman] == ["Kalman Filtering for Tide Gauges"], kalman
    status = qmd.ok("status")
    assert "papers/producer-title.pdf: no text layer on page 3" in status, status
    text = qmd.ok("get", "papers/producer-title.pdf", "--no-line-numbers")
    assert "## Page 2\n\n[blank page]\n\n## Page 3\n\n[no text layer on this page]" in text

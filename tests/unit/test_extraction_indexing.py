"""Extraction inside `update`, through the composition root with fakes (REQ-EXTRACT-004,
REQ-EXTRACT-005, REQ-EXTRACT-008): an unchanged document is never extracted again, failures are
remembered and reported, markdown files never reach the extractor."""

from __future__ import annotations

from adapters.bootstrap import App
from domain.model import Collection
from tests.fakes import (
    FakeContentSource,
    FakeExtractor,
    FixedClock,
    InMemoryConfigRepository,
    InMemoryExtractionLedger,
    InMemoryStore,
)

ROOT = "/docs"
MASK = "**/*.{md,pdf,docx}"


def _app(files: dict[str, str | None]) -> tuple[App, FakeExtractor, InMemoryExtractionLedger]:
    """`files` stays the folder: the source reads it, and so does the extractor."""
    store = InMemoryStore()
    source = FakeContentSource()
    source.files = files
    extractor = FakeExtractor(files)
    ledger = InMemoryExtractionLedger()
    app = App(
        store=store,
        lexical=store,
        vectors=store,
        cache=store,
        config=InMemoryConfigRepository(),
        source=source,
        clock=FixedClock(),
        maintenance=store,
        extractor=extractor,
        ledger=ledger,
    )
    return app, extractor, ledger


def test_an_unchanged_document_is_extracted_once() -> None:
    files: dict[str, str | None] = {
        f"{ROOT}/report.pdf": "quarterly turbine figures\fsecond page",
        f"{ROOT}/notes.md": "# Notes\n\nplain markdown\n",
    }
    app, extractor, _ = _app(files)
    app.collections.add(ROOT, "docs", MASK)
    assert extractor.calls == [f"{ROOT}/report.pdf"]  # the markdown file is read, not extracted
    for _ in range(3):
        counts = app.collections.update()["docs"]
        assert counts.unchanged == 2 and counts.indexed == 0
    assert len(extractor.calls) == 1
    meta = app.store.document_by_path("docs", "report.pdf")
    assert meta is not None
    body = app.store.body(meta.hash)
    assert body.startswith("## Page 1\n\nquarterly turbine figures")

    files[f"{ROOT}/report.pdf"] = "revised turbine figures"
    app.collections.update()
    assert len(extractor.calls) == 2
    files[f"{ROOT}/copy.pdf"] = "revised turbine figures"  # same bytes: the cache answers
    counts = app.collections.update()["docs"]
    assert len(extractor.calls) == 2 and counts.indexed == 1
    app.close()
    assert extractor.closed


def test_failures_are_remembered_reported_and_not_retried() -> None:
    files: dict[str, str | None] = {
        f"{ROOT}/bad.pdf": "FAIL:corrupt:PDFium could not load it",
        f"{ROOT}/ok.docx": "fine words",
        f"{ROOT}/scan.pdf": "typed page\f",
    }
    app, extractor, _ = _app(files)
    _, counts = app.collections.add(ROOT, "docs", MASK)
    assert counts.indexed == 2 and counts.skipped == 1
    assert [p.path for p in counts.problems] == ["bad.pdf"]
    assert "could not be extracted: corrupt" in counts.problems[0].reason
    app.collections.update()
    assert sorted(extractor.calls) == sorted(files)  # each extracted once, the failure too

    report = app.status.status().extraction
    assert [(s.path, s.reason) for s in report.failed] == [("bad.pdf", "corrupt")]
    assert [(s.path, s.empty_pages) for s in report.scanned] == [("scan.pdf", (2,))]

    assert app.extraction is not None
    assert app.services().extraction is app.extraction  # what a surface (LDIMS) is handed
    assert app.extraction.state_of("docs", "ok.docx").status == "ok"
    failed = app.extraction.state_of("docs", "bad.pdf")
    assert (failed.status, failed.reason) == ("failed", "corrupt")
    assert app.extraction.state_of("docs", "later.pdf").status == "pending"
    assert app.extraction.state_of("docs", "notes.md").status == "ok"  # text: nothing to do
    assert app.extraction.metadata_of("docs", "ok.docx") == {"format": "docx"}

    del files[f"{ROOT}/bad.pdf"]  # gone from the folder: gone from the report
    app.collections.update()
    assert app.status.status().extraction.failed == ()


def test_a_document_that_starts_failing_is_removed_and_reported() -> None:
    files: dict[str, str | None] = {f"{ROOT}/a.pdf": "first version"}
    app, _, _ = _app(files)
    app.collections.add(ROOT, "docs", MASK)
    assert app.store.document_by_path("docs", "a.pdf") is not None
    files[f"{ROOT}/a.pdf"] = "FAIL:timeout:the parser ran past the 60 s limit"
    counts = app.collections.update()["docs"]
    assert counts.removed == 1
    assert app.store.document_by_path("docs", "a.pdf") is None
    assert [s.reason for s in app.status.status().extraction.failed] == ["timeout"]


def test_without_an_extractor_nothing_changes_for_markdown() -> None:
    store = InMemoryStore()
    files: dict[str, str | None] = {f"{ROOT}/a.md": "# A\n\nalpha\n"}
    app = App(
        store=store,
        lexical=store,
        vectors=store,
        cache=store,
        config=InMemoryConfigRepository(),
        source=FakeContentSource(files),
        clock=FixedClock(),
    )
    app.collections.add(ROOT, "docs", MASK)
    assert app.extraction is None
    assert app.status.status().extraction.empty
    assert isinstance(app.store.get_collection("docs"), Collection)


def test_content_left_out_is_reported_for_an_indexed_document_cached_or_not() -> None:
    """REQ-EXTRACT-014: what an extracted document's text leaves out reaches `status`, in its
    text and its structured answer, also when the outcome comes from the cache."""
    from adapters.mcp.formatting import extraction_status

    note = "2 pictures (text in images is not read)"
    files: dict[str, str | None] = {
        f"{ROOT}/flow.docx": f"SKIP:{note}:report within 24 hours",
        f"{ROOT}/plain.docx": "only words",
    }
    app, extractor, _ = _app(files)
    app.collections.add(ROOT, "docs", MASK)
    files[f"{ROOT}/copy.docx"] = files[f"{ROOT}/flow.docx"]  # same bytes: from the cache
    app.collections.update()
    assert len(extractor.calls) == 2

    status = app.status.status()
    assert [(s.path, s.detail) for s in status.extraction.partial] == [
        ("copy.docx", note),
        ("flow.docx", note),
    ]
    payload = extraction_status(
        status, {"content": [{"type": "text", "text": "Index"}], "structuredContent": {}}
    )
    assert "2 files indexed with some content not read as text:" in payload["content"][0]["text"]
    assert "docs/flow.docx: not read: " + note in payload["content"][0]["text"]
    extraction = payload["structuredContent"]["extraction"]
    assert extraction["notReadCount"] == 2
    assert extraction["notRead"][1] == {"file": "docs/flow.docx", "detail": note}
    assert app.extraction is not None
    assert app.extraction.metadata_of("docs", "flow.docx")["skipped"] == [note]

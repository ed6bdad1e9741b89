"""The parsers: one function per format, file path in, `Extracted` or `ExtractionFailure` out.

Chosen libraries (docs/decisions/0035 and 0036): pypdfium2 for PDF, python-docx for DOCX,
python-pptx for PPTX, openpyxl for XLSX, BeautifulSoup + markdownify for HTML. They are
imported on first use, inside the worker process (adapters.extract.worker), which is what
bounds their time and memory; calling these functions in-process is for benchmarks and tests.

Output shape (REQ-EXTRACT-002): markdown, with PDF pages as `## Page N`, slides as
`## Slide N`, sheets as `## Sheet: name`, so a line number given by `get` or a snippet falls
under the heading of the page it came from. A PDF page without a text layer keeps its heading
and a bracketed note, and is listed in `empty_pages`.
"""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from collections.abc import Callable, Iterable
from typing import Any

from domain.extraction import (
    CORRUPT,
    ENCRYPTED,
    TOO_LARGE,
    UNREADABLE,
    UNSUPPORTED,
    ZIP_BOMB,
    Extracted,
    ExtractionFailure,
    MetadataValue,
)

# Stated limits (REQ-EXTRACT-006); the worker adds a time and a memory limit per file.
MAX_TEXT_CHARS = 10 * 1024 * 1024  # extracted text, like the 10 MiB limit on markdown files
MAX_ZIP_UNCOMPRESSED = 256 * 1024 * 1024  # the sum of an Office file's declared part sizes
MAX_ZIP_RATIO = 100  # a part this many times larger than its compressed size…
MAX_ZIP_RATIO_FLOOR = 16 * 1024 * 1024  # …and larger than this is a zip bomb
MAX_ZIP_ENTRIES = 20_000
MAX_SHEET_ROWS = 20_000  # per XLSX sheet; the rest is cut with a note

NO_TEXT_NOTE = "[no text layer on this page]"

Result = Extracted | ExtractionFailure


def _clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    # PDFium marks soft hyphens and page-internal breaks with these; drop them.
    text = text.replace("\ufffe", "").replace("\x02", "")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def _too_large(chars: int) -> ExtractionFailure:
    return ExtractionFailure(
        TOO_LARGE, f"extracted text has {chars:,} characters; the limit is {MAX_TEXT_CHARS:,}"
    )


def _finish(parts: Iterable[str], metadata: dict[str, MetadataValue], **extra: Any) -> Result:
    text = "\n\n".join(p for p in parts if p).strip() + "\n"
    if len(text) > MAX_TEXT_CHARS:
        return _too_large(len(text))
    return Extracted(text=text, metadata=metadata, **extra)


# ----------------------------------------------------------------------------------- PDF


_PDF_DATE = re.compile(r"^D:(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?")


def pdf_date(value: str) -> str | None:
    """`D:20240131120000+01'00'` -> `2024-01-31T12:00:00` (the zone is dropped)."""
    match = _PDF_DATE.match(value.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second = (
        g or d for g, d in zip(match.groups(), "100000", strict=False)
    )
    try:
        moment = dt.datetime(
            int(year), int(month or 1), int(day or 1), int(hour), int(minute), int(second)
        )
    except ValueError:
        return None
    return moment.isoformat()


def extract_pdf(path: str) -> Result:
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as error:
        code = getattr(error, "err_code", None)
        if code == 4:  # FPDF_ERR_PASSWORD
            return ExtractionFailure(ENCRYPTED, "the PDF is password protected")
        if code == 2:  # FPDF_ERR_FILE
            return ExtractionFailure(UNREADABLE, "the file could not be opened")
        return ExtractionFailure(CORRUPT, f"PDFium could not load it: {error}")
    try:
        metadata = _pdf_metadata(document)
        parts: list[str] = []
        empty: list[int] = []
        total = 0
        for index in range(len(document)):
            page = document[index]
            try:
                textpage = page.get_textpage()
                text = _clean(textpage.get_text_range())
                textpage.close()
            finally:
                page.close()
            number = index + 1
            if not text:
                empty.append(number)
                text = NO_TEXT_NOTE
            total += len(text)
            if total > MAX_TEXT_CHARS:
                return _too_large(total)
            parts.append(f"## Page {number}\n\n{text}")
        metadata["pages"] = len(document)
        if len(empty) == len(document):
            parts = []  # nothing to index: the use case reports it as no-text-layer
        return _finish(parts, metadata, pages=len(document), empty_pages=tuple(empty))
    finally:
        document.close()


def _pdf_metadata(document: Any) -> dict[str, MetadataValue]:
    raw = {k: str(v).strip() for k, v in document.get_metadata_dict().items() if v}
    metadata: dict[str, MetadataValue] = {}
    for key, name in (("Title", "title"), ("Author", "author"), ("Subject", "subject")):
        if raw.get(key):
            metadata[name] = raw[key]
    if raw.get("Keywords"):
        metadata["keywords"] = [k.strip() for k in re.split(r"[,;]", raw["Keywords"]) if k.strip()]
    for key, name in (("CreationDate", "created"), ("ModDate", "modified")):
        when = pdf_date(raw.get(key, ""))
        if when:
            metadata[name] = when
    return metadata


# ------------------------------------------------------------------------ Office (zip) files


def zip_problem(path: str) -> ExtractionFailure | None:
    """Refuse an Office file that is not a zip, or whose parts would decompress to far more
    than the limits (a zip bomb), before any parser reads it."""
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as error:
        return ExtractionFailure(CORRUPT, f"not a valid Office (zip) file: {error}")
    if len(entries) > MAX_ZIP_ENTRIES:
        return ExtractionFailure(ZIP_BOMB, f"{len(entries):,} parts in the archive")
    total = sum(e.file_size for e in entries)
    if total > MAX_ZIP_UNCOMPRESSED:
        return ExtractionFailure(
            ZIP_BOMB,
            f"parts decompress to {total:,} bytes; the limit is {MAX_ZIP_UNCOMPRESSED:,}",
        )
    for entry in entries:
        compressed = max(entry.compress_size, 1)
        if entry.file_size > MAX_ZIP_RATIO_FLOOR and entry.file_size / compressed > MAX_ZIP_RATIO:
            return ExtractionFailure(
                ZIP_BOMB,
                f"part {entry.filename} expands {entry.file_size // compressed:,}x "
                f"to {entry.file_size:,} bytes",
            )
    return None


def _iso(value: object) -> str | None:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat()
    return None


def _core_metadata(props: Any) -> dict[str, MetadataValue]:
    metadata: dict[str, MetadataValue] = {}
    for name in ("title", "author", "subject", "category"):
        value = getattr(props, name, None)
        if isinstance(value, str) and value.strip():
            metadata[name] = value.strip()
    creator = getattr(props, "creator", None)  # openpyxl names the author `creator`
    if "author" not in metadata and isinstance(creator, str) and creator.strip():
        metadata["author"] = creator.strip()
    keywords = getattr(props, "keywords", None)
    if isinstance(keywords, str) and keywords.strip():
        metadata["keywords"] = [k.strip() for k in re.split(r"[,;]", keywords) if k.strip()]
    for name in ("created", "modified"):
        when = _iso(getattr(props, name, None))
        if when:
            metadata[name] = when
    return metadata


_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)


def _docx_paragraph(paragraph: Any, style_names: dict[str, str]) -> str:
    text = str(paragraph.text).strip()
    if not text:
        return ""
    # The style id read from the paragraph's XML and named through a table built once:
    # python-docx's `paragraph.style` searches the style part on every call (90% of the time).
    style_id = paragraph._p.style  # CT_P.style: the w:pStyle value, or None
    style = style_names.get(str(style_id), "") if style_id else ""
    match = _HEADING_STYLE.match(style)
    if match:
        return "#" * min(int(match.group(1)), 6) + " " + text
    if style.lower() == "title":
        return "# " + text
    if style.lower().startswith("list"):
        marker = "1." if "number" in style.lower() else "-"
        return f"{marker} {text}"
    return text


def _table_markdown(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    cells = [[c.replace("|", "\\|").replace("\n", " ") for c in r] + [""] * (width - len(r))
             for r in rows]  # fmt: skip
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in cells[1:]]
    return "\n".join(lines)


def extract_docx(path: str) -> Result:
    problem = zip_problem(path)
    if problem is not None:
        return problem
    import docx
    from docx.table import Table

    try:
        document = docx.Document(path)
    except Exception as error:  # python-docx raises KeyError, ValueError, lxml errors…
        return ExtractionFailure(CORRUPT, f"python-docx could not read it: {error}")
    style_names = {str(s.style_id): str(s.name or "") for s in document.styles}
    parts: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            rows = [[cell.text.strip() for cell in row.cells] for row in block.rows]
            parts.append(_table_markdown(rows))
        else:
            parts.append(_docx_paragraph(block, style_names))
    return _finish(parts, _core_metadata(document.core_properties))


def extract_pptx(path: str) -> Result:
    problem = zip_problem(path)
    if problem is not None:
        return problem
    import pptx

    try:
        deck = pptx.Presentation(path)
    except Exception as error:
        return ExtractionFailure(CORRUPT, f"python-pptx could not read it: {error}")
    parts: list[str] = []
    for number, slide in enumerate(deck.slides, start=1):
        lines: list[str] = []
        for shape in slide.shapes:
            if getattr(shape, "has_text_frame", False) and shape.text_frame.text.strip():
                lines.append(_clean(shape.text_frame.text))
            elif getattr(shape, "has_table", False):
                rows = [[c.text.strip() for c in row.cells] for row in shape.table.rows]
                lines.append(_table_markdown(rows))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = _clean(slide.notes_slide.notes_text_frame.text)
            if notes:
                lines.append(f"Notes: {notes}")
        body = "\n\n".join(lines) if lines else "[no text on this slide]"
        parts.append(f"## Slide {number}\n\n{body}")
    metadata = _core_metadata(deck.core_properties)
    metadata["slides"] = len(parts)
    return _finish(parts, metadata, pages=len(parts))


def extract_xlsx(path: str) -> Result:
    problem = zip_problem(path)
    if problem is not None:
        return problem
    import openpyxl

    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as error:
        return ExtractionFailure(CORRUPT, f"openpyxl could not read it: {error}")
    try:
        parts: list[str] = []
        for sheet in book.worksheets:
            rows: list[list[str]] = []
            cut = False
            for row in sheet.iter_rows(values_only=True):
                if len(rows) >= MAX_SHEET_ROWS:
                    cut = True
                    break
                cells = ["" if v is None else str(v) for v in row]
                if any(cells):
                    rows.append(cells)
            table = _table_markdown(rows) if rows else "[empty sheet]"
            note = f"\n\n[cut after {MAX_SHEET_ROWS:,} rows]" if cut else ""
            parts.append(f"## Sheet: {sheet.title}\n\n{table}{note}")
        metadata = _core_metadata(book.properties)
        metadata["sheets"] = len(parts)
        return _finish(parts, metadata, pages=len(parts))
    finally:
        book.close()


# ------------------------------------------------------------------------------------ HTML

_DROPPED_TAGS = ("script", "style", "noscript", "template", "iframe", "object", "svg")


def extract_html(path: str) -> Result:
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    with open(path, "rb") as handle:
        data = handle.read()
    soup = BeautifulSoup(data, "html.parser")
    for tag in soup(_DROPPED_TAGS):
        tag.decompose()
    metadata: dict[str, MetadataValue] = {}
    if soup.title is not None and soup.title.string and soup.title.string.strip():
        metadata["title"] = soup.title.string.strip()
    for meta in soup.find_all("meta"):
        name = str(meta.get("name") or "").lower()
        content = str(meta.get("content") or "").strip()
        if not content:
            continue
        if name in ("author", "description"):
            metadata[name] = content
        elif name == "keywords":
            metadata["keywords"] = [k.strip() for k in content.split(",") if k.strip()]
    body = soup.body if soup.body is not None else soup
    markdown = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(body)
    markdown = re.sub(r"\n{3,}", "\n\n", _clean(markdown))
    return _finish([markdown], metadata)


EXTRACTORS: dict[str, Callable[[str], Result]] = {
    "pdf": extract_pdf,
    "docx": extract_docx,
    "pptx": extract_pptx,
    "xlsx": extract_xlsx,
    "html": extract_html,
    "htm": extract_html,
}


def extract_file(path: str, file_format: str) -> Result:
    """Run the extractor for `file_format`; a parser's unexpected exception is `corrupt`."""
    extractor = EXTRACTORS.get(file_format)
    if extractor is None:
        return ExtractionFailure(UNSUPPORTED, f"no extractor for .{file_format} files")
    try:
        return extractor(path)
    except ImportError as error:  # an install without the parser's package
        return ExtractionFailure(
            UNSUPPORTED, f"the parser for .{file_format} files is not installed ({error})"
        )
    except MemoryError:
        return ExtractionFailure(TOO_LARGE, "the parser ran out of its memory limit")
    except OSError as error:
        return ExtractionFailure(UNREADABLE, f"cannot be read: {error.strerror or error}")
    except Exception as error:
        return ExtractionFailure(CORRUPT, f"{type(error).__name__}: {error}")

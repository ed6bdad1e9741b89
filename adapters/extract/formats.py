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
    placeholder_title,
)

# Stated limits (REQ-EXTRACT-006); the worker adds a time and a memory limit per file.
MAX_TEXT_CHARS = 10 * 1024 * 1024  # extracted text, like the 10 MiB limit on markdown files
MAX_ZIP_UNCOMPRESSED = 256 * 1024 * 1024  # the sum of an Office file's declared part sizes
MAX_ZIP_RATIO = 100  # a part this many times larger than its compressed size…
MAX_ZIP_RATIO_FLOOR = 16 * 1024 * 1024  # …and larger than this is a zip bomb
MAX_ZIP_ENTRIES = 20_000
MAX_SHEET_ROWS = 20_000  # per XLSX sheet; the rest is cut with a note

NO_TEXT_NOTE = "[no text layer on this page]"
BLANK_PAGE_NOTE = "[blank page]"

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
        # The Info title is often a producer's artefact; then the first page with text names
        # the document (REQ-EXTRACT-011).
        wants_title = placeholder_title(str(metadata.get("title", "")))
        found_title = ""
        parts: list[str] = []
        empty: list[int] = []
        blank = 0
        total = 0
        for index in range(len(document)):
            page = document[index]
            try:
                textpage = page.get_textpage()
                try:
                    text = _clean(textpage.get_text_range())
                    if text and wants_title and not found_title:
                        found_title = _pdf_page_title(textpage)
                finally:
                    textpage.close()
                drawn = bool(text) or _pdf_page_draws(page)
            finally:
                page.close()
            number = index + 1
            if not text and drawn:
                empty.append(number)  # an image, a drawing: a scan has no text layer
                text = NO_TEXT_NOTE
            elif not text:
                blank += 1  # nothing on it at all: a blank page, not a scan
                text = BLANK_PAGE_NOTE
            total += len(text)
            if total > MAX_TEXT_CHARS:
                return _too_large(total)
            parts.append(f"## Page {number}\n\n{text}")
        if wants_title:
            _replace_title(metadata, found_title)
        metadata["pages"] = len(document)
        if len(empty) + blank == len(document):
            parts = []  # nothing to index: the use case reports no-text-layer, or empty
        return _finish(parts, metadata, pages=len(document), empty_pages=tuple(empty))
    finally:
        document.close()


def _replace_title(metadata: dict[str, MetadataValue], found: str) -> None:
    """Put the title found in the document in place of a missing or placeholder one; with
    none found, drop the placeholder (the file name stands in, REQ-EXTRACT-003)."""
    found = " ".join(found.split())
    if found and not placeholder_title(found):
        metadata["title"] = found
    else:
        metadata.pop("title", None)


def _pdf_page_draws(page: Any) -> bool:
    """Whether a page without text paints anything: an image (a scan), a path or a shading.
    A page with no page object at all is blank."""
    return next(iter(page.get_objects(max_depth=2)), None) is not None


MAX_TITLE_CHARS = 200


def _pdf_page_title(textpage: Any) -> str:
    """The title on a page: its lines set in the largest font when that is larger than the
    page's body text (consecutive lines of that size joined: a title over two lines), else the
    first line with three letters or more. Lines longer than a title can be are passed over."""
    import pypdfium2.raw as pdfium_c

    lines: list[tuple[str, float]] = []  # (text, largest font size of its letters)
    weights: dict[float, int] = {}  # letters per font size: the most common is the body size
    chars: list[str] = []
    size = 0.0
    for index in range(textpage.count_chars()):
        char = chr(pdfium_c.FPDFText_GetUnicode(textpage.raw, index))
        if char in "\r\n":
            if chars:
                lines.append(("".join(chars).strip(), size))
            chars, size = [], 0.0
            continue
        chars.append(char)
        if char.isalpha():
            font = round(_pdf_char_size(textpage, index, pdfium_c), 1)
            size = max(size, font)
            weights[font] = weights.get(font, 0) + 1
    if chars:
        lines.append(("".join(chars).strip(), size))
    candidates = [
        (text, font)
        for text, font in lines
        if sum(ch.isalpha() for ch in text) >= 3 and len(text) <= MAX_TITLE_CHARS
    ]
    if not candidates:
        return ""
    body = max(weights.items(), key=lambda item: item[1])[0]
    largest = max(font for _, font in candidates)
    if largest <= body + 0.5:
        return candidates[0][0]
    title: list[str] = []
    for text, font in lines:
        if abs(font - largest) <= 0.5 and text:
            title.append(text)
        elif title and text:  # a blank line between a title's lines does not end it
            break
    joined = " ".join(title)
    return joined if len(joined) <= MAX_TITLE_CHARS else title[0]


def _pdf_char_size(textpage: Any, index: int, pdfium_c: Any) -> float:
    """A letter's size as printed: its font size scaled by its text matrix. Many producers
    set every font at size 1 and scale it with the matrix, where the font size alone makes
    every line look alike and a two-line title was cut to its first line."""
    import ctypes
    import math

    font = float(pdfium_c.FPDFText_GetFontSize(textpage.raw, index))
    matrix = pdfium_c.FS_MATRIX()
    if pdfium_c.FPDFText_GetMatrix(textpage.raw, index, ctypes.byref(matrix)):
        scale = math.hypot(matrix.c, matrix.d)  # the length of the letter's upward axis
        if scale > 0:
            return font * scale
    return font


def _pdf_metadata(document: Any) -> dict[str, MetadataValue]:
    raw = {k: str(v).strip() for k, v in document.get_metadata_dict().items() if v}
    metadata: dict[str, MetadataValue] = {}
    for key, name in (("Title", "title"), ("Author", "author"), ("Subject", "subject")):
        if raw.get(key):
            metadata[name] = " ".join(raw[key].split())  # a title set over two lines: one
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


# WordprocessingML, read from python-docx's lxml tree: python-docx's `Paragraph.text` reads only
# runs directly under the paragraph, so text inside a tracked insertion (`w:ins`), a content
# control (`w:sdt`), a smart tag or a field was lost, and its styles know nothing of outline
# levels. We walk the XML ourselves (REQ-EXTRACT-002).
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_W_VAL = _W + "val"
_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)
# Removed text (a tracked deletion, the old place of moved text), text boxes (drawn apart
# from the flow, and stored twice: the drawing and its fallback), properties, field codes.
_DOCX_SKIPPED = frozenset(
    _W + name
    for name in ("del", "moveFrom", "txbxContent", "pPr", "rPr", "instrText", "delInstrText")
)
_DOCX_BODY_TEXT = 9  # `w:outlineLvl` 9: body text, even in a style that says otherwise


def _docx_text(element: Any) -> str:
    """The visible text of a paragraph as it reads with every tracked change accepted:
    inserted text kept, deleted text dropped."""
    out: list[str] = []
    stack = [iter(element)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        tag = child.tag
        if tag == _W + "t":
            out.append(child.text or "")
        elif tag == _W + "tab":
            out.append("\t")
        elif tag in (_W + "br", _W + "cr"):
            out.append("\n")
        elif tag == _W + "noBreakHyphen":
            out.append("-")
        elif tag == _W + "sdt" and _docx_placeholder(child):
            continue
        elif tag not in _DOCX_SKIPPED and isinstance(tag, str):
            stack.append(iter(child))
    return "".join(out)


def _docx_placeholder(sdt: Any) -> bool:
    """A content control still showing its prompt ("Click or tap here to enter text.")."""
    properties = sdt.find(_W + "sdtPr")
    return properties is not None and properties.find(_W + "showingPlcHdr") is not None


def _outline_level(properties: Any) -> int | None:
    """`w:outlineLvl` of a `w:pPr` (0 is the top level; 9 is body text), None if unset."""
    if properties is None:
        return None
    level = properties.find(_W + "outlineLvl")
    if level is None:
        return None
    try:
        return int(level.get(_W_VAL, ""))
    except ValueError:
        return None


class _DocxStyles:
    """Paragraph styles by id: name, and outline level with `w:basedOn` inheritance (a style
    without its own level takes its parent's, as Word does); built-in "Heading N" and "Title"
    names count when no level is set anywhere up the chain."""

    def __init__(self, styles_element: Any) -> None:
        self.names: dict[str, str] = {}
        own: dict[str, int | None] = {}
        parents: dict[str, str] = {}
        self.default = ""
        for style in styles_element.iter(_W + "style"):
            if style.get(_W + "type") != "paragraph":
                continue
            style_id = style.get(_W + "styleId") or ""
            name = style.find(_W + "name")
            self.names[style_id] = (name.get(_W_VAL, "") if name is not None else "") or ""
            own[style_id] = _outline_level(style.find(_W + "pPr"))
            based = style.find(_W + "basedOn")
            if based is not None:
                parents[style_id] = based.get(_W_VAL, "")
            if style.get(_W + "default") in ("1", "true", "on"):
                self.default = style_id
        self.levels = {sid: self._resolve(sid, own, parents) for sid in self.names}

    def _resolve(self, style_id: str, own: dict[str, int | None], parents: dict[str, str]) -> int:
        seen: set[str] = set()
        current = style_id
        while current in own and current not in seen:  # a basedOn loop stops here
            seen.add(current)
            level = own[current]
            if level is not None:
                return level
            match = _HEADING_STYLE.match(self.names.get(current, ""))
            if match:
                return int(match.group(1)) - 1
            current = parents.get(current, "")
        return _DOCX_BODY_TEXT


def _docx_paragraph(paragraph: Any, styles: _DocxStyles) -> str:
    text = _docx_text(paragraph).strip()
    if not text:
        return ""
    properties = paragraph.find(_W + "pPr")
    style_element = properties.find(_W + "pStyle") if properties is not None else None
    style_id = (
        style_element.get(_W_VAL, "") if style_element is not None else styles.default
    ) or styles.default
    style = styles.names.get(style_id, "")
    level = _outline_level(properties)
    if level is None:
        level = styles.levels.get(style_id, _DOCX_BODY_TEXT)
    if 0 <= level < _DOCX_BODY_TEXT:
        return "#" * min(level + 1, 6) + " " + text
    if style.lower() == "title":
        return "# " + text
    if style.lower().startswith("list"):
        marker = "1." if "number" in style.lower() else "-"
        return f"{marker} {text}"
    return text


def _docx_blocks(container: Any) -> Iterable[Any]:
    """Paragraphs and tables in reading order, including those inside block content controls
    (`w:sdt`, common on title pages) and custom XML, which python-docx's body walk skips."""
    for child in container:
        tag = child.tag
        if tag in (_W + "p", _W + "tbl"):
            yield child
        elif tag == _W + "sdt" and not _docx_placeholder(child):
            content = child.find(_W + "sdtContent")
            if content is not None:
                yield from _docx_blocks(content)
        elif tag == _W + "customXml":
            yield from _docx_blocks(child)


def _docx_table(table: Any, parent: Any) -> list[list[str]]:
    """Rows of cell texts; python-docx's rows give merged cells once per grid column."""
    from docx.table import Table

    rows: list[list[str]] = []
    for row in Table(table, parent).rows:
        row_properties = row._tr.trPr
        if row_properties is not None and row_properties.find(_W + "del") is not None:
            continue  # a tracked deleted row
        cells = []
        for cell in row.cells:
            texts = (
                _docx_text(block) if block.tag == _W + "p" else _docx_cells_text(block, parent)
                for block in _docx_blocks(cell._tc)
            )
            cells.append("\n".join(t.strip() for t in texts if t.strip()))
        rows.append(cells)
    return rows


def _docx_cells_text(table: Any, parent: Any) -> str:
    return " ".join(" ".join(c for c in row if c) for row in _docx_table(table, parent))


def _table_markdown(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    cells = [[c.replace("|", "\\|").replace("\n", " ") for c in r] + [""] * (width - len(r))
             for r in rows]  # fmt: skip
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in cells[1:]]
    return "\n".join(lines)


_MARKDOWN_HEADING = re.compile(r"^#{1,6} (.+)")


def _first_heading(parts: Iterable[str]) -> str:
    """The text of the first markdown heading among extracted blocks ("" when none)."""
    for part in parts:
        match = _MARKDOWN_HEADING.match(part)
        if match:
            return match.group(1).strip()
    return ""


def extract_docx(path: str) -> Result:
    problem = zip_problem(path)
    if problem is not None:
        return problem
    import docx

    try:
        document = docx.Document(path)
    except Exception as error:  # python-docx raises KeyError, ValueError, lxml errors…
        return ExtractionFailure(CORRUPT, f"python-docx could not read it: {error}")
    styles = _DocxStyles(document.styles.element)
    parts: list[str] = []
    for block in _docx_blocks(document.element.body):
        if block.tag == _W + "tbl":
            parts.append(_table_markdown(_docx_table(block, document.part)))
        else:
            parts.append(_docx_paragraph(block, styles))
    metadata = _core_metadata(document.core_properties)
    if placeholder_title(str(metadata.get("title", ""))):
        _replace_title(metadata, _first_heading(parts))
    return _finish(parts, metadata)


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
    first_title = ""
    for number, slide in enumerate(deck.slides, start=1):
        lines: list[str] = []
        title_shape = slide.shapes.title
        if not first_title and title_shape is not None and title_shape.has_text_frame:
            first_title = title_shape.text_frame.text
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
    if placeholder_title(str(metadata.get("title", ""))):  # "PowerPoint Presentation"
        _replace_title(metadata, first_title)
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
        if placeholder_title(str(metadata.get("title", ""))):
            _replace_title(metadata, "")
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
    if placeholder_title(str(metadata.get("title", ""))):  # "Untitled", "Document"
        heading = body.find("h1")
        _replace_title(metadata, heading.get_text(" ") if heading is not None else "")
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

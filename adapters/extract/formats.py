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

import contextlib
import datetime as dt
import io
import posixpath
import re
import zipfile
import zlib
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from adapters.extract import ooxml
from domain.extraction import (
    CORRUPT,
    ENCRYPTED,
    PARSER_ERROR,
    SKIPPED_KEY,
    TOO_LARGE,
    UNREADABLE,
    UNSUPPORTED,
    UNSUPPORTED_VARIANT,
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
    than the limits (a zip bomb), before any parser reads it. A password-protected file and a
    legacy binary file under an OOXML name are named as such, not as damaged
    (REQ-EXTRACT-013)."""
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as error:
        kind = ooxml.compound_file_kind(path)
        if kind == "encrypted":
            return ExtractionFailure(
                ENCRYPTED, "the file is password protected (an encrypted Office package)"
            )
        if kind == "legacy":
            return ExtractionFailure(
                UNSUPPORTED_VARIANT,
                "a legacy binary Office file (.doc, .xls or .ppt) under an Open XML name; "
                "save it as .docx, .xlsx or .pptx",
            )
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


Package = str | io.BytesIO


def _open_package(path: str) -> Package | ExtractionFailure:
    """The file to hand the parser: the path itself, or for Strict OOXML a Transitional copy
    in memory, which the libraries read (REQ-EXTRACT-013)."""
    problem = zip_problem(path)
    if problem is not None:
        return problem
    try:
        with zipfile.ZipFile(path) as archive:
            if ooxml.is_strict(archive):
                return ooxml.transitional_copy(archive)
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        return ExtractionFailure(CORRUPT, f"a part of the package is damaged: {error}")
    return path


def _archive(package: Package) -> zipfile.ZipFile:
    if isinstance(package, io.BytesIO):
        package.seek(0)
    return zipfile.ZipFile(package)


def _parser_failure(library: str, error: Exception) -> ExtractionFailure:
    """A library's refusal: damaged bytes (a broken zip stream, XML that is not well formed)
    are `corrupt`; anything else is the library's limit, `parser-error` with its reason."""
    from lxml import etree

    if isinstance(error, zipfile.BadZipFile | zlib.error | EOFError | etree.XMLSyntaxError):
        return ExtractionFailure(CORRUPT, f"{library} found it damaged: {error}")
    return ExtractionFailure(
        PARSER_ERROR, f"{library} could not read it: {type(error).__name__}: {error}"
    )


def _note_skipped(metadata: dict[str, MetadataValue], notes: list[str]) -> None:
    """Record what the text leaves out, for `status` and the document's metadata
    (REQ-EXTRACT-014)."""
    if notes:
        metadata[SKIPPED_KEY] = notes


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
# control (`w:sdt`), a smart tag, a field, a text box or an equation was lost, and its styles
# know nothing of outline levels or numbering. We walk the XML ourselves (REQ-EXTRACT-002,
# REQ-EXTRACT-012).
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_W_VAL = _W + "val"
_R_ID = "{" + ooxml.R_NS + "}id"
_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)
# Removed text (a tracked deletion, the old place of moved text), properties, field codes.
_DOCX_SKIPPED = frozenset(
    _W + name for name in ("del", "moveFrom", "pPr", "rPr", "instrText", "delInstrText")
)
_DOCX_BODY_TEXT = 9  # `w:outlineLvl` 9: body text, even in a style that says otherwise
_W14 = "{http://schemas.microsoft.com/office/word/2010/wordml}"
_PIC = "{http://schemas.openxmlformats.org/drawingml/2006/picture}pic"
_VML_IMAGE = "{urn:schemas-microsoft-com:vml}imagedata"


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


def _num_pr(properties: Any) -> tuple[str, int] | None:
    """(`w:numId`, `w:ilvl`) of a `w:pPr`'s `w:numPr`, None when it has none."""
    numbering = properties.find(_W + "numPr") if properties is not None else None
    if numbering is None:
        return None
    num_id = numbering.find(_W + "numId")
    level = numbering.find(_W + "ilvl")
    if num_id is None:
        return None
    try:
        return num_id.get(_W_VAL, ""), int(level.get(_W_VAL, "0")) if level is not None else 0
    except ValueError:
        return None


class _DocxStyles:
    """Paragraph styles by id: name, and outline level with `w:basedOn` inheritance (a style
    without its own level takes its parent's, as Word does); built-in "Heading N" and "Title"
    names count when no level is set anywhere up the chain. Numbering set on a style (numbered
    headings) is inherited the same way."""

    def __init__(self, styles_element: Any) -> None:
        self.names: dict[str, str] = {}
        own: dict[str, int | None] = {}
        parents: dict[str, str] = {}
        numbered: dict[str, tuple[str, int] | None] = {}
        self.default = ""
        for style in styles_element.iter(_W + "style"):
            if style.get(_W + "type") != "paragraph":
                continue
            style_id = style.get(_W + "styleId") or ""
            name = style.find(_W + "name")
            self.names[style_id] = (name.get(_W_VAL, "") if name is not None else "") or ""
            own[style_id] = _outline_level(style.find(_W + "pPr"))
            numbered[style_id] = _num_pr(style.find(_W + "pPr"))
            based = style.find(_W + "basedOn")
            if based is not None:
                parents[style_id] = based.get(_W_VAL, "")
            if style.get(_W + "default") in ("1", "true", "on"):
                self.default = style_id
        self.levels = {sid: self._resolve(sid, own, parents) for sid in self.names}
        self.numbering: dict[str, tuple[str, int]] = {}
        for style_id in self.names:
            current, seen = style_id, set()
            while current in numbered and current not in seen:
                seen.add(current)
                found = numbered[current]
                if found is not None:
                    self.numbering[style_id] = found
                    break
                current = parents.get(current, "")

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


def _roman(number: int) -> str:
    out = ""
    for value, letters in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"),
                           (90, "xc"), (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"),
                           (4, "iv"), (1, "i")):  # fmt: skip
        while number >= value:
            out, number = out + letters, number - value
    return out


def _letters(number: int) -> str:
    return chr(ord("a") + (number - 1) % 26) * ((number - 1) // 26 + 1) if number > 0 else ""


_NUMBER_FORMATS: dict[str, Callable[[int], str]] = {
    "decimal": str,
    "decimalZero": lambda n: f"{n:02d}",
    "lowerLetter": _letters,
    "upperLetter": lambda n: _letters(n).upper(),
    "lowerRoman": _roman,
    "upperRoman": lambda n: _roman(n).upper(),
}


class _DocxNumbering:
    """List and heading numbers as Word shows them ("1.", "2.1", "a)"): the numbering part's
    level formats (`w:numFmt`, `w:lvlText`, `w:start`), counted in document order."""

    def __init__(self, numbering_element: Any | None) -> None:
        self._abstract: dict[str, dict[int, tuple[str, str, int]]] = {}
        self._nums: dict[str, str] = {}
        self._starts: dict[tuple[str, int], int] = {}
        self._counters: dict[str, list[int]] = {}
        if numbering_element is None:
            return
        for abstract in numbering_element.iter(_W + "abstractNum"):
            levels: dict[int, tuple[str, str, int]] = {}
            for level in abstract.iter(_W + "lvl"):
                fmt = level.find(_W + "numFmt")
                text = level.find(_W + "lvlText")
                start = level.find(_W + "start")
                try:
                    levels[int(level.get(_W + "ilvl", "0"))] = (
                        fmt.get(_W_VAL, "decimal") if fmt is not None else "decimal",
                        text.get(_W_VAL, "") if text is not None else "",
                        int(start.get(_W_VAL, "1")) if start is not None else 1,
                    )
                except ValueError:
                    continue
            self._abstract[abstract.get(_W + "abstractNumId", "")] = levels
        for num in numbering_element.iter(_W + "num"):
            num_id = num.get(_W + "numId", "")
            abstract_id = num.find(_W + "abstractNumId")
            if abstract_id is not None:
                self._nums[num_id] = abstract_id.get(_W_VAL, "")
            for override in num.iter(_W + "lvlOverride"):
                start = override.find(_W + "startOverride")
                if start is not None:
                    try:
                        level = int(override.get(_W + "ilvl", "0"))
                        self._starts[(num_id, level)] = int(start.get(_W_VAL, "1"))
                    except ValueError:
                        continue

    def label(self, num_id: str, level: int) -> str | None:
        """The next label of list `num_id` at `level` ("-" for a bullet), None when unknown."""
        levels = self._abstract.get(self._nums.get(num_id, ""))
        if not levels or level not in levels or num_id == "0":
            return None
        fmt, text, _start = levels[level]
        if fmt == "bullet":
            return "-"
        counters = self._counters.setdefault(num_id, [0] * 10)
        level = min(level, 9)
        if counters[level] == 0:
            counters[level] = self._start(num_id, level, levels) - 1
        counters[level] += 1
        for deeper in range(level + 1, 10):
            counters[deeper] = 0
        if fmt == "none":
            return ""

        def number(match: re.Match[str]) -> str:
            index = int(match.group(1)) - 1
            if not 0 <= index <= level:
                return ""
            count = counters[index] or self._start(num_id, index, levels)
            style = levels.get(index, ("decimal", "", 1))[0]
            return _NUMBER_FORMATS.get(style, str)(count)

        return re.sub(r"%(\d)", number, text or f"%{level + 1}.").strip()

    def _start(self, num_id: str, level: int, levels: dict[int, tuple[str, str, int]]) -> int:
        return self._starts.get((num_id, level), levels.get(level, ("", "", 1))[2])


class _DocxReader:
    """One DOCX's text: the body in reading order, then its footnotes, endnotes, comments,
    headers and footers; text boxes (once: the `mc:Choice` drawing, not its VML fallback)
    after the paragraph that anchors them; equations as LaTeX; charts and SmartArt as their
    text. What cannot be read as text (pictures, embedded objects) is counted in `skipped`."""

    def __init__(self, document: Any) -> None:
        self.part = document.part
        self.styles = _DocxStyles(document.styles.element)
        numbering = None
        with contextlib.suppress(NotImplementedError, KeyError):  # no numbering part
            numbering = self.part.numbering_part.element
        self.numbering = _DocxNumbering(numbering)
        self.images = 0
        self.objects = 0
        self.skipped: list[str] = []
        self.notes: dict[str, list[str]] = {"footnote": [], "endnote": []}

    # -- text of one paragraph ----------------------------------------------------------------

    def text(self, element: Any, part: Any, boxes: list[Any]) -> str:
        """The visible text of a paragraph as it reads with every tracked change accepted:
        inserted text kept, deleted text dropped. Text boxes met on the way go to `boxes`."""
        out: list[str] = []
        stack = [iter(element)]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                continue
            tag = child.tag
            if not isinstance(tag, str):
                continue
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
            elif tag == _W14 + "checkbox":  # a check box control: its state, as markdown does
                checked = child.find(_W14 + "checked")
                ticked = checked is not None and checked.get(_W14 + "val") in ("1", "true")
                out.append("[x] " if ticked else "[ ] ")
            elif tag == _W + "txbxContent":
                boxes.append(child)
            elif tag == ooxml.MC + "AlternateContent":
                # The same drawing twice: the modern one, and a VML copy for old readers.
                chosen = child.find(ooxml.MC + "Choice")
                if chosen is None:
                    chosen = child.find(ooxml.MC + "Fallback")
                if chosen is not None:
                    stack.append(iter(chosen))
            elif tag == ooxml.M + "oMathPara":
                out.append(" $$" + ooxml.omml_latex(child) + "$$ ")
            elif tag == ooxml.M + "oMath":
                out.append("$" + ooxml.omml_latex(child) + "$")
            elif tag in (_W + "footnoteReference", _W + "endnoteReference"):
                kind = "footnote" if tag == _W + "footnoteReference" else "endnote"
                note_id = child.get(_W + "id", "")
                self.notes[kind].append(note_id)
                out.append(f"[^{kind[0]}{note_id}]")
            elif tag == _W + "hyperlink":
                out.append(self._hyperlink(child, part, boxes))
            elif tag == ooxml.C + "chart":
                out.append("\n" + self._related_text(part, child.get(_R_ID, ""), "chart") + "\n")
            elif tag == ooxml.DGM + "relIds":
                dm = child.get("{" + ooxml.R_NS + "}dm", "")
                out.append("\n" + self._related_text(part, dm, "diagram") + "\n")
            elif tag in (_PIC, _VML_IMAGE):
                self.images += 1
            elif tag == _W + "object":
                self.objects += 1
            elif tag not in _DOCX_SKIPPED:
                stack.append(iter(child))
        return "".join(out)

    def _hyperlink(self, link: Any, part: Any, boxes: list[Any]) -> str:
        """A link to a web address as `[text](address)`: the address is part of what the
        document says; an internal link (a bookmark) is its text."""
        text = self.text(link, part, boxes)
        rel_id = link.get(_R_ID)
        if not rel_id or not text.strip():
            return text
        try:
            relationship = part.rels[rel_id]
        except KeyError:
            return text
        if not relationship.is_external:
            return text
        return f"[{text}]({relationship.target_ref})"

    def _related_text(self, part: Any, rel_id: str, kind: str) -> str:
        try:
            blob = part.related_parts[rel_id].blob
        except (KeyError, AttributeError):
            return ""
        try:
            return ooxml.chart_text(blob) if kind == "chart" else ooxml.diagram_text(blob)
        except Exception as error:  # a damaged chart must not cost the document's text
            self.skipped.append(f"a {kind} (could not be read: {type(error).__name__})")
            return ""

    # -- blocks ------------------------------------------------------------------------------

    def blocks(self, container: Any, part: Any) -> list[str]:
        """Markdown blocks of a body, a cell, a text box, a note or a comment."""
        out: list[str] = []
        for block in _docx_blocks(container):
            boxes: list[Any] = []
            if block.tag == _W + "tbl":
                out.append(ooxml.markdown_table(self.table(block, part, boxes)))
            else:
                out.append(self.paragraph(block, part, boxes))
            for box in boxes:
                out.extend(self.blocks(box, part))
        return [b for b in out if b]

    def paragraph(self, paragraph: Any, part: Any, boxes: list[Any]) -> str:
        text = self.text(paragraph, part, boxes).strip()
        properties = paragraph.find(_W + "pPr")
        style_element = properties.find(_W + "pStyle") if properties is not None else None
        style_id = (
            style_element.get(_W_VAL, "") if style_element is not None else self.styles.default
        ) or self.styles.default
        if not text:
            return ""
        numbered = _num_pr(properties) or self.styles.numbering.get(style_id)
        label = self.numbering.label(*numbered) if numbered is not None else None
        style = self.styles.names.get(style_id, "")
        level = _outline_level(properties)
        if level is None:
            level = self.styles.levels.get(style_id, _DOCX_BODY_TEXT)
        if 0 <= level < _DOCX_BODY_TEXT:
            return "#" * min(level + 1, 6) + " " + (f"{label} " if label else "") + text
        if style.lower() == "title":
            return "# " + text
        if label:
            return f"{label} {text}"
        if style.lower().startswith("list"):
            marker = "1." if "number" in style.lower() else "-"
            return f"{marker} {text}"
        return text

    def table(self, table: Any, part: Any, boxes: list[Any]) -> list[list[str]]:
        """Rows of cell texts, a merged cell repeated over the grid columns it spans and the
        rows it merges down (as python-docx's rows give them), a nested table's text kept."""
        rows: list[list[str]] = []
        above: dict[int, str] = {}
        for row in table.iter(_W + "tr"):
            if row.getparent() is not table:
                continue  # a nested table's rows: read with its cell
            row_properties = row.find(_W + "trPr")
            if row_properties is not None and row_properties.find(_W + "del") is not None:
                continue  # a tracked deleted row
            cells: list[str] = []
            for cell in row.findall(_W + "tc"):
                properties = cell.find(_W + "tcPr")
                span, merged = 1, False
                if properties is not None:
                    grid = properties.find(_W + "gridSpan")
                    with contextlib.suppress(ValueError, TypeError):
                        span = max(1, int(grid.get(_W_VAL, "1"))) if grid is not None else 1
                    vertical = properties.find(_W + "vMerge")
                    merged = vertical is not None and vertical.get(_W_VAL, "continue") != "restart"
                column = len(cells)
                if merged:
                    text = above.get(column, "")
                else:
                    texts: list[str] = []
                    for block in _docx_blocks(cell):
                        if block.tag == _W + "p":
                            texts.append(self.text(block, part, boxes).strip())
                        else:
                            inner = self.table(block, part, boxes)
                            texts.append(" ".join(" ".join(c for c in r if c) for r in inner))
                    text = "\n".join(t for t in texts if t)
                for offset in range(span):
                    above[column + offset] = text
                    cells.append(text)
            rows.append(cells)
        return rows

    # -- the parts around the body ------------------------------------------------------------

    def related(self, suffix: str) -> list[Any]:
        """The document's parts related by a relationship type ending in `suffix`."""
        return [
            rel.target_part
            for rel in self.part.rels.values()
            if not rel.is_external and rel.reltype.endswith(suffix)
        ]

    def notes_text(self, kind: str) -> list[str]:
        """The footnotes (endnotes) referenced in the text, as markdown footnotes."""
        out: list[str] = []
        wanted = set(self.notes[kind])
        for part in self.related("/" + kind + "s"):
            root = _xml(part.blob)
            for note in root.iter(_W + kind):
                note_id = note.get(_W + "id", "")
                if note.get(_W + "type") not in (None, "normal") or note_id not in wanted:
                    continue  # the separator lines Word keeps as notes
                body = " ".join(self.blocks(note, part)).strip()
                if body:
                    out.append(f"[^{kind[0]}{note_id}]: {body}")
        return out

    def comments_text(self) -> list[str]:
        out: list[str] = []
        for part in self.related("/comments"):
            for comment in _xml(part.blob).iter(_W + "comment"):
                body = " ".join(self.blocks(comment, part))
                if body.strip():
                    out.append(
                        ooxml.comment_line(
                            comment.get(_W + "author", ""),
                            comment.get(_W + "date", ""),
                            body,
                            comment.get(_W + "initials", ""),
                        )
                    )
        return out

    def margins_text(self) -> list[str]:
        """Headers and footers, each distinct text once (every page repeats them)."""
        out: list[str] = []
        for suffix in ("/header", "/footer"):
            for part in self.related(suffix):
                text = "\n\n".join(self.blocks(_xml(part.blob), part))
                if text and text not in out:
                    out.append(text)
        return out


def _xml(blob: bytes) -> Any:
    from lxml import etree

    return etree.fromstring(blob, parser=etree.XMLParser(resolve_entities=False, no_network=True))


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


def _table_markdown(rows: list[list[str]]) -> str:
    return ooxml.markdown_table(rows)


_MARKDOWN_HEADING = re.compile(r"^#{1,6} (.+)")


def _first_heading(parts: Iterable[str]) -> str:
    """The text of the first markdown heading among extracted blocks ("" when none)."""
    for part in parts:
        match = _MARKDOWN_HEADING.match(part)
        if match:
            return match.group(1).strip()
    return ""


def _skipped_note(images: int, objects: int) -> list[str]:
    """What the text leaves out, for the report (REQ-EXTRACT-014)."""
    out = []
    if images:
        out.append(f"{images} picture{'s' if images != 1 else ''} (text in images is not read)")
    if objects:
        out.append(f"{objects} embedded object{'s' if objects != 1 else ''}")
    return out


def extract_docx(path: str) -> Result:
    package = _open_package(path)
    if isinstance(package, ExtractionFailure):
        return package
    import docx

    try:
        document = docx.Document(package)
    except Exception as error:  # python-docx raises KeyError, ValueError, lxml errors…
        return _parser_failure("python-docx", error)
    reader = _DocxReader(document)
    parts = reader.blocks(document.element.body, document.part)
    skipped = _skipped_note(reader.images, reader.objects) + reader.skipped
    footnotes = _aside("footnotes", partial(reader.notes_text, "footnote"), skipped)
    endnotes = _aside("endnotes", partial(reader.notes_text, "endnote"), skipped)
    comments = _aside("comments", reader.comments_text, skipped)
    margins = _aside("headers and footers", reader.margins_text, skipped)
    metadata = _core_metadata(document.core_properties)
    if placeholder_title(str(metadata.get("title", ""))):
        _replace_title(metadata, _first_heading(parts))
    _note_skipped(metadata, skipped)
    return _finish([*parts, *footnotes, *endnotes, *comments, *margins], metadata)


def _aside(what: str, read: Callable[[], list[str]], skipped: list[str]) -> list[str]:
    """Text kept apart from the body (notes, comments, headers): a part of it the parser
    cannot read is named in `skipped`, and costs the document none of its other text."""
    try:
        return read()
    except Exception as error:
        skipped.append(f"{what} (could not be read: {type(error).__name__}: {error})")
        return []


_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_GRAPHIC_DATA = ooxml.A + "graphicData"


class _PptxReader:
    """The text of a deck's slides: shapes in groups too, tables, charts, SmartArt, notes and
    comments (legacy and modern), with pictures counted for the report."""

    def __init__(self, deck: Any) -> None:
        self.images = 0
        self.objects = 0
        self.skipped: list[str] = []
        self.authors: dict[str, tuple[str, str]] = {}
        for rel in deck.part.rels.values():
            if rel.is_external or not rel.reltype.endswith(("/commentAuthors", "/authors")):
                continue
            for author in _xml(rel.target_part.blob):
                if not isinstance(author.tag, str):
                    continue
                self.authors[author.get("id", "")] = (
                    author.get("name", ""),
                    author.get("initials", ""),
                )

    def shapes(self, shapes: Any, part: Any) -> list[str]:
        from pptx.shapes.group import GroupShape

        lines: list[str] = []
        for shape in shapes:
            if isinstance(shape, GroupShape):  # (`shape_type` raises on unknown shapes)
                lines.extend(self.shapes(shape.shapes, part))
            elif getattr(shape, "has_text_frame", False) and shape.text_frame.text.strip():
                lines.append(_clean(shape.text_frame.text))
            elif getattr(shape, "has_table", False):
                lines.append(_table_markdown(_pptx_table(shape.table)))
            elif getattr(shape, "has_chart", False):
                try:
                    lines.append(ooxml.chart_text(shape.chart.part.blob))
                except Exception as error:  # a damaged chart must not cost the deck's text
                    self.skipped.append(f"a chart (could not be read: {type(error).__name__})")
            else:
                lines.extend(self._graphic(shape, part))
        return [line for line in lines if line]

    def _graphic(self, shape: Any, part: Any) -> list[str]:
        element = shape.element
        data = element.find(".//" + _GRAPHIC_DATA)
        if data is not None and data.get("uri") == ooxml.DIAGRAM_URI:
            ids = data.find(ooxml.DGM + "relIds")
            rel_id = ids.get("{" + ooxml.R_NS + "}dm", "") if ids is not None else ""
            with contextlib.suppress(KeyError, AttributeError):
                return [ooxml.diagram_text(part.related_parts[rel_id].blob)]
        if element.tag == _P + "pic":
            self.images += 1
        elif data is not None and "ole" in str(data.get("uri", "")).lower():
            self.objects += 1
        return []

    def comments(self, part: Any) -> list[str]:
        out: list[str] = []
        for rel in part.rels.values():
            if rel.is_external or not rel.reltype.endswith("/comments"):
                continue
            for comment in _xml(rel.target_part.blob).iter():
                local = str(comment.tag).rsplit("}", 1)[-1]
                if local not in ("cm", "reply"):
                    continue
                body = next((c for c in comment if str(c.tag).endswith(("}text", "}txBody"))), None)
                if body is None:
                    continue
                text = (
                    body.text or ""
                    if str(body.tag).endswith("}text")
                    else ooxml.paragraphs_text(body, ooxml.A)
                )
                name, initials = self.authors.get(comment.get("authorId", ""), ("", ""))
                when = comment.get("dt") or comment.get("created") or ""
                if text.strip():
                    out.append(ooxml.comment_line(name, when, text, initials))
        return out


def _pptx_table(table: Any) -> list[list[str]]:
    """Rows of cell texts, a merged cell's text repeated over the cells it spans, as DOCX
    tables give them."""
    rows = [[c.text.strip() for c in row.cells] for row in table.rows]
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            if not cell.is_merge_origin:
                continue
            for down in range(r, min(r + cell.span_height, len(rows))):
                for across in range(c, min(c + cell.span_width, len(rows[down]))):
                    rows[down][across] = rows[r][c]
    return rows


def _xlsx_merges(archive: zipfile.ZipFile, sheet_part: str) -> list[tuple[int, int, int, int]]:
    """The merged ranges of a sheet as (first row, first column, last row, last column)."""
    from openpyxl.utils.cell import range_boundaries

    out = []
    try:
        root = _xml(archive.read(sheet_part))
    except KeyError:
        return []
    for merge in root.iter(_X + "mergeCell"):
        with contextlib.suppress(ValueError, TypeError):
            first_col, first_row, last_col, last_row = range_boundaries(merge.get("ref", ""))
            out.append((first_row, first_col, last_row, last_col))
    return out


def _fill_merges(grid: dict[int, list[str]], merges: list[tuple[int, int, int, int]]) -> None:
    """Repeat a merged range's value over its cells, in the rows read (rows and columns are
    1-based); a range that reaches past them adds no rows."""
    for first_row, first_col, last_row, last_col in merges:
        origin = grid.get(first_row)
        if origin is None or first_col > len(origin) or not origin[first_col - 1]:
            continue
        value = origin[first_col - 1]
        for number in range(first_row, last_row + 1):
            row = grid.get(number)
            if row is None:
                if number > max(grid):
                    break
                row = grid[number] = [""] * last_col
            row.extend([""] * (last_col - len(row)))
            for column in range(first_col, last_col + 1):
                row[column - 1] = value


def extract_pptx(path: str) -> Result:
    package = _open_package(path)
    if isinstance(package, ExtractionFailure):
        return package
    import pptx

    try:
        deck = pptx.Presentation(package)
    except Exception as error:
        return _parser_failure("python-pptx", error)
    reader = _PptxReader(deck)
    parts: list[str] = []
    first_title = ""
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        if not first_title and title_shape is not None and title_shape.has_text_frame:
            first_title = title_shape.text_frame.text
        lines = reader.shapes(slide.shapes, slide.part)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = _clean(slide.notes_slide.notes_text_frame.text)
            if notes:
                lines.append(f"Notes: {notes}")
        lines.extend(_aside("comments", partial(reader.comments, slide.part), reader.skipped))
        body = "\n\n".join(lines) if lines else "[no text on this slide]"
        parts.append(f"## Slide {number}\n\n{body}")
    metadata = _core_metadata(deck.core_properties)
    if placeholder_title(str(metadata.get("title", ""))):  # "PowerPoint Presentation"
        _replace_title(metadata, first_title)
    metadata["slides"] = len(parts)
    _note_skipped(metadata, _skipped_note(reader.images, reader.objects) + reader.skipped)
    return _finish(parts, metadata, pages=len(parts))


_X = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_TC = "{http://schemas.microsoft.com/office/spreadsheetml/2018/threadedcomments}"
_PKG_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"


def _rels(archive: zipfile.ZipFile, part: str) -> list[tuple[str, str]]:
    """(type, part name) of a part's internal relationships."""
    folder, name = posixpath.split(part)
    try:
        root = _xml(archive.read(posixpath.join(folder, "_rels", name + ".rels")))
    except KeyError:
        return []
    out = []
    for rel in root.iter(_PKG_REL):
        if rel.get("TargetMode") == "External":
            continue
        out.append((rel.get("Type", ""), _resolve(folder, rel.get("Target", ""))))
    return out


def _resolve(folder: str, target: str) -> str:
    """A relationship's target as a part name: relative to the source's folder, or absolute."""
    if target.startswith("/"):
        return target.lstrip("/")
    return posixpath.normpath(posixpath.join(folder, target))


def _xlsx_sheet_extras(
    archive: zipfile.ZipFile, sheet_part: str, people: dict[str, str]
) -> list[str]:
    """Charts, drawn text boxes, comments and threaded comments of one sheet (or chart
    sheet), which openpyxl's read-only cells do not give: drawings first, then comments."""
    drawings: list[str] = []
    threaded: list[str] = []
    threaded_cells: set[str] = set()
    legacy: list[tuple[str, str]] = []
    for kind, target in _rels(archive, sheet_part):
        try:
            blob = archive.read(target)
        except KeyError:
            continue
        if kind.endswith("/threadedComment"):
            for comment in _xml(blob).iter(_TC + "threadedComment"):
                threaded_cells.add(comment.get("ref", ""))
                text = comment.find(_TC + "text")
                threaded.append(
                    ooxml.comment_line(
                        people.get(comment.get("personId", ""), ""),
                        comment.get("dT", ""),
                        text.text or "" if text is not None else "",
                    )
                )
        elif kind.endswith("/comments"):
            root = _xml(blob)
            authors = [a.text or "" for a in root.iter(_X + "author")]
            for comment in root.iter(_X + "comment"):
                try:
                    author = authors[int(comment.get("authorId", "0"))]
                except (ValueError, IndexError):
                    author = ""
                text = "".join(t.text or "" for t in comment.iter(_X + "t"))
                legacy.append((comment.get("ref", ""), ooxml.comment_line(author, "", text)))
        elif kind.endswith("/drawing"):
            for inner_kind, chart in _rels(archive, target):
                if inner_kind.endswith("/chart"):
                    with contextlib.suppress(KeyError):
                        drawings.append(ooxml.chart_text(archive.read(chart)))
            drawings += ooxml.drawing_shapes_text(blob)
    # Excel keeps a plain copy of each threaded comment for older readers: once is enough.
    comments = [line for ref, line in legacy if ref not in threaded_cells] + threaded
    return [line for line in drawings + comments if line]


def _xlsx_sheets(archive: zipfile.ZipFile) -> list[tuple[str, str]]:
    """(name, part) of every sheet in workbook order, chart sheets included."""
    workbook = next(
        (target for kind, target in _rels(archive, "") if kind.endswith("/officeDocument")),
        "xl/workbook.xml",
    )
    by_id = {}
    folder, name = posixpath.split(workbook)
    try:
        rels_root = _xml(archive.read(posixpath.join(folder, "_rels", name + ".rels")))
        root = _xml(archive.read(workbook))
    except KeyError:
        return []
    for rel in rels_root.iter(_PKG_REL):
        by_id[rel.get("Id", "")] = _resolve(folder, rel.get("Target", ""))
    return [
        (sheet.get("name", ""), by_id.get(sheet.get("{" + ooxml.R_NS + "}id", ""), ""))
        for sheet in root.iter(_X + "sheet")
    ]


def _xlsx_people(archive: zipfile.ZipFile) -> dict[str, str]:
    people = {}
    for entry in archive.namelist():
        if entry.startswith("xl/persons/") and entry.endswith(".xml"):
            for person in _xml(archive.read(entry)).iter():
                if str(person.tag).endswith("}person"):
                    people[person.get("id", "")] = person.get("displayName", "")
    return people


def extract_xlsx(path: str) -> Result:
    package = _open_package(path)
    if isinstance(package, ExtractionFailure):
        return package
    import openpyxl

    try:
        book = openpyxl.load_workbook(package, read_only=True, data_only=True)
    except Exception as error:
        return _parser_failure("openpyxl", error)
    try:
        with _archive(package) as archive:
            people = _xlsx_people(archive)
            sheets = _xlsx_sheets(archive) or [(s.title, "") for s in book.worksheets]
            parts: list[str] = []
            skipped: list[str] = []
            names = set(book.sheetnames)
            for title, part in sheets:
                blocks: list[str] = []
                if title in names and book[title] in book.worksheets:
                    sheet = book[title]
                    grid: dict[int, list[str]] = {}  # non-empty rows by 1-based number
                    cut = False
                    # From A1, so a merged range's address finds its cells in `grid`.
                    rows_read = sheet.iter_rows(min_row=1, min_col=1, values_only=True)
                    for number, row in enumerate(rows_read, start=1):
                        cells = ["" if v is None else str(v) for v in row]
                        if not any(cells):
                            continue
                        if len(grid) >= MAX_SHEET_ROWS:
                            cut = True
                            break
                        grid[number] = cells
                    if part:
                        _fill_merges(grid, _xlsx_merges(archive, part))
                    rows = [grid[number] for number in sorted(grid)]
                    if rows:
                        blocks.append(_table_markdown(rows))
                    if cut:
                        blocks.append(f"[cut after {MAX_SHEET_ROWS:,} rows]")
                        skipped.append(f"rows after {MAX_SHEET_ROWS:,} of sheet {title}")
                if part:
                    blocks += _aside(
                        f"comments, charts and drawings of sheet {title}",
                        partial(_xlsx_sheet_extras, archive, part, people),
                        skipped,
                    )
                body = "\n\n".join(blocks) if blocks else "[empty sheet]"
                parts.append(f"## Sheet: {title}\n\n{body}")
        metadata = _core_metadata(book.properties)
        if placeholder_title(str(metadata.get("title", ""))):
            _replace_title(metadata, "")
        metadata["sheets"] = len(parts)
        _note_skipped(metadata, skipped)
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


_PARSERS = {"pdf": "PDFium", "docx": "python-docx", "pptx": "python-pptx", "xlsx": "openpyxl"}


def extract_file(path: str, file_format: str) -> Result:
    """Run the extractor for `file_format`; a parser's unexpected exception is a
    `parser-error` (or `corrupt` when the bytes are damaged)."""
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
    except Exception as error:  # the parser's own limit, with its reason (REQ-EXTRACT-013)
        return _parser_failure(_PARSERS.get(file_format, file_format), error)

"""Writes the real documents the extraction tests and the benchmark index: PDFs written by hand
(no PDF library needed: text pages in Helvetica, and "scanned" pages holding only an image), DOCX
through python-docx, HTML and markdown, plus the hostile ones (a corrupt PDF, a zip bomb named
`.docx`). `build_fixture(folder)` lays out the mixed folder of the end-to-end tests.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

# A page is a list of text lines, None for a scanned page (an image, no text layer), or an
# empty list for a blank page (nothing drawn on it).
Page = Sequence[str] | None


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(
    pages: Sequence[Page], title: str = "", author: str = "", heading: Sequence[str] = ()
) -> bytes:
    """A valid PDF 1.4 with one page per entry of `pages`. `heading`: lines set large above
    the first text page's lines, as many producers write them (the font at size 1, scaled to
    24 points by the text matrix)."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled below
    pages_obj = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    # an 8x8 grey "scan": deflated samples, drawn over the whole page
    samples = zlib.compress(bytes((x * 29 + y * 13) % 256 for y in range(8) for x in range(8)))
    image = add(
        b"<< /Type /XObject /Subtype /Image /Width 8 /Height 8 /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n"
        % len(samples)
        + samples
        + b"\nendstream"
    )
    kids: list[int] = []
    for page in pages:
        if page is None:
            stream = b"q 612 0 0 792 0 0 cm /Im1 Do Q"
            resources = b"<< /XObject << /Im1 %d 0 R >> >>" % image
        elif not page:
            stream, resources = b"", b"<< >>"
        else:
            ops = []
            if heading:
                ops.append("BT /F1 1 Tf 24 0 0 24 72 740 Tm 1.2 TL")
                ops += [f"({_escape(line)}) Tj T*" for line in heading]
                ops.append("ET")
                heading = ()
            ops.append("BT /F1 12 Tf 14 TL 72 660 Td" if ops else "BT /F1 12 Tf 14 TL 72 720 Td")
            ops += [f"({_escape(line)}) Tj T*" for line in page]
            ops.append("ET")
            stream = "\n".join(ops).encode("latin-1")
            resources = b"<< /Font << /F1 %d 0 R >> >>" % font
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources %s "
                b"/Contents %d 0 R >>" % (pages_obj, resources, content)
            )
        )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages_obj
    objects[pages_obj - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    info = add(
        b"<< /Title (%s) /Author (%s) /CreationDate (D:20240315093000) >>"
        % (_escape(title).encode("latin-1"), _escape(author).encode("latin-1"))
    )
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        catalog,
        info,
        xref,
    )
    return bytes(out)


def write_pdf(
    path: Path,
    pages: Sequence[Page],
    title: str = "",
    author: str = "",
    heading: Sequence[str] = (),
) -> Path:
    path.write_bytes(pdf_bytes(pages, title, author, heading))
    return path


def long_pdf(path: Path, page_count: int) -> Path:
    """A report of `page_count` text pages (the benchmark's 200-page PDF)."""
    line = "Line {i}: flow rate {rate} litres per minute, pressure nominal."
    pages = [
        [f"Section {n}: measurements of the cooling loop, run {n}."]
        + [line.format(i=i, rate=n * i % 97) for i in range(40)]
        for n in range(1, page_count + 1)
    ]
    return write_pdf(path, pages, title=f"Report of {page_count} pages", author="Bench")


def write_docx(path: Path, title: str, sections: Sequence[tuple[str, Sequence[str]]]) -> Path:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.author = "Dana Docx"
    document.add_heading(title, level=1)
    for heading, paragraphs in sections:
        document.add_heading(heading, level=2)
        for text in paragraphs:
            document.add_paragraph(text)
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate((("Part", "Count"), ("gasket", "12"))):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.save(str(path))
    return path


def write_pptx(path: Path, slides: Sequence[tuple[str, str]]) -> Path:
    """A deck of (title, body) slides, with the title in the core properties."""
    import pptx

    deck = pptx.Presentation()
    deck.core_properties.title = "Quarterly Review"
    deck.core_properties.author = "Pia Pptx"
    layout = deck.slide_layouts[1]  # title and content
    for title, body in slides:
        slide = deck.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.save(str(path))
    return path


def write_xlsx(path: Path, sheets: dict[str, Sequence[Sequence[object]]]) -> Path:
    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(list(row))
    book.properties.creator = "Xavi Xlsx"
    book.save(str(path))
    return path


def write_zip_bomb(path: Path, inflated_bytes: int = 80 * 1024 * 1024) -> Path:
    """A `.docx`-named zip whose document part inflates to `inflated_bytes` of zeros."""
    block = b"\0" * (1 << 20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            for _ in range(inflated_bytes // len(block)):
                member.write(block)
    return path


def write_corrupt_pdf(path: Path) -> Path:
    good = pdf_bytes([["This file was cut short."]])
    path.write_bytes(good[:40] + b"\x00garbage" * 10)
    return path


HTML = """<!doctype html>
<html><head><title>Harbour Guide</title>
<meta name="author" content="Hana Html"><meta name="keywords" content="harbour, tides">
<style>body { color: red }</style><script>var hidden = "scriptword";</script></head>
<body><h1>Harbour Guide</h1>
<p>The <b>lighthouse</b> keeper logs every tide.</p>
<h2>Moorings</h2><ul><li>Berth one: ferries</li><li>Berth two: trawlers</li></ul>
</body></html>
"""

MARKDOWN = "# Field notes\n\nThe glacier retreated forty metres this year.\n"


def build_fixture(folder: Path, hostile: bool = True) -> dict[str, Path]:
    """The mixed folder: a 3-page PDF whose page 2 is scanned, a DOCX, an HTML page, a
    markdown note, and (with `hostile`) a corrupt PDF and a zip bomb named `.docx`."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "pdf": write_pdf(
            folder / "survey.pdf",
            [
                ["Coastal survey", "The albatross colony grew this season."],
                None,
                ["Appendix", "Sediment cores were taken near the estuary."],
            ],
            title="Coastal Survey 2024",
            author="Pat Pdf",
        ),
        "docx": write_docx(
            folder / "handbook.docx",
            "Workshop Handbook",
            [("Safety", ["Wear goggles near the lathe."]), ("Tools", ["The torque wrench."])],
        ),
        "html": folder / "guide.html",
        "md": folder / "notes.md",
    }
    files["html"].write_text(HTML, encoding="utf-8")
    files["md"].write_text(MARKDOWN, encoding="utf-8")
    if hostile:
        files["corrupt"] = write_corrupt_pdf(folder / "broken.pdf")
        files["bomb"] = write_zip_bomb(folder / "bomb.docx")
    return files

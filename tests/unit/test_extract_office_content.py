"""Office text a reader sees that extraction used to drop, and failure labels that say what
happened (issue 36; REQ-EXTRACT-012, REQ-EXTRACT-013, REQ-EXTRACT-014).

The documents are written here part by part (an Office file is XML in a zip), so each holds
exactly the feature under test: a text box stored twice (drawing and VML fallback), an OMML
equation, a comment, a footnote."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from adapters.extract.formats import extract_file
from domain.extraction import (
    CORRUPT,
    ENCRYPTED,
    PARSER_ERROR,
    SKIPPED_KEY,
    UNSUPPORTED_VARIANT,
    Extracted,
    ExtractionFailure,
    ExtractionReport,
    ExtractionState,
    report_lines,
)
from tooling.docgen import write_pptx, write_xlsx

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "docling"
ENCRYPTED_FILES = Path(__file__).resolve().parents[1] / "data" / "extraction"

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
NAMESPACES = (
    f'xmlns:w="{W}" xmlns:r="{R}" '
    'xmlns:m="http://schemas.openxmlformats.org/officeDocument/2006/math" '
    'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
    'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
    'xmlns:v="urn:schemas-microsoft-com:vml" mc:Ignorable=""'
)
MAIN_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
TYPES = {
    "footnotes": "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml",
    "comments": "application/vnd.openxmlformats-officedocument.wordprocessingml.comments+xml",
}


def write_docx_xml(
    path: Path, body: str, parts: dict[str, str] | None = None, main_type: str = MAIN_TYPE
) -> Path:
    """A DOCX whose body is `body` (WordprocessingML), with extra parts (`footnotes`,
    `comments`) related to the document."""
    parts = parts or {}
    overrides = "".join(
        f'<Override PartName="/word/{name}.xml" ContentType="{TYPES[name]}"/>' for name in parts
    )
    rels = "".join(
        f'<Relationship Id="rId{n}" Type="{R}/{name}" Target="{name}.xml"/>'
        for n, name in enumerate(parts, start=10)
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
            'content-types"><Default Extension="rels" ContentType="application/vnd.openxml'
            'formats-package.relationships+xml"/><Default Extension="xml" ContentType='
            f'"application/xml"/><Override PartName="/word/document.xml" ContentType='
            f'"{main_type}"/>{overrides}</Types>',
        )
        archive.writestr(
            "_rels/.rels",
            '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/'
            f'package/2006/relationships"><Relationship Id="rId1" Type="{R}/officeDocument" '
            'Target="word/document.xml"/></Relationships>',
        )
        archive.writestr(
            "word/_rels/document.xml.rels",
            '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/'
            f'package/2006/relationships">{rels}</Relationships>',
        )
        archive.writestr(
            "word/document.xml",
            f'<?xml version="1.0"?><w:document {NAMESPACES}><w:body>{body}</w:body></w:document>',
        )
        for name, xml in parts.items():
            archive.writestr(f"word/{name}.xml", xml)
    return path


def para(text: str) -> str:
    return f"<w:p><w:r><w:t xml:space='preserve'>{text}</w:t></w:r></w:p>"


def docx_text(path: Path) -> str:
    outcome = extract_file(str(path), "docx")
    assert isinstance(outcome, Extracted), outcome
    return outcome.text


# -- text a reader sees (REQ-EXTRACT-012) ------------------------------------------------------


def test_a_text_box_is_read_once_from_the_drawing_not_its_fallback(tmp_path: Path) -> None:
    box = "<w:txbxContent>" + para("Report within 24 hours") + "</w:txbxContent>"
    body = (
        "<w:p><w:r><w:t>Flow start</w:t></w:r><w:r><mc:AlternateContent>"
        '<mc:Choice Requires="wps"><w:drawing><wp:anchor><a:graphic><a:graphicData>'
        f"<wps:wsp><wps:txbx>{box}</wps:txbx></wps:wsp>"
        "</a:graphicData></a:graphic></wp:anchor></w:drawing></mc:Choice>"
        f"<mc:Fallback><w:pict><v:shape><v:textbox>{box}</v:textbox></v:shape></w:pict>"
        "</mc:Fallback></mc:AlternateContent></w:r></w:p>"
    )
    text = docx_text(write_docx_xml(tmp_path / "flow.docx", body))
    assert "Flow start" in text
    assert text.count("Report within 24 hours") == 1


def test_an_equation_reads_as_latex(tmp_path: Path) -> None:
    equation = (
        "<m:oMath><m:r><m:t>A=</m:t></m:r><m:r><m:t>π</m:t></m:r>"
        "<m:sSup><m:e><m:r><m:t>r</m:t></m:r></m:e><m:sup><m:r><m:t>2</m:t></m:r></m:sup>"
        "</m:sSup><m:r><m:t>+</m:t></m:r><m:f><m:num><m:r><m:t>a</m:t></m:r></m:num>"
        "<m:den><m:r><m:t>b</m:t></m:r></m:den></m:f></m:oMath>"
    )
    body = f"<w:p><w:r><w:t xml:space='preserve'>The area is </w:t></w:r>{equation}</w:p>"
    text = docx_text(write_docx_xml(tmp_path / "area.docx", body))
    assert r"The area is $A=\pi {r}^{2}+\frac{a}{b}$" in text


def test_a_footnote_is_kept_as_a_markdown_footnote(tmp_path: Path) -> None:
    body = (
        '<w:p><w:r><w:t>Ducks migrate</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r></w:p>'
    )
    footnotes = (
        f'<?xml version="1.0"?><w:footnotes xmlns:w="{W}">'
        '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p>'
        '</w:footnote><w:footnote w:id="1">'
        + para("Counted in the 2024 survey")
        + "</w:footnote></w:footnotes>"
    )
    text = docx_text(write_docx_xml(tmp_path / "notes.docx", body, {"footnotes": footnotes}))
    assert "Ducks migrate[^f1]" in text
    assert "[^f1]: Counted in the 2024 survey" in text


def test_a_word_comment_is_kept_with_its_author(tmp_path: Path) -> None:
    comments = (
        f'<?xml version="1.0"?><w:comments xmlns:w="{W}"><w:comment w:id="0" '
        'w:author="Jane Editor" w:initials="JE" w:date="2026-01-02T03:04:05Z">'
        + para("Cite the source")
        + "</w:comment></w:comments>"
    )
    path = write_docx_xml(tmp_path / "c.docx", para("Body"), {"comments": comments})
    assert "[author: Jane Editor (JE), time: 2026-01-02T03:04:05Z]: Cite the source" in (
        docx_text(path)
    )


def test_a_spreadsheet_comment_is_kept(tmp_path: Path) -> None:
    import openpyxl
    from openpyxl.comments import Comment

    path = write_xlsx(tmp_path / "book.xlsx", {"Ducks": [["Year", "Count"], [2024, 310]]})
    book = openpyxl.load_workbook(path)
    book["Ducks"]["B2"].comment = Comment("Highest count so far", "John Reviewer")
    book.save(path)
    outcome = extract_file(str(path), "xlsx")
    assert isinstance(outcome, Extracted), outcome
    assert "[author: John Reviewer]: Highest count so far" in outcome.text


def test_a_slide_comment_is_kept(tmp_path: Path) -> None:
    path = write_pptx(tmp_path / "deck.pptx", [("Migration", "Ducks fly south")])
    presentation_ml = "http://schemas.openxmlformats.org/presentationml/2006/main"
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(
            "ppt/comments/comment1.xml",
            f'<?xml version="1.0"?><p:cmLst xmlns:p="{presentation_ml}"><p:cm authorId="0" '
            'dt="2026-01-01T00:00:00"><p:pos x="0" y="0"/><p:text>Check the dates</p:text>'
            "</p:cm></p:cmLst>",
        )
        rels = archive.read("ppt/slides/_rels/slide1.xml.rels").decode()
        types = archive.read("[Content_Types].xml").decode()
    comment_rel = (
        f'<Relationship Id="rId99" Type="{R}/comments" Target="../comments/comment1.xml"/>'
    )
    comment_type = (
        '<Override PartName="/ppt/comments/comment1.xml" ContentType="application/'
        'vnd.openxmlformats-officedocument.presentationml.comments+xml"/>'
    )
    _replace_parts(
        path,
        {
            "ppt/slides/_rels/slide1.xml.rels": rels.replace(
                "</Relationships>", comment_rel + "</Relationships>"
            ),
            "[Content_Types].xml": types.replace("</Types>", comment_type + "</Types>"),
        },
    )
    outcome = extract_file(str(path), "pptx")
    assert isinstance(outcome, Extracted), outcome
    assert "[author: unknown, time: 2026-01-01T00:00:00]: Check the dates" in outcome.text


def _replace_parts(path: Path, parts: dict[str, str]) -> None:
    with zipfile.ZipFile(path) as archive:
        kept = {i.filename: archive.read(i) for i in archive.infolist()}
    kept.update({name: text.encode() for name, text in parts.items()})
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in kept.items():
            archive.writestr(name, data)


def test_a_picture_is_reported_as_not_read(tmp_path: Path) -> None:
    body = (
        "<w:p><w:r><w:t>Chart below</w:t></w:r><w:r><w:drawing><wp:inline><a:graphic>"
        "<a:graphicData><pic:pic xmlns:pic='http://schemas.openxmlformats.org/drawingml/"
        "2006/picture'/></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>"
    )
    outcome = extract_file(str(write_docx_xml(tmp_path / "p.docx", body)), "docx")
    assert isinstance(outcome, Extracted), outcome
    assert outcome.metadata[SKIPPED_KEY] == ["1 picture (text in images is not read)"]


def test_status_lines_name_what_an_indexed_file_left_out() -> None:
    state = ExtractionState("docs", "p.docx", "ok", detail="1 picture (text in images is not read)")
    assert report_lines(ExtractionReport(partial=(state,))) == [
        "1 file indexed with some content not read as text:",
        "  - docs/p.docx: not read: 1 picture (text in images is not read)",
    ]


# -- failure labels (REQ-EXTRACT-013) ---------------------------------------------------------


def test_strict_ooxml_is_read() -> None:
    text = docx_text(FIXTURES / "docx" / "Strict.docx")
    assert text.strip()


def _compound_file(path: Path, stream_names: tuple[str, ...]) -> Path:
    """The head of an OLE compound file whose directory (sector 0, right after the header)
    names `stream_names`, as a .doc's does: no library here writes a .doc."""
    header = bytearray(512)
    header[:8] = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
    header[30:32] = (9).to_bytes(2, "little")  # 512-byte sectors
    header[48:52] = (0).to_bytes(4, "little")  # the directory starts at sector 0
    directory = b"".join(name.encode("utf-16-le").ljust(64, b"\0") + b"\0" * 64
                         for name in ("Root Entry", *stream_names))  # fmt: skip
    path.write_bytes(bytes(header) + directory)
    return path


@pytest.mark.parametrize("file_format", ["docx", "xlsx", "pptx"])
def test_an_encrypted_office_file_is_encrypted(file_format: str) -> None:
    """Real password-protected files (tests/data/extraction/README.md says how they were
    made), which used to be reported 'corrupt'."""
    path = ENCRYPTED_FILES / f"encrypted.{file_format}"
    outcome = extract_file(str(path), file_format)
    assert isinstance(outcome, ExtractionFailure)
    assert outcome.reason == ENCRYPTED


def test_a_legacy_binary_file_under_a_new_name_is_an_unsupported_variant(tmp_path: Path) -> None:
    path = _compound_file(tmp_path / "old.docx", ("WordDocument", "1Table"))
    outcome = extract_file(str(path), "docx")
    assert isinstance(outcome, ExtractionFailure)
    assert outcome.reason == UNSUPPORTED_VARIANT


def test_a_file_the_parser_refuses_is_a_parser_error_with_its_reason(tmp_path: Path) -> None:
    macro_type = "application/vnd.ms-word.document.macroEnabled.main+xml"
    path = write_docx_xml(tmp_path / "macros.docx", para("Hello"), main_type=macro_type)
    outcome = extract_file(str(path), "docx")
    assert isinstance(outcome, ExtractionFailure)
    assert outcome.reason == PARSER_ERROR
    assert "python-docx" in outcome.detail and "macroEnabled" in outcome.detail


def test_a_table_python_docx_cannot_walk_is_read(tmp_path: Path) -> None:
    """A vertical merge over a row that lacks the merged column's cell (as in unstructured's
    `grid_offset_error.docx`): python-docx raises "no `tc` element at grid_offset=1", which
    made the whole file 'corrupt'; the table's words are all there."""
    cell = "<w:tc>{}{}</w:tc>"
    restart = "<w:tcPr><w:vMerge w:val='restart'/></w:tcPr>"
    follow = "<w:tcPr><w:vMerge/></w:tcPr>"
    body = (
        "<w:tbl><w:tblGrid><w:gridCol w:w='4320'/><w:gridCol w:w='4320'/></w:tblGrid>"
        f"<w:tr>{cell.format('', para('Alpha'))}{cell.format(restart, para('Merged B1-B3'))}</w:tr>"
        f"<w:tr>{cell.format('', para(''))}</w:tr>"
        f"<w:tr>{cell.format('', para('Gamma'))}{cell.format(follow, para(''))}</w:tr>"
        "</w:tbl>"
    )
    text = docx_text(write_docx_xml(tmp_path / "grid.docx", body))
    assert "| Alpha | Merged B1-B3 |" in text and "| Gamma | Merged B1-B3 |" in text


def test_a_damaged_file_is_corrupt(tmp_path: Path) -> None:
    whole = write_docx_xml(tmp_path / "whole.docx", para("Hello")).read_bytes()
    damaged = tmp_path / "damaged.docx"
    damaged.write_bytes(whole[: len(whole) // 2])
    outcome = extract_file(str(damaged), "docx")
    assert isinstance(outcome, ExtractionFailure)
    assert outcome.reason == CORRUPT

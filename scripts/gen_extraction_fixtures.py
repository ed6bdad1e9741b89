"""Regenerates the real-world-shaped extraction fixtures in tests/data/extraction/ with
LibreOffice (headless), for what no Python library writes the way Word and publishers do:

* `tracked-changes.docx`: a chapter with tracked insertions (one splitting a word, as Word
  records an edit inside a word) and deletions, headings only in publisher styles that carry
  an outline level (one through `basedOn` inheritance, one set on the paragraph itself), and
  no title in its core properties.
* `producer-title.pdf`: a PDF whose Info title is the "Microsoft Word - Kalman15.doc" kind of
  artefact, a large-font title line on page 1, a blank page 2, an image-only page 3 (what a
  scan looks like) and a text page 4.

The sources are Flat ODF text written here; `soffice --convert-to` turns them into DOCX and
PDF. The outputs are committed (a few KB each), so tests and CI never need LibreOffice:

    apt-get install -y --no-install-recommends libreoffice-writer-nogui
    python scripts/gen_extraction_fixtures.py [--out tests/data/extraction]

LibreOffice stamps dates into its output, so regenerated files differ in bytes, not in text.
"""

from __future__ import annotations

import argparse
import base64
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "extraction"

NAMESPACES = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
    'xmlns:xlink="http://www.w3.org/1999/xlink" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/" '
    'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0"'
)


def _document(meta: str, styles: str, automatic: str, body: str) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<office:document {NAMESPACES} office:version="1.3" '
        'office:mimetype="application/vnd.oasis.opendocument.text">\n'
        f"<office:meta>{meta}</office:meta>\n"
        f"<office:styles>{styles}</office:styles>\n"
        f"<office:automatic-styles>{automatic}</office:automatic-styles>\n"
        f"<office:body><office:text>{body}</office:text></office:body>\n"
        "</office:document>\n"
    )


def _change(change_id: str, kind: str, deleted: str = "") -> str:
    info = (
        "<office:change-info><dc:creator>Copy Editor</dc:creator>"
        "<dc:date>2024-02-01T10:00:00</dc:date></office:change-info>"
    )
    inner = f"{info}<text:p>{deleted}</text:p>" if kind == "deletion" else info
    return (
        f'<text:changed-region text:id="{change_id}">'
        f"<text:{kind}>{inner}</text:{kind}></text:changed-region>"
    )


def _inserted(change_id: str, text: str) -> str:
    return (
        f'<text:change-start text:change-id="{change_id}"/>{text}'
        f'<text:change-end text:change-id="{change_id}"/>'
    )


def tracked_changes_fodt() -> str:
    """Publisher styles (no built-in "Heading N"): `PUB Chapter` has outline level 1,
    `PUB Chapter Numbered` inherits it through its parent, `PUB A-Head` has level 2; one
    paragraph in a plain style gets outline level 3 on the paragraph itself."""
    styles = (
        '<style:style style:name="Standard" style:family="paragraph" style:class="text"/>'
        '<style:style style:name="PUB_20_Chapter" style:display-name="PUB Chapter" '
        'style:family="paragraph" style:parent-style-name="Standard" '
        'style:default-outline-level="1">'
        '<style:text-properties fo:font-size="20pt" fo:font-weight="bold"/></style:style>'
        '<style:style style:name="PUB_20_Chapter_20_Numbered" '
        'style:display-name="PUB Chapter Numbered" style:family="paragraph" '
        'style:parent-style-name="PUB_20_Chapter"/>'
        '<style:style style:name="PUB_20_A-Head" style:display-name="PUB A-Head" '
        'style:family="paragraph" style:parent-style-name="Standard" '
        'style:default-outline-level="2">'
        '<style:text-properties fo:font-size="14pt" fo:font-weight="bold"/></style:style>'
        '<style:style style:name="PUB_20_Body" style:display-name="PUB Body" '
        'style:family="paragraph" style:parent-style-name="Standard"/>'
    )
    changes = (
        "<text:tracked-changes>"
        + _change("ct1", "insertion")
        + _change("ct2", "deletion", "never ")
        + _change("ct3", "insertion")
        + _change("ct4", "deletion", "obsolete")
        + _change("ct5", "insertion")
        + "</text:tracked-changes>"
    )
    body = (
        changes
        + '<text:h text:style-name="PUB_20_Chapter" text:outline-level="1">'
        + "The Lighthouse Keeper's Ledger</text:h>"
        + '<text:p text:style-name="PUB_20_Body">Keepers very often'
        + _inserted("ct1", " acted witho")
        + "ut knowing the tide tables by heart.</text:p>"
        + '<text:h text:style-name="PUB_20_A-Head" text:outline-level="2">Night Watches</text:h>'
        + '<text:p text:style-name="PUB_20_Body">The lamp was '
        + '<text:change text:change-id="ct2"/>'
        + _inserted("ct3", "always ")
        + "trimmed at dusk and the "
        + '<text:change text:change-id="ct4"/>'
        + _inserted("ct5", "brass")
        + " lens polished with chamois.</text:p>"
        + '<text:p text:style-name="PUB_20_Chapter_20_Numbered">'
        + "Storms of the Winter Season</text:p>"
        + '<text:p text:style-name="PUB_20_Body">Gales closed the harbour for eleven days.</text:p>'
        + '<text:h text:style-name="PUB_20_Body" text:outline-level="3">Provisions Kept</text:h>'
        + '<text:p text:style-name="PUB_20_Body">'
        + "Barrels of salted herring lined the store.</text:p>"
    )
    return _document("<meta:generator>qmd fixtures</meta:generator>", styles, "", body)


def link_numbered_chapter_style(docx_path: Path) -> None:
    """LibreOffice 7.4 drops `style:parent-style-name` of styles read from Flat ODF, so the
    `basedOn` link Word writes for a derived style is added here, with python-docx's own API:
    `PUB Chapter Numbered` then has no outline level of its own, only its parent's."""
    import docx

    document = docx.Document(str(docx_path))
    document.styles["PUB Chapter Numbered"].base_style = document.styles["PUB Chapter"]
    document.save(str(docx_path))


def _png(width: int, height: int) -> bytes:
    """A grey gradient, like a page of a scan (no library needed)."""
    rows = b"".join(
        b"\x00" + bytes((x * 7 + y * 3) % 256 for x in range(width)) for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def producer_title_fodt() -> str:
    """Page 1: a 24 pt title and body text; page 2 blank; page 3 only an image; page 4 text."""
    meta = "<dc:title>Microsoft Word - Kalman15.doc</dc:title><meta:generator>qmd</meta:generator>"
    styles = (
        '<style:style style:name="Standard" style:family="paragraph" style:class="text">'
        '<style:text-properties fo:font-size="11pt"/></style:style>'
    )
    automatic = (
        '<style:style style:name="Big" style:family="paragraph" '
        'style:parent-style-name="Standard">'
        '<style:text-properties fo:font-size="24pt" fo:font-weight="bold"/></style:style>'
        '<style:style style:name="Break" style:family="paragraph" '
        'style:parent-style-name="Standard">'
        '<style:paragraph-properties fo:break-before="page"/></style:style>'
    )
    image = base64.b64encode(_png(64, 64)).decode("ascii")
    body = (
        '<text:p text:style-name="Standard">Technical Note 15</text:p>'
        '<text:p text:style-name="Big">Kalman Filtering for Tide Gauges</text:p>'
        '<text:p text:style-name="Standard">A recursive estimator smooths the readings of '
        "the harbour tide gauge and predicts the next high water.</text:p>"
        '<text:p text:style-name="Break"/>'
        '<text:p text:style-name="Break">'
        '<draw:frame draw:name="scan" text:anchor-type="as-char" svg:width="15cm" '
        'svg:height="15cm"><draw:image><office:binary-data>'
        f"{image}</office:binary-data></draw:image></draw:frame></text:p>"
        '<text:p text:style-name="Break">Appendix: the gauge was calibrated against the '
        "tide staff each spring.</text:p>"
    )
    return _document(meta, styles, automatic, body)


def convert(source: Path, target_format: str, out: Path) -> Path:
    soffice = shutil.which("soffice") or shutil.which("libreoffice")
    if soffice is None:
        sys.exit("soffice not found: apt-get install -y libreoffice-writer-nogui")
    with tempfile.TemporaryDirectory(prefix="qmd-lo-profile-") as profile:
        subprocess.run(
            [
                soffice,
                f"-env:UserInstallation=file://{profile}",
                "--headless",
                "--convert-to",
                target_format,
                "--outdir",
                str(out),
                str(source),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return out / (source.stem + "." + target_format.split(":")[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="qmd-fixtures-") as work:
        sources = {
            "tracked-changes": (tracked_changes_fodt(), "docx:MS Word 2007 XML"),
            "producer-title": (producer_title_fodt(), "pdf:writer_pdf_Export"),
        }
        for name, (text, target) in sources.items():
            source = Path(work) / f"{name}.fodt"
            source.write_text(text, encoding="utf-8")
            written = convert(source, target, out)
            if name == "tracked-changes":
                link_numbered_chapter_style(written)
            print(f"wrote {written.relative_to(REPO) if written.is_relative_to(REPO) else written}"
                  f" ({written.stat().st_size:,} bytes)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

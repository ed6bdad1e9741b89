"""The text/binary/name policy of ADR 0022, one case per rule."""

from __future__ import annotations

import codecs

import pytest

from domain.indexing import Unreadable
from domain.source_text import decode_document, display_path, name_problem


def test_utf8_is_text_and_a_utf8_bom_stays_like_the_original() -> None:
    assert decode_document("# Notes\ncafé 中文\n".encode()) == "# Notes\ncafé 中文\n"
    assert decode_document(codecs.BOM_UTF8 + b"# A\n") == "\ufeff# A\n"
    assert decode_document(b"") == ""


@pytest.mark.parametrize(
    ("bom", "encoding"),
    [
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
    ],
)
def test_a_byte_order_mark_decodes_the_file(bom: bytes, encoding: str) -> None:
    text = "# Wide\nwombat 中文\n"
    assert decode_document(bom + text.encode(encoding)) == text


def test_a_bom_that_does_not_decode_falls_back_to_utf8_rules() -> None:
    # odd length after a UTF-16 BOM: not UTF-16; a short file with stray bytes stays text
    assert decode_document(b"\xff\xfe bad \xc3\n") == "\ufffd\ufffd bad \ufffd\n"


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "PDF"),
        (b"\x89PNG\r\n\x1a\n....", "PNG image"),
        (b"\xff\xd8\xff\xe0....", "JPEG image"),
        (b"PK\x03\x04 zip", "ZIP archive"),
        (b"\x7fELF\x02\x01", "ELF executable"),
        (b"SQLite format 3\x00....", "SQLite database"),
    ],
)
def test_binary_signatures_are_named(data: bytes, kind: str) -> None:
    assert decode_document(data) == Unreadable(f"binary file ({kind})")


def test_nul_bytes_mean_binary_even_for_utf16_without_bom() -> None:
    assert decode_document("# No BOM\n".encode("utf-16-le")) == Unreadable(
        "binary file (contains NUL bytes)"
    )


def test_mostly_invalid_utf8_is_binary_a_few_bad_bytes_are_not() -> None:
    heap = bytes(range(0x80, 0x100)) * 2
    result = decode_document(heap)
    assert isinstance(result, Unreadable) and "256 bytes are not UTF-8" in result.reason
    latin = b"caf\xe9 " + b"plain prose " * 10
    assert decode_document(latin) == "caf\ufffd " + "plain prose " * 10
    # real U+FFFD characters in the text are not counted as invalid bytes
    assert decode_document("\ufffd".encode() * 40) == "\ufffd" * 40


def test_names_must_be_utf8_without_control_characters() -> None:
    assert name_problem("notes/日本.md") is None
    assert name_problem("with space & (parens).md") is None
    assert name_problem(b"bad\xff.md".decode("utf-8", "surrogateescape")) == (
        "file name is not valid UTF-8"
    )
    for name in ("new\nline.md", "tab\t.md", "del\x7f.md", "c1\x85.md"):
        assert name_problem(name) is not None and "control" in str(name_problem(name))


def test_display_path_is_one_printable_line() -> None:
    raw = b"dir\xfe/new\nline\t\x07.md".decode("utf-8", "surrogateescape")
    assert display_path(raw) == "dir\\xfe/new\\nline\\t\\x07.md"
    assert display_path("日本/ノート.md") == "日本/ノート.md"

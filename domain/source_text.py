"""What counts as an indexable text file, decided from its name and bytes alone (pure).

A collection folder can hold anything: images saved as `.md`, PDFs matched by a mask, UTF-16
exports, file names that are not UTF-8 or hold a newline. The policy (ADR 0022):

* names must be UTF-8 without control characters: a stored path has to survive `qmd://` URIs,
  JSON, SQLite TEXT and one-line-per-result output;
* a byte-order mark for UTF-32 or UTF-16 decodes the file in that encoding (when it decodes
  cleanly); a UTF-8 BOM stays in the text, as the original keeps it (content hashes agree);
* known binary signatures, any NUL byte, or more than 10 % undecodable bytes mean binary:
  skipped with the reason;
* otherwise the bytes are UTF-8 with U+FFFD for the odd invalid sequence (Node's
  `readFileSync(…, "utf-8")`, so the original and this index hash the same text).
"""

from __future__ import annotations

import codecs

from domain.indexing import Unreadable

# (magic prefix, what it is); checked before the NUL test so the reason names the format.
BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "PDF"),
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"\x7fELF", "ELF executable"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\xfd7zXZ\x00", "xz data"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"BZh", "bzip2 data"),
)
INVALID_UTF8_BINARY_RATIO = 0.10
# Below this many bytes a few stray invalid bytes are a typo, not evidence of binary content.
INVALID_RATIO_MIN_BYTES = 64

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode_document(data: bytes) -> str | Unreadable:
    """The text of a file's bytes, or why it is not text."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(encoding)
            except UnicodeDecodeError:
                break  # not really that encoding: judge the bytes below
    for magic, kind in BINARY_SIGNATURES:
        if data.startswith(magic):
            return Unreadable(f"binary file ({kind})")
    if b"\x00" in data:
        return Unreadable("binary file (contains NUL bytes)")
    text = data.decode("utf-8", errors="replace")
    if len(data) >= INVALID_RATIO_MIN_BYTES:
        replaced = text.count("\ufffd") - data.count("\ufffd".encode())
        if replaced > INVALID_UTF8_BINARY_RATIO * len(text):
            return Unreadable(f"binary file ({replaced} of {len(data)} bytes are not UTF-8)")
    return text


def _is_control(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code < 0xA0


def name_problem(relative_path: str) -> str | None:
    """Why a collection-relative path (as the OS gave it, undecodable bytes as lone
    surrogates) cannot be stored, or None when it can."""
    if relative_path.isascii() and relative_path.isprintable():
        return None  # the usual name, settled without a look at each character
    try:
        relative_path.encode("utf-8")
    except UnicodeEncodeError:
        return "file name is not valid UTF-8"
    if any(_is_control(ch) for ch in relative_path):
        return "file name contains control characters (such as a newline)"
    return None


def display_path(relative_path: str) -> str:
    """A printable, storable form of any path: bytes that are not UTF-8 as `\\xNN`, control
    characters as `\\n`, `\\t` or `\\xNN`."""
    raw = relative_path.encode("utf-8", errors="surrogateescape")
    text = raw.decode("utf-8", errors="backslashreplace")
    out: list[str] = []
    for ch in text:
        if ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif _is_control(ch):
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)

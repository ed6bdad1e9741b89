"""`qmd://` virtual paths, URI encoding, docids and `file.md:120:40` references."""

from __future__ import annotations

from dataclasses import dataclass

from domain.lazy_regex import LazyRegex
from domain.text import JS_LINE_TERMINATORS, js_trim

# encodeURIComponent's unreserved set: everything else is percent-encoded as UTF-8.
_URI_UNRESERVED = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()"
)
_PERCENT_RUN = LazyRegex(r"(?:%[0-9A-Fa-f]{2})+")
_HEX = frozenset("0123456789abcdefABCDEF")
_VIRTUAL = LazyRegex(r"qmd://([^/]+)/?([^" + JS_LINE_TERMINATORS + r"]*)\Z")
_LINE_RANGE = LazyRegex(r":([0-9]+):([0-9]+)\Z")
_LINE_FROM = LazyRegex(r":([0-9]+)\Z")


def encode_uri_component(text: str) -> str:
    """Identical to JavaScript `encodeURIComponent` (UTF-8, keeps A-Z a-z 0-9 - _ . ! ~ * ' ( )).

    Hex digits are upper-case, astral characters become their 4-byte UTF-8 form (JS joins
    the surrogate pair first, so the bytes are the same). A lone surrogate, on which JS
    throws URIError, cannot come from a UTF-8 file; here it raises UnicodeEncodeError.
    """
    out: list[str] = []
    for ch in text:
        if ch in _URI_UNRESERVED:
            out.append(ch)
        else:
            out.extend(f"%{byte:02X}" for byte in ch.encode("utf-8"))
    return "".join(out)


def decode_uri_component(text: str) -> str:
    """JavaScript `decodeURIComponent`; malformed escapes are left as they are, never raised.

    Where JS would throw URIError (a stray `%`, bytes that are not valid UTF-8), the
    offending text is kept literally and the rest is still decoded.
    """
    return _PERCENT_RUN.sub(lambda m: _decode_percent_run(m.group(0)), text)


def _utf8_length(lead: int) -> int:
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0  # continuation byte or never valid as a lead


def _decode_percent_run(run: str) -> str:
    data = bytes(int(run[i + 1 : i + 3], 16) for i in range(0, len(run), 3))
    out: list[str] = []
    i = 0
    while i < len(data):
        size = _utf8_length(data[i])
        piece = data[i : i + size] if size else b""
        try:
            # The strict codec rejects overlong forms and encoded surrogates, as JS does.
            decoded = piece.decode("utf-8") if len(piece) == size and size else None
        except UnicodeDecodeError:
            decoded = None
        if decoded is None:
            out.append(run[i * 3 : i * 3 + 3])
            i += 1
        else:
            out.append(decoded)
            i += size
    return "".join(out)


def encode_qmd_path(display_path: str) -> str:
    """`qmd://` + each `/`-separated segment encoded with `encode_uri_component`."""
    return "qmd://" + "/".join(encode_uri_component(seg) for seg in display_path.split("/"))


@dataclass(frozen=True)
class VirtualPath:
    """A `qmd://collection/path` reference split into its parts."""

    collection: str
    path: str  # may be "" for the collection root


def parse_virtual_path(uri: str) -> VirtualPath | None:
    """Parse `qmd://c/p` (any number of slashes after `qmd:`, an optional `?index=NAME`).

    Also accepts `//c/p`. `qmd://c` and `qmd://c/` give path "". Everything from the first
    `?` is dropped (the index name is the caller's business). The path is returned as
    written: percent-decoding is left to the caller, as in the original.
    """
    normalized = _normalize_virtual(uri)
    path_part = normalized.split("?", 1)[0]
    match = _VIRTUAL.match(path_part)
    if match is None:
        return None
    return VirtualPath(collection=match.group(1), path=match.group(2))


def _normalize_virtual(text: str) -> str:
    trimmed = js_trim(text)
    if trimmed.startswith("qmd:"):
        return "qmd://" + trimmed[4:].lstrip("/")
    if trimmed.startswith("//"):
        return "qmd://" + trimmed.lstrip("/")
    return trimmed


def is_virtual_path(text: str) -> bool:
    """Explicitly virtual: starts with `qmd:` or `//` (a bare `c/p` is not)."""
    trimmed = js_trim(text)
    return trimmed.startswith(("qmd:", "//"))


def docid_of(content_hash: str) -> str:
    """First six hex characters of the sha256 content hash."""
    return content_hash[:6]


def normalize_docid(text: str) -> str | None:
    """Strip quotes and a leading `#`; return the lower-cased hex if it is >= 6 hex chars.

    Mirrors the original's `isDocid`: trim, then one pair of matching surrounding quotes,
    then one `#`. Anything else (fewer than six characters, a non-hex character) is None.
    """
    value = js_trim(text)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    elif value in ('"', "'"):
        # JS slice(1, -1) of a lone quote is "" (starts and ends with the same quote).
        value = ""
    if value.startswith("#"):
        value = value[1:]
    if len(value) >= 6 and all(ch in _HEX for ch in value):
        return value.lower()
    return None


@dataclass(frozen=True)
class LineRef:
    """A document reference with its optional `:from[:count]` line suffix split off."""

    target: str
    from_line: int | None
    line_count: int | None


def parse_line_ref(reference: str) -> LineRef:
    """Split `file.md:120` / `file.md:120:40` suffixes off a document reference.

    Only trailing ASCII digits count, so `C:` or `a:b` stay part of the target. Works the
    same on docids (`#abc123:3:2`). Values are not clamped here (`:0` gives 0).
    """
    match = _LINE_RANGE.search(reference)
    if match is not None:
        return LineRef(reference[: match.start()], int(match.group(1)), int(match.group(2)))
    match = _LINE_FROM.search(reference)
    if match is not None:
        return LineRef(reference[: match.start()], int(match.group(1)), None)
    return LineRef(reference, None, None)


_RESERVED_EXPANSION_SAFE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;="
)
_HEX = frozenset("0123456789abcdefABCDEF")


def expand_reserved(value: str) -> str:
    """RFC 6570 reserved expansion (`{+var}`): keep reserved and unreserved characters and
    existing `%XX` triplets, percent-encode everything else as UTF-8.

    The original echoes a `qmd://{+path}` resource URI re-expanded this way, so a raw space
    comes back as `%20` while an already-encoded `%20` is left alone.
    """
    out: list[str] = []
    index = 0
    while index < len(value):
        char = value[index]
        if char in _RESERVED_EXPANSION_SAFE:
            out.append(char)
        elif char == "%" and len(value) >= index + 3 and set(value[index + 1 : index + 3]) <= _HEX:
            out.append(value[index : index + 3])
            index += 3
            continue
        else:
            out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8")))
        index += 1
    return "".join(out)


def scan_order_key(relative_path: str) -> tuple[int, tuple[bytes, ...]]:
    """Where a file comes in the original's collection scan (and so in `documents.id` order).

    fast-glob walks breadth first and libuv sorts each `readdir` with `strcmp`, so files come
    by depth, then by their path's segments compared as UTF-8 bytes: `notes/Upper.md` before
    `notes/code.md`, and every top-level file before `engineering/api/auth.md`.
    """
    parts = relative_path.split("/")
    return len(parts), tuple(part.encode("utf-8", "surrogatepass") for part in parts)

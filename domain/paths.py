"""`qmd://` virtual paths, URI encoding, docids and `file.md:120:40` references."""

from __future__ import annotations

from dataclasses import dataclass


def encode_uri_component(text: str) -> str:
    """Identical to JavaScript `encodeURIComponent` (UTF-8, keeps A-Z a-z 0-9 - _ . ! ~ * ' ( ))."""
    raise NotImplementedError


def decode_uri_component(text: str) -> str:
    """JavaScript `decodeURIComponent`; malformed escapes are left as they are, never raised."""
    raise NotImplementedError


def encode_qmd_path(display_path: str) -> str:
    """`qmd://` + each `/`-separated segment encoded with `encode_uri_component`."""
    raise NotImplementedError


@dataclass(frozen=True)
class VirtualPath:
    collection: str
    path: str  # may be "" for the collection root


def parse_virtual_path(uri: str) -> VirtualPath | None:
    """Parse `qmd://c/p` (any number of slashes after `qmd:`, an optional `?index=NAME`)."""
    raise NotImplementedError


def is_virtual_path(text: str) -> bool:
    raise NotImplementedError


def docid_of(content_hash: str) -> str:
    """First six hex characters of the sha256 content hash."""
    raise NotImplementedError


def normalize_docid(text: str) -> str | None:
    """Strip quotes and a leading `#`; return the lower-cased hex if it is >= 6 hex chars."""
    raise NotImplementedError


@dataclass(frozen=True)
class LineRef:
    target: str
    from_line: int | None
    line_count: int | None


def parse_line_ref(reference: str) -> LineRef:
    """Split `file.md:120` / `file.md:120:40` suffixes off a document reference."""
    raise NotImplementedError

"""Documents that are not plain text: what extracting them gives, and why it can fail.

REQ-EXTRACT-001..REQ-EXTRACT-009 (docs/spec/extraction.md). A PDF, DOCX, PPTX, XLSX or HTML
file is turned into markdown text (page, slide and sheet boundaries kept as `##` headings, so
line numbers and snippets point somewhere meaningful) plus a small metadata dict of scalars and
lists (title, author, created, pages, ...). Markdown and other text files never come here: they
are indexed exactly as the original indexes them.

A failure is a stable reason code (`FAILURE_REASONS`) and a sentence for people. Nothing here
does I/O: the extractor adapter runs the parsers, the ledger adapter stores states and the
content-hash cache.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from domain.lazy_regex import LazyRegex

# The file extensions (lower case, without the dot) that go through an extractor. Anything else
# is read as text, exactly as before.
EXTRACTED_FORMATS = frozenset({"pdf", "docx", "pptx", "xlsx", "html", "htm"})

# Reason codes of a failed extraction (stable: stored in the index and shown on the wire).
CORRUPT = "corrupt"  # the bytes are damaged (truncated, a broken zip, XML not well formed)
ENCRYPTED = "encrypted"  # password protected
UNSUPPORTED_VARIANT = "unsupported-variant"  # a variant of the format no parser here reads
PARSER_ERROR = "parser-error"  # a well-formed file the parser refused; the detail says why
NO_TEXT_LAYER = "no-text-layer"  # a PDF whose pages are all images (scanned), nothing to index
TOO_LARGE = "too-large"  # the file, or the text extracted from it, is over the limit
TIMEOUT = "timeout"  # the parser ran past the per-file time limit and was stopped
CRASHED = "crashed"  # the parser process died (a segfault, out of memory)
UNSUPPORTED = "unsupported"  # no extractor for this format
ZIP_BOMB = "zip-bomb"  # an Office file whose parts decompress to far more than is sane
UNREADABLE = "unreadable"  # the file could not be read (denied, gone)
EMPTY = "empty"  # extraction worked but found no text at all

FAILURE_REASONS = (
    CORRUPT,
    ENCRYPTED,
    UNSUPPORTED_VARIANT,
    PARSER_ERROR,
    NO_TEXT_LAYER,
    TOO_LARGE,
    TIMEOUT,
    CRASHED,
    UNSUPPORTED,
    ZIP_BOMB,
    UNREADABLE,
    EMPTY,
)

MetadataValue = str | int | float | bool | list[str]

# The metadata key under which an extractor lists what the text leaves out of a document it
# did extract (pictures, embedded objects, rows past the limit): REQ-EXTRACT-014.
SKIPPED_KEY = "skipped"

# Titles that producers write for every document, which name no document (REQ-EXTRACT-011).
_PLACEHOLDER_TITLE = LazyRegex(
    r"""^(?:
        untitled(?:[\s_-]*\d+)?(?:\s+document)?
      | (?:new\s+)?(?:document|presentation|book|workbook|sheet|slide|page|title)[\s_-]*\d*
      | no\s+title | powerpoint\s+presentation | microsoft\s+(?:word|office)\s+document
    )$""",
    re.IGNORECASE | re.VERBOSE,
)
# "Microsoft Word - Kalman15.doc", "Microsoft PowerPoint - deck.pptx": the printer driver's
# job name, written as the title by Office's "print to PDF" and older PDF makers.
_PRODUCER_JOB = LazyRegex(r"^microsoft\s+(?:office\s+)?(?:word|powerpoint|excel)\s*-", re.I)
# A title ending in a document file's extension is a file name, not a title.
_FILE_NAME = LazyRegex(
    r"\.(?:docx?|dotx?|docm|rtf|odt|ott|pptx?|ppsx?|odp|xlsx?|ods|pdf|tex|dvi|ps|eps|indd|qxd"
    r"|pub|wpd|pages|key|txt|md|html?|xml|vsdx?|mdi|tiff?|jpe?g|png)$",
    re.IGNORECASE,
)
_DRIVE_PATH = LazyRegex(r"^(?:[a-z]:[\\/]|/|\\\\)", re.IGNORECASE)


def placeholder_title(title: str) -> bool:
    """True when a title found in a document's metadata names no document: empty, without a
    letter, a producer's default ("Untitled", "Document1", "PowerPoint Presentation",
    "Slide 1"), a print job ("Microsoft Word - Kalman15.doc"), a file name ("report.pdf",
    "draft_v2.doc") or a path (REQ-EXTRACT-011)."""
    text = " ".join(title.split())
    if not any(ch.isalpha() for ch in text):
        return True
    return bool(
        _PLACEHOLDER_TITLE.match(text)
        or _PRODUCER_JOB.match(text)
        or _FILE_NAME.search(text)
        or _DRIVE_PATH.match(text)
    )


ExtractionStatus = Literal["ok", "failed", "pending"]


def file_format(path: str) -> str:
    """The lower-case extension of a collection-relative path, without the dot ('' if none)."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return name[dot + 1 :].lower() if dot > 0 else ""


def is_extracted(path: str) -> bool:
    return file_format(path) in EXTRACTED_FORMATS


@dataclass(frozen=True)
class Extracted:
    """What an extractor made of a file.

    `text` is markdown; `empty_pages` are the 1-based pages (PDF) that had no text layer;
    `metadata` holds only scalars and lists of strings (JSON-safe, stored as is).
    """

    text: str
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)
    pages: int = 0
    empty_pages: tuple[int, ...] = ()


@dataclass(frozen=True)
class ExtractionFailure:
    """Why a file gave no text: a reason code from `FAILURE_REASONS` and a sentence."""

    reason: str
    detail: str
    empty_pages: tuple[int, ...] = ()


@dataclass(frozen=True)
class SourceDigest:
    """The content hash of a file's bytes (the extraction cache key) and its size."""

    sha256: str
    size: int


@dataclass(frozen=True)
class CachedExtraction:
    """A stored outcome for one source hash: the text's content hash, or the failure."""

    source_hash: str
    status: Literal["ok", "failed"]
    text_hash: str = ""
    title: str = ""
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)
    pages: int = 0
    empty_pages: tuple[int, ...] = ()
    reason: str = ""
    detail: str = ""


@dataclass(frozen=True)
class ExtractionState:
    """Where one document of a collection stands: extracted ('ok', perhaps with pages that had
    no text layer), 'failed' with its reason, or 'pending' (found, not processed yet)."""

    collection: str
    path: str
    status: ExtractionStatus
    reason: str = ""
    detail: str = ""
    source_hash: str = ""
    empty_pages: tuple[int, ...] = ()
    pages: int = 0
    extracted_at: str = ""

    @property
    def display_path(self) -> str:
        return f"{self.collection}/{self.path}"


@dataclass(frozen=True)
class ExtractionReport:
    """The extraction part of the index status: failed files, and indexed files with pages
    that had no text layer (scanned pages)."""

    failed: tuple[ExtractionState, ...] = ()
    scanned: tuple[ExtractionState, ...] = ()
    partial: tuple[ExtractionState, ...] = ()  # indexed, with some content left out

    @property
    def empty(self) -> bool:
        return not self.failed and not self.scanned and not self.partial


def pages_phrase(pages: Sequence[int]) -> str:
    """`page 2` / `pages 2, 5, 7` (at most 10 listed, then `and N more`)."""
    shown = ", ".join(str(p) for p in pages[:10])
    more = f" and {len(pages) - 10} more" if len(pages) > 10 else ""
    return f"page{'s' if len(pages) > 1 else ''} {shown}{more}"


def describe_failure(state: ExtractionState) -> str:
    """`coll/a.pdf: corrupt (PDFium could not load it)` — one line for status reports."""
    return f"{state.display_path}: {state.reason}" + (f" ({state.detail})" if state.detail else "")


def describe_scanned(state: ExtractionState) -> str:
    return f"{state.display_path}: no text layer on {pages_phrase(state.empty_pages)}"


def skipped_detail(metadata: Mapping[str, MetadataValue]) -> str:
    """The extractor's list of what a document's text leaves out, as one sentence for its
    state's detail ("" when nothing was left out): REQ-EXTRACT-014."""
    skipped = metadata.get(SKIPPED_KEY)
    if isinstance(skipped, list):
        return "; ".join(str(s) for s in skipped if str(s).strip())
    return ""


def describe_partial(state: ExtractionState) -> str:
    return f"{state.display_path}: not read: {state.detail}"


def report_lines(report: ExtractionReport, limit: int = 10) -> list[str]:
    """Human lines for `qmd status` and the `status` tool (the first `limit` of each list)."""
    lines: list[str] = []
    if report.failed:
        count = len(report.failed)
        lines.append(f"{count} file{'s' if count != 1 else ''} could not be extracted:")
        lines += [f"  - {describe_failure(s)}" for s in report.failed[:limit]]
        if count > limit:
            lines.append(f"  ... and {count - limit} more")
    if report.scanned:
        count = len(report.scanned)
        lines.append(
            f"{count} file{'s' if count != 1 else ''} indexed without some pages "
            "(no text layer, scanned?):"
        )
        lines += [f"  - {describe_scanned(s)}" for s in report.scanned[:limit]]
        if count > limit:
            lines.append(f"  ... and {count - limit} more")
    if report.partial:
        count = len(report.partial)
        lines.append(
            f"{count} file{'s' if count != 1 else ''} indexed with some content not read as text:"
        )
        lines += [f"  - {describe_partial(s)}" for s in report.partial[:limit]]
        if count > limit:
            lines.append(f"  ... and {count - limit} more")
    return lines


# -- the stored form, shared by the storage adapters (SQLite and PostgreSQL keep the same
# columns; page lists and metadata are JSON text)

STATE_COLUMNS = (
    "collection, path, status, reason, detail, source_hash, pages, empty_pages, extracted_at"
)
CACHE_COLUMNS = (
    "source_hash, status, text_hash, title, metadata, pages, empty_pages, reason, detail"
)


def pages_from_json(value: Any) -> tuple[int, ...]:
    """A stored page list; () when the text is not a JSON list of numbers."""
    try:
        return tuple(int(p) for p in json.loads(str(value or "[]")))
    except (ValueError, TypeError):
        return ()


def metadata_from_json(value: Any) -> dict[str, MetadataValue]:
    """Stored extractor metadata; {} when the text is not a JSON object."""
    try:
        raw = json.loads(str(value or "{}"))
    except ValueError:
        return {}
    return dict(raw) if isinstance(raw, dict) else {}


def state_from_row(row: Sequence[Any]) -> ExtractionState:
    """An `ExtractionState` from a row of `STATE_COLUMNS`."""
    return ExtractionState(
        collection=str(row[0]),
        path=str(row[1]),
        status="ok" if str(row[2]) == "ok" else "failed",
        reason=str(row[3]),
        detail=str(row[4]),
        source_hash=str(row[5]),
        pages=int(row[6] or 0),
        empty_pages=pages_from_json(row[7]),
        extracted_at=str(row[8]),
    )


def cached_from_row(row: Sequence[Any]) -> CachedExtraction:
    """A `CachedExtraction` from a row of `CACHE_COLUMNS`."""
    return CachedExtraction(
        source_hash=str(row[0]),
        status="ok" if row[1] == "ok" else "failed",
        text_hash=str(row[2]),
        title=str(row[3]),
        metadata=metadata_from_json(row[4]),
        pages=int(row[5] or 0),
        empty_pages=pages_from_json(row[6]),
        reason=str(row[7]),
        detail=str(row[8]),
    )

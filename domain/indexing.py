"""Values of keeping the index in step with its folders (what a scan finds, what an update
did) and of what `status` reports. Kept apart from domain/model.py: a search uses none of
them, and every dataclass costs a cold start about half a millisecond to build.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from domain.extraction import ExtractionReport


@dataclass(frozen=True)
class CollectionStatus:
    """One collection in `status`: its folder and pattern as configured, its indexed files."""

    name: str
    path: str | None
    pattern: str | None
    documents: int
    last_updated: str


def _no_extraction_report() -> ExtractionReport:
    # imported on use: a search never builds a status, and the module's classes cost start-up
    from domain.extraction import ExtractionReport

    return ExtractionReport()


@dataclass(frozen=True)
class IndexStatus:
    """What `status` reports of the whole index."""

    total_documents: int
    needs_embedding: int
    has_vector_index: bool
    collections: tuple[CollectionStatus, ...]
    # files that could not be extracted, and extracted files with pages without text
    extraction: ExtractionReport = field(default_factory=_no_extraction_report)


@dataclass(frozen=True)
class FileStamp:
    """What a file's status says about its content without reading it: size, modification
    and status-change times (nanoseconds since the epoch) and inode. A write changes the
    change time even when the modification time is set back (`touch -d`, `tar -x`)."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    @property
    def changed_ns(self) -> int:
        """The later of the two times: when the content or the inode last changed."""
        return max(self.mtime_ns, self.ctime_ns)


@dataclass(frozen=True)
class SourceFile:
    """A file found under a collection folder by the content source."""

    relative_path: str
    absolute_path: str
    created_at: str
    modified_at: str
    size: int
    # None: this source cannot tell (the file is read on every update)
    stamp: FileStamp | None = None


@dataclass(frozen=True)
class SkippedFile:
    """A file (or folder) a scan found but could not index, and why.

    `path` is for display: collection-relative, with bytes that are not UTF-8 and control
    characters written as escapes, so it can always be printed and stored.
    """

    path: str
    reason: str


@dataclass(frozen=True)
class ScanResult:
    """What a scan of a collection folder found: files to read, and files it had to skip."""

    files: list[SourceFile] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    # collection-relative folder prefixes ("" = the collection folder, else ending in "/")
    # that could not be listed: what was indexed below them is kept, not taken as deleted
    unlisted: list[str] = field(default_factory=list)
    # the source's clock (ns since the epoch) just before the folder was listed; None when
    # the source keeps no clock (then no file is trusted by its stamp)
    started_ns: int | None = None


@dataclass(frozen=True)
class Unreadable:
    """`ContentSource.read_text` could not give text for a file: binary, too large, denied…

    `transient`: the file could not be read this time (denied, I/O error, timeout): its
    previously indexed version is kept, as the original does. Otherwise (binary, too large)
    the content itself is refused and a previous version is removed.
    """

    reason: str
    transient: bool = False


@dataclass(frozen=True)
class UpdateCounts:
    """What one indexing pass did to a collection's files."""

    indexed: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    # the files `skipped` counts that the user should hear about (empty files are not listed)
    problems: tuple[SkippedFile, ...] = ()

    @property
    def written(self) -> int:
        """Documents the pass added, changed or removed."""
        return self.indexed + self.updated + self.removed

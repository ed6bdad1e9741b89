"""Value objects shared by the domain core, its ports and the adapters.

Everything here is immutable and free of I/O. Paths inside a collection always use `/`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from domain.extraction import ExtractionReport

DEFAULT_PATTERN = "**/*.md"

SubQueryType = Literal["lex", "vec", "hyde"]


@dataclass(frozen=True)
class Collection:
    """A named folder of documents, as configured in `index.yml`."""

    name: str
    path: str
    pattern: str = DEFAULT_PATTERN
    ignore: tuple[str, ...] = ()
    include_by_default: bool = True
    update_command: str | None = None
    # prefix (collection-relative, "" = whole collection) -> description
    contexts: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DocumentMeta:
    """An indexed, active document without its body."""

    id: int
    collection: str
    path: str
    title: str
    hash: str
    created_at: str
    modified_at: str
    body_length: int = 0

    @property
    def display_path(self) -> str:
        return f"{self.collection}/{self.path}"

    @property
    def virtual_path(self) -> str:
        return f"qmd://{self.collection}/{self.path}"

    @property
    def docid(self) -> str:
        """Six hex characters, without the leading `#`."""
        return self.hash[:6]


@dataclass(frozen=True)
class Document:
    """An active document together with its body."""

    meta: DocumentMeta
    body: str


@dataclass(frozen=True)
class LexHit:
    """One BM25 match as the lexical index reports it (raw FTS5 bm25, negative = better)."""

    document: Document
    bm25: float


@dataclass(frozen=True)
class VectorHit:
    """One vector match: best chunk of a document by cosine distance."""

    document: Document
    distance: float
    chunk_pos: int


@dataclass(frozen=True)
class SubQuery:
    """One typed search of a query document (`lex:`, `vec:` or `hyde:` and its text)."""

    type: SubQueryType
    query: str


@dataclass(frozen=True)
class Snippet:
    """A short excerpt: `text` starts with the `@@ -start,count @@` header line."""

    line: int
    text: str


ListSource = Literal["fts", "vec"]
ListQueryType = Literal["original", "lex", "vec", "hyde"]


@dataclass(frozen=True)
class ListContribution:
    """What one ranked list added to a document's fused score."""

    list_index: int  # position of the list among the fused lists
    source: ListSource
    query_type: ListQueryType  # "original" = the caller's own text, else the sub-query type
    query: str
    rank: int  # 1-based rank of the document in that list
    weight: float
    backend_score: float  # the list's own score (normalised BM25 or cosine similarity)
    rrf_contribution: float  # weight / (k + rank + rank_offset)
    rank_offset: int = 0  # the list's ranks start this far down (the any-term fill, 0031)


@dataclass(frozen=True)
class ScoreExplanation:
    """How a fused result got its score: the RRF sum, its rank, the rerank blend."""

    contributions: tuple[ListContribution, ...]
    rrf_base_score: float  # sum of the contributions
    top_rank_bonus: float
    rrf_total_score: float  # base + bonus: the fusion score candidates were ordered by
    rrf_rank: int  # 1-based position among the fused candidates
    position_score: float  # 1 / rrf_rank
    blend_weight: float  # share of position_score in the final score (1.0 without rerank)
    rerank_score: float  # 0.0 when no reranker ran
    blended_score: float  # the final score

    @property
    def fts_scores(self) -> tuple[float, ...]:
        return tuple(c.backend_score for c in self.contributions if c.source == "fts")

    @property
    def vector_scores(self) -> tuple[float, ...]:
        return tuple(c.backend_score for c in self.contributions if c.source == "vec")


@dataclass(frozen=True)
class SearchResult:
    """One ranked document as every search surface reports it."""

    document: Document
    score: float
    context: str | None
    snippet: Snippet
    source: str = "fts"
    # (position, length) of the chunk the snippet was taken from, when one was chosen
    chunk: tuple[int, int] | None = None
    # set by the fused modes (structured and hybrid query) when asked to explain
    explanation: ScoreExplanation | None = None
    # an any-term fill result: it matches some of the query's terms, not all of them
    # (REQ-SPEC-SEARCH-006); never set under the original's every-term rule
    partial: bool = False

    @property
    def docid(self) -> str:
        return self.document.meta.docid

    @property
    def display_path(self) -> str:
        return self.document.meta.display_path

    @property
    def title(self) -> str:
        return self.document.meta.title


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

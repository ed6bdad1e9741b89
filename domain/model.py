"""Value objects shared by the domain core, its ports and the adapters.

Everything here is immutable and free of I/O. Paths inside a collection always use `/`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # a type only: the filter code loads with the first filter
    from domain.filters import MetaValue

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
class CollectionCatalog:
    """Every collection and the global context, as one read of the store saw them: what a
    search request picks its collections from and resolves its results' contexts with."""

    collections: tuple[Collection, ...]
    global_context: str | None


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
    # the document's metadata, read in the same statement as the hit ({}: it has none), so
    # that a page of results needs no read of its own (REQ-FILTER-006); None where the index
    # could not read it with the hit (an index file whose metadata table it has not seen)
    metadata: Mapping[str, MetaValue] | None = None


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
    # the document's metadata when its hit carried it (LexHit.metadata); None: not read with
    # the search (vector hits), the surface reads it by id (adapters/mcp/formatting.py)
    metadata: Mapping[str, MetaValue] | None = None

    @property
    def docid(self) -> str:
        return self.document.meta.docid

    @property
    def display_path(self) -> str:
        return self.document.meta.display_path

    @property
    def title(self) -> str:
        return self.document.meta.title


# A document's metadata (REQ-META-*) is a `dict[str, MetaValue]`; these are its JSON form, as
# every index stores it and every surface shows it (REQ-FILTER-006): keys sorted, lists for
# tuples. How a document's metadata is made at indexing is domain/metadata.py's.


def metadata_as_json(metadata: Mapping[str, MetaValue]) -> dict[str, Any]:
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in sorted(metadata.items())
    }


def metadata_from_json(raw: Mapping[str, Any]) -> dict[str, MetaValue]:
    """Metadata as stored (JSON written from `metadata_as_json`): lists back to tuples.
    Values that are not scalars or lists (nothing we write) are dropped. Kept cheap: a
    filtered search decodes every document's metadata."""
    kept: dict[str, MetaValue] = {}
    for key, value in raw.items():
        kind = type(value)
        if kind is list:
            kept[key] = tuple(v for v in value if type(v) in _JSON_SCALARS)
        elif kind in _JSON_SCALARS:
            kept[key] = value
    return kept


_JSON_SCALARS = frozenset({str, int, float, bool})


def model_file_name(model: str) -> str:
    """The file name in a model reference (`hf:org/repo/file.gguf`, a path, or a bare id),
    lower-cased: what a per-model calibration is matched by."""
    return re.split(r"[/\\]", model.strip())[-1].lower()

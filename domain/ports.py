"""Ports: what the domain needs from the outside world, as `typing.Protocol`s.

Adapters implement these structurally; the composition root (`adapters.bootstrap`) is the only
place that names concrete classes. Fakes used by tests live in `tests/fakes.py` and pass the same
contract tests as the real adapters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

# for annotations only: a command imports the domain parts it uses, not every one a port
# mentions
if TYPE_CHECKING:
    from domain.extraction import (
        CachedExtraction,
        Extracted,
        ExtractionFailure,
        ExtractionState,
        SourceDigest,
    )
    from domain.filters import MetaValue, Probe
    from domain.indexing import ScanResult, Unreadable
    from domain.lexfill import FilledHits
    from domain.lexquery import LexQuery
    from domain.memory import MemoryRecord, MergeGroup, Topic
    from domain.model import (
        Collection,
        CollectionCatalog,
        DocumentMeta,
        LexHit,
        SubQuery,
        VectorHit,
    )
    from domain.sections import Section
    from domain.sessions import SessionRef, Transcript, TurnWindow
    from domain.stamps import RecordedStamp

T = TypeVar("T")


@dataclass(frozen=True)
class UpsertOutcome:
    """What `DocumentStore.upsert_document` did: 'indexed', 'updated' or 'unchanged'."""

    kind: str


@dataclass(frozen=True)
class DocumentWrite:
    """One document for `DocumentStore.upsert_documents`: `upsert_document`'s arguments but
    the collection."""

    path: str
    title: str
    content_hash: str
    body: str
    created_at: str
    modified_at: str


@dataclass(frozen=True)
class CollectionCount:
    """Active documents of one collection and its latest modification."""

    name: str
    documents: int
    last_modified: str


class DocumentStore(Protocol):
    """Collections, documents and their content-addressed bodies."""

    def transaction(self) -> AbstractContextManager[None]:
        """Group many writes into one atomic commit (an `update` of a whole collection)."""
        ...

    # collections and contexts
    def list_collections(self) -> list[Collection]: ...
    def read_catalog(self) -> CollectionCatalog:
        """The collections and the global context in one read (a search request's one look
        at them), so that neither is read again while it runs."""
        ...

    def get_collection(self, name: str) -> Collection | None: ...
    def put_collection(self, collection: Collection) -> None: ...
    def delete_collection(self, name: str) -> int: ...
    def rename_collection(self, old: str, new: str) -> None: ...
    def get_global_context(self) -> str | None: ...
    def set_global_context(self, text: str | None) -> None: ...

    # indexing
    def active_documents(self, collection: str) -> dict[str, DocumentMeta]:
        """Path -> document, for an update to compare with; `body_length` may be left 0
        (counting it reads every body)."""
        ...

    def upsert_document(
        self,
        collection: str,
        path: str,
        title: str,
        content_hash: str,
        body: str,
        created_at: str,
        modified_at: str,
    ) -> UpsertOutcome: ...
    def upsert_documents(
        self, collection: str, documents: Sequence[DocumentWrite]
    ) -> list[UpsertOutcome]:
        """`upsert_document` of each in turn, in one transaction: the same outcomes, in
        order, and the same index. A backend may write the batch together (PostgreSQL: one
        COPY and a few set-based statements, REQ-INDEX-BATCH-001)."""
        ...

    def deactivate_documents(self, collection: str, paths: Sequence[str]) -> int: ...
    def delete_orphan_content(self) -> int: ...
    def tidy_lexical_index(self, documents_written: int) -> None:
        """An indexing run that wrote (added, changed or removed) `documents_written`
        documents, in one transaction or several, ends; called in a transaction. The backend
        may reorganise its lexical index so searches stay fast (REQ-INDEX-FTS-TIDY-001).
        Changes no search result."""
        ...

    # lookups (active documents only)
    def document_by_docid(self, prefix: str) -> DocumentMeta | None: ...
    def document_by_path(self, collection: str, path: str) -> DocumentMeta | None: ...
    def document_by_suffix(self, suffix: str) -> DocumentMeta | None: ...
    def documents(self, collection: str | None = None) -> list[DocumentMeta]: ...
    def document_paths(self) -> list[tuple[str, str]]:
        """(collection, path) of every active document, in `documents()` order: the names a
        missed lookup is compared with, without loading every document's metadata."""
        ...

    def body(self, content_hash: str) -> str: ...

    # status and upkeep
    def collection_counts(self) -> list[CollectionCount]: ...
    def cleanup(self) -> dict[str, int]: ...


class IndexMaintenance(Protocol):
    """Health and upkeep of the index as a whole (`qmd status`, `cleanup`, `doctor`)."""

    @property
    def vec_available(self) -> bool:
        """Whether vector search can run on this index at all (the extension is loaded)."""
        ...

    @property
    def lexical_ranking(self) -> str:
        """How lexical search ranks here, for `qmd doctor` (REQ-SEARCH-RANKCACHE-001)."""
        ...

    def total_documents(self) -> int: ...
    def vector_count(self) -> int:
        """Stored chunk vectors of active documents (orphans of removed ones not counted)."""
        ...

    def orphaned_vector_count(self) -> int:
        """Chunk vectors no active document uses any more (`cleanup` removes them)."""
        ...

    def embedded_by_model(self) -> dict[str, int]:
        """Active content hashes with at least one vector, per model that produced them (so
        `status` can say "embedded with another model" rather than "needs embedding")."""
        ...

    def preview_cleanup(self) -> dict[str, int]:
        """What `cleanup` would remove, under the same keys."""
        ...

    def cleanup(self) -> dict[str, int]:
        """Drop caches, orphaned vectors, inactive rows and orphaned content; compact. Keys:
        cache_entries, orphaned_vectors, inactive_documents, orphaned_content."""
        ...


class LexicalIndex(Protocol):
    """Full-text search; `bm25` in hits is raw FTS5 bm25 (negative, lower is better).

    `within`: only these document ids are candidates, chosen before the limit applies (a
    metadata filter, REQ-FILTER-003); None means every document.
    """

    def search_lex(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[LexHit]: ...
    def search_lex_filled(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> FilledHits:
        """What `domain.lexfill.filled_by_two_searches` gives over `search_lex`: `query`'s
        every-term hits and the any-term hits that fill the limit (REQ-SPEC-SEARCH-005)."""
        ...


class VectorIndex(Protocol):
    """Chunk embeddings keyed by content hash and chunk sequence number."""

    def has_vector_index(self) -> bool: ...
    def stored_vector_models(self) -> list[str]:
        """Each model name the stored vectors carry, once, sorted."""
        ...

    def pending_hashes(
        self, model: str, fingerprint: str, *, also: Sequence[tuple[str, str]] = ()
    ) -> list[str]:
        """Active hashes lacking a complete vector set from the model: one stored under
        (model, fingerprint) or under any (name, fingerprint) pair of `also` (the same model
        by another name, REQ-VEC-MODEL-001), ordered by their first path."""
        ...

    def pending_count(
        self, model: str, fingerprint: str, *, also: Sequence[tuple[str, str]] = ()
    ) -> int: ...
    def store_chunk_vectors(
        self,
        content_hash: str,
        chunks: Sequence[tuple[int, int, Sequence[float]]],
        model: str,
        fingerprint: str,
        embedded_at: str,
    ) -> None: ...
    def clear_vectors(self) -> None: ...
    def search_vectors(
        self,
        vector: Sequence[float],
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[VectorHit]:
        """Best chunk per document; `within` as in `LexicalIndex.search_lex`."""
        ...


class MetadataIndex(Protocol):
    """Per-document metadata (REQ-META-*), kept beside the index in a table of our own: the
    original's tables are untouched, so it still opens the index (REQ-META-004)."""

    def put_metadata(self, collection: str, path: str, metadata: Mapping[str, MetaValue]) -> None:
        """Replace the metadata of the active document at (collection, path), if any."""
        ...

    def put_metadata_many(
        self, collection: str, entries: Sequence[tuple[str, Mapping[str, MetaValue]]]
    ) -> None:
        """`put_metadata` of each (path, metadata) in turn (PostgreSQL: one statement)."""
        ...

    def active_metadata(
        self, collections: Sequence[str] | None, narrowing: Probe | None = None
    ) -> list[tuple[int, dict[str, MetaValue]]]:
        """(document id, metadata) of every active document in `collections` (None: all);
        a document indexed without metadata (by the original) has an empty mapping. With
        `narrowing`, documents that do not meet it may be left out (REQ-FILTER-009): a store
        with an index of metadata values reads only those that do."""
        ...

    def metadata_by_id(self, ids: Sequence[int]) -> dict[int, dict[str, MetaValue]]:
        """The stored metadata of these documents (those without any are left out)."""
        ...


class FileStampIndex(Protocol):
    """The stamp of each file as an update last read it (REQ-INDEX-NOOP-001), kept in a table
    of our own beside the index: the original's tables are untouched."""

    def file_stamps(self, collection: str) -> dict[str, RecordedStamp]:
        """Relative path -> recorded stamp, for the files of `collection`."""
        ...

    def record_file_stamps(self, collection: str, stamps: Mapping[str, RecordedStamp]) -> None:
        """Add or replace the stamps of these paths."""
        ...

    def forget_file_stamps(self, collection: str, paths: Sequence[str] | None = None) -> None:
        """Drop the stamps of these paths (None: of the whole collection)."""
        ...

    def rename_file_stamps(self, old: str, new: str) -> None: ...


class FrontMatterReader(Protocol):
    """Reads the metadata fields of a document's front matter (`---` YAML block)."""

    def read(self, text: str) -> dict[str, MetaValue]: ...


class Embedder(Protocol):
    @property
    def model_name(self) -> str: ...
    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]: ...
    def embed_documents(self, items: Sequence[tuple[str, str]]) -> list[list[float]]: ...
    def count_tokens(self, text: str) -> int: ...


class Reranker(Protocol):
    @property
    def model_name(self) -> str: ...
    def rerank(self, query: str, documents: Sequence[str]) -> list[float]: ...


class OverBudgetError(Exception):
    """A stage did not finish within the time it was given (`TimeBudget.run_within`)."""


class WorkCancelledError(Exception):
    """The request the work serves was given up (its time limit passed, its client went
    away): nobody will read its answer, so the work stops at its next `TimeBudget.check`
    (REQ-SEARCH-CANCEL-LDIMSCANCEL-001)."""


class TimeBudget(Protocol):
    """The time left to the request being served (its transport's time limit), so that a
    search can skip a slow optional stage instead of running past it (REQ-SEARCH-DEGRADE-001).

    `seconds_left`: None when the work has no time limit. `run_within`: the stage's result,
    or OverBudgetError once `seconds` have passed without one (the stage is told so: it stops
    at its next check, a model call in progress at its next step); a
    stage's own error is raised as it is. `check`: WorkCancelledError once the request has
    been given up, else nothing; long work calls it between its steps."""

    def seconds_left(self) -> float | None: ...
    def run_within(self, seconds: float, stage: Callable[[], T]) -> T: ...
    def check(self) -> None: ...


class QueryExpander(Protocol):
    @property
    def model_name(self) -> str: ...
    def expand(self, query: str) -> list[SubQuery]: ...


class ContentSource(Protocol):
    """Finds and reads the files of a collection folder.

    `scan` lists the files matching the collection's mask and reports, with a reason, those it
    found but cannot offer (bad names, links, unlistable folders); `read_text` gives a file's
    text or the reason it has none (denied, gone, binary, too large). `scan(stamps=False)`
    finds the same files and skips but leaves out when and how large each is (`created_at`
    and `modified_at` empty, `size` 0, no `stamp`): for a caller that asks only which files
    are there (`qmd ls`), at no cost per file beyond listing its folder. `known`: relative
    paths the caller already has, left out of `files` (still checked: one that cannot be
    offered any more is in `skipped`).
    """

    def scan(
        self, collection: Collection, *, stamps: bool = True, known: Set[str] = frozenset()
    ) -> ScanResult: ...
    def read_text(self, absolute_path: str) -> str | Unreadable: ...
    def is_directory(self, path: str) -> bool: ...


class Clock(Protocol):
    def now_iso(self) -> str: ...


class LlmCache(Protocol):
    def get(self, key: str) -> str | None: ...
    def put(self, key: str, value: str) -> None: ...
    def clear(self) -> None: ...


class ConfigRepository(Protocol):
    """The user's persistent configuration (the original's `index.yml`)."""

    def load_collections(self) -> list[Collection]: ...
    def save_collection(self, collection: Collection) -> None: ...
    def delete_collection(self, name: str) -> None: ...
    def rename_collection(self, old: str, new: str) -> None: ...
    def load_global_context(self) -> str | None: ...
    def save_global_context(self, text: str | None) -> None: ...


class DocumentExtractor(Protocol):
    """Turns a PDF, DOCX, PPTX, XLSX or HTML file into markdown text and metadata
    (domain.extraction; REQ-EXTRACT-*). Bounded per file in size and time; a parser that
    crashes or hangs gives an `ExtractionFailure`, never an exception."""

    # What produced the text: part of the cache key, and a file whose stamp was recorded under
    # another version is read again even when unchanged (REQ-INDEX-NOOP-001).
    version: str

    def digest(self, absolute_path: str) -> SourceDigest | ExtractionFailure:
        """The file's content hash (the cache key), or why it cannot be read / is too large."""
        ...

    def extract(self, absolute_path: str, file_format: str) -> Extracted | ExtractionFailure: ...

    def close(self) -> None:
        """Stop any worker process."""
        ...


class ExtractionLedger(Protocol):
    """Extraction outcomes kept in the index (extra tables only): a cache by source content
    hash, and the state of every extracted document for status reports and readers."""

    def cached_extraction(self, source_hash: str) -> CachedExtraction | None: ...
    def remember_extraction(self, outcome: CachedExtraction) -> None: ...
    def record_states(self, collection: str, states: Sequence[ExtractionState]) -> None:
        """Replace the collection's states with `states` (files no longer there drop out)."""
        ...

    def extraction_states(self, collection: str | None = None) -> list[ExtractionState]: ...
    def extraction_state(self, collection: str, path: str) -> ExtractionState | None: ...


class ExtractionStates(Protocol):
    """The recorded extraction outcome of one document ('ok', 'failed' with its reason, or
    'pending'), None when nothing is recorded for it; surfaces that report it (the LDIMS
    resource, REQ-LDIMS-RES-003/004) read it through this port."""

    def recorded_state(self, collection: str, path: str) -> ExtractionState | None: ...


class MemoryStore(Protocol):
    """Seed 004's memory: records kept where people can read them (markdown files with front
    matter), their vectors and the topics' vectors kept where they can be searched (the index).

    `put` is atomic per file (write a temporary file, rename it) and writes the files in the
    order given before it updates the index in one transaction; `load` reads the files back
    and gives every record whose file the index does not know in its current form an empty
    vector (a crash between the two steps, or a hand edit), and forgets index rows whose file
    is gone. `exclusive` serialises writers across threads and processes.
    """

    def exclusive(self) -> AbstractContextManager[None]: ...
    def topics(self) -> list[Topic]: ...
    def add_topic(self, topic: Topic) -> None: ...
    def get(self, record_id: str) -> MemoryRecord | None: ...
    def records(self, topic: str | None = None, kind: str | None = None) -> list[MemoryRecord]: ...
    def put(self, records: Sequence[MemoryRecord]) -> None: ...
    def load(self) -> list[MemoryRecord]: ...


@dataclass(frozen=True)
class Fusion:
    """What a client's LLM made of one group: the fused text, or why there is none."""

    text: str | None
    reason: str = ""


class Fuser(Protocol):
    """Asks someone's LLM to fuse a group of QA records (MCP sampling, in the server)."""

    def fuse(self, group: MergeGroup, prompt: str) -> Fusion: ...


# ---------------------------------------------------------------- chunks, namespaces, sessions
# (docs/spec/projmem.md; the projmem surface and `qmd session`)


@dataclass(frozen=True)
class ChunkRow:
    """A stored chunk of an active document, located: its stable id, where it lies and its text."""

    id: int
    collection: str
    path: str
    seq: int
    heading_path: str
    start_line: int
    end_line: int
    text: str


class DocumentCut(NamedTuple):
    """The sections of one document, cut from the content `content_hash` names."""

    doc_id: int
    content_hash: str
    sections: Sequence[Section]


class ChunkIndex(Protocol):
    """Chunk rows per document, cut from one version of its content (`domain.sections`).

    Reads return only *live* rows: those of an active document, cut from the content the
    document has now. Ids are never reused, so an id names the same text until its document
    changes. Storage-neutral: documents are named by `DocumentMeta.id`.
    """

    def unchunked_documents(self) -> list[tuple[int, str]]:
        """(id, content hash) of every active document with no rows cut from that content."""
        ...

    def replace_chunks(self, cuts: Sequence[DocumentCut]) -> None:
        """For each cut, drop the document's rows and store its sections (new ids); one call
        takes many documents, so an update writes them in bulk."""
        ...

    def prune(self) -> int:
        """Drop the rows of documents that are gone, inactive or changed; returns how many."""
        ...

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[ChunkRow]:
        """The live rows among `chunk_ids`, in the order asked (unknown ids left out)."""
        ...

    def document_chunks(self, collection: str, path: str) -> list[ChunkRow]:
        """The live rows of one document, in sequence order (none: not indexed or not chunked)."""
        ...

    def live_chunk_count(self, collections: Sequence[str] | None = None) -> int:
        """Live rows in all collections, or in those named."""
        ...


class NamespaceRegistry(Protocol):
    """Stable numeric ids for collection names (a name keeps its id while it exists)."""

    def namespace_ids(self, names: Sequence[str]) -> dict[str, int]:
        """The id of every name, assigning new ids to names not seen before."""
        ...


class IndexFigures(NamespaceRegistry, Protocol):
    """Namespace ids plus the figures `projmem_status` reports that no other port offers."""

    def llm_cache_entries(self) -> int: ...
    def embedding_dimensions(self) -> int | None: ...


class SessionSource(Protocol):
    """Agent session transcripts, read-only (e.g. Claude Code's JSONL files)."""

    def list_sessions(self) -> list[SessionRef]:
        """Every session, most recently written first."""
        ...

    def read_session(self, session_id: str, window: TurnWindow | None = None) -> Transcript | None:
        """The session's figures, and the text of the turns in `window` (None: every turn)."""
        ...


class SummaryStore(Protocol):
    """Structured session summaries (JSON text) by session id."""

    def get_summary(self, session_id: str) -> str | None: ...
    def put_summary(self, session_id: str, summary_json: str, updated_at: str) -> None: ...
    def summarized_ids(self) -> set[str]: ...


class NoteWriter(Protocol):
    """Writes a markdown note into the session vault folder; returns its path in the vault."""

    @property
    def folder(self) -> str: ...
    def write_note(self, name: str, text: str) -> str: ...


class MemoryRows(Protocol):
    """The index part of the memory: topic and record rows, vectors as little-endian
    float32 bytes, each method one transaction."""

    def memory_topics(self) -> list[tuple[str, bytes]]: ...
    def put_memory_topic(self, name: str, vector: bytes) -> None: ...
    def memory_record(self, record_id: str) -> tuple[str, bytes] | None:
        """(record JSON, vector) of one record."""
        ...

    def memory_records(self, topic: str | None, kind: str | None) -> list[tuple[str, bytes]]:
        """(record JSON, vector) of the records, by id."""
        ...

    def memory_path(self, record_id: str) -> str | None: ...
    def memory_files(self) -> list[tuple[str, str, str, bytes]]:
        """(id, path, file hash, vector) of every record."""
        ...

    def put_memory_records(
        self, rows: Sequence[tuple[str, str, str, str, str, str, bytes]]
    ) -> None:
        """Insert or replace (id, kind, topic, path, file hash, record JSON, vector) rows."""
        ...

    def sync_memory_records(
        self,
        gone: Sequence[str],
        paths: Mapping[str, str],
        refreshed: Sequence[tuple[str, str, str]],
    ) -> None:
        """Forget `gone`, set each record's path, refresh (file hash, record JSON, id)."""
        ...

"""The application object: the adapters one process (or one worker thread) works with, and
the use cases over them, each built the first time it is asked for. It is built in one call
from whatever adapters it is given (real ones from adapters/bootstrap.py, fakes in tests) and
never changed after."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from adapters.config.trust import TrustDecision
from adapters.config.yaml_config import QmdConfig
from adapters.fs.scope import ScopePolicy
from adapters.models.bundle import Models
from adapters.storage.registry import redacted
from domain.errors import QmdError
from domain.ports import (
    ChunkIndex,
    Clock,
    ConfigRepository,
    ContentSource,
    DocumentExtractor,
    DocumentStore,
    ExtractionLedger,
    FileStampIndex,
    IndexFigures,
    IndexMaintenance,
    LexicalIndex,
    LlmCache,
    MetadataIndex,
    NoteWriter,
    SessionSource,
    SummaryStore,
    VectorIndex,
)

if TYPE_CHECKING:
    from adapters.storage.backend import Backend
    from domain.usecases.chunks import ChunkKeeper
    from domain.usecases.collections import CollectionManager
    from domain.usecases.extraction import DocumentExtraction
    from domain.usecases.metadata import MetadataService
    from domain.usecases.projmem import ChunkSearch
    from domain.usecases.retrieval import Retrieval
    from domain.usecases.search import Searcher
    from domain.usecases.services import Services
    from domain.usecases.sessions import SessionMemory
    from domain.usecases.status import StatusReader


@dataclass(frozen=True)
class ProjmemAdapters:
    """What the projmem surface and `qmd session` need besides the core ports."""

    chunks: ChunkIndex
    figures: IndexFigures
    sessions: SessionSource
    summaries: SummaryStore
    notes: NoteWriter
    timer: Callable[[], float] = time.perf_counter
    # why the session vault may not be written (a vault outside --force-root): the projmem
    # surface refuses to start with it
    refusal: QmdError | None = None


@dataclass(frozen=True)
class App:
    """One process's application, built by its constructor alone (frozen: no field is set
    after it). The first seven fields are every app's; the others default to what an app of
    fakes lacks (`None`: an index without such a part). The use cases over them are built on
    first use, so a command builds, and imports, only those it runs. PDF/DOCX/PPTX/XLSX/HTML
    documents are extracted only when both `extractor` and `ledger` are given."""

    store: DocumentStore
    lexical: LexicalIndex
    vectors: VectorIndex
    cache: LlmCache
    config: ConfigRepository
    source: ContentSource
    clock: Clock
    models: Models = field(default_factory=Models)
    maintenance: IndexMaintenance | None = None  # None: the index offers no upkeep
    # PDF/DOCX/PPTX/XLSX/HTML extraction and its per-document states: wired only when both
    # are given
    extractor: DocumentExtractor | None = None
    ledger: ExtractionLedger | None = None
    metadata_index: MetadataIndex | None = None  # None: the index keeps no metadata
    # chunk tables, sessions and summaries (None: not wired)
    projmem: ProjmemAdapters | None = None
    stamps: FileStampIndex | None = None  # None: every update reads every file
    db_path: str = ""
    config_path: str = ""
    home: str | None = None
    # the approval state of a project-local `.qmd/index.yml` (adapters.config.trust)
    trust: TrustDecision | None = None
    # root, trust and allow-list: every part that reads or writes a file asks it
    scope: ScopePolicy = field(default_factory=ScopePolicy)
    # index.yml as this run read it at start (None: no file behind the app, a fake's)
    settings: QmdConfig | None = None
    # the opened index with its hooks (adapters/storage/backend.py); None: an app of fakes
    storage: Backend | None = None
    # what `close` runs, in order: helpers started over this app (`on_close`), then the
    # extractor's worker and the index
    closers: list[Callable[[], None]] = field(default_factory=list, init=False, compare=False)

    def __post_init__(self) -> None:
        if self.extractor is not None:
            self.closers.append(self.extractor.close)
        if self.storage is not None:
            self.closers.append(self.storage.close)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run `closer` first when the app closes (a helper over the app stops before what it
        uses does)."""
        self.closers.insert(0, closer)

    # -- what the opened index says of itself (one source: `storage`) -------------------------

    @property
    def backend(self) -> str:
        """Which backend holds the index (`BackendKind.name`; an app of fakes: "sqlite")."""
        return self.storage.name if self.storage is not None else "sqlite"

    @property
    def index_lock(self) -> Callable[[str, bool], AbstractContextManager[bool]] | None:
        """(lock name, wait) -> held?: a lock every process writing this index shares
        (advisory locks on PostgreSQL); None: the CLI's lock files beside the SQLite file."""
        return self.storage.lock if self.storage is not None else None

    @property
    def lock_holder(self) -> Callable[[str], str | None] | None:
        """Lock name -> who holds it (`pid N on HOST: qmd embed`), for refusals; None: lock
        files."""
        return self.storage.lock_holder if self.storage is not None else None

    @property
    def force_root(self) -> str | None:
        return self.scope.root

    # -- the use cases, each built the first time it is asked for -----------------------------

    @cached_property
    def searcher(self) -> Searcher:
        from adapters.fs.deadline import RequestTimeBudget
        from domain.usecases.search import Searcher, SearchModels

        chosen = self.models
        # the served request's time limit (adapters/fs/deadline.py): a slow rerank is cut
        budget = RequestTimeBudget()
        models = SearchModels(chosen.embedder, chosen.reranker, chosen.expander, budget)
        return Searcher(self.store, self.lexical, self.vectors, models)

    @cached_property
    def retrieval(self) -> Retrieval:
        from domain.usecases.retrieval import Retrieval

        return Retrieval(self.store, home=self.home)

    @cached_property
    def extraction(self) -> DocumentExtraction | None:
        if self.extractor is None or self.ledger is None:
            return None
        from domain.usecases.extraction import DocumentExtraction

        return DocumentExtraction(self.extractor, self.ledger, self.store, self.clock)

    @cached_property
    def status(self) -> StatusReader:
        from domain.usecases.status import StatusReader

        models = self.models
        return StatusReader(
            self.store,
            self.vectors,
            lambda: models.identity,
            self.extraction,
            same_model=models.same_model,
        )

    @cached_property
    def metadata(self) -> MetadataService | None:
        if self.metadata_index is None:
            return None
        from domain.usecases.metadata import MetadataService

        return MetadataService(self.metadata_index)

    @cached_property
    def chunk_keeper(self) -> ChunkKeeper | None:
        """Chunk rows kept in step by every indexing pass (None: no chunk tables)."""
        if self.projmem is None:
            return None
        from domain.usecases.chunks import ChunkKeeper

        return ChunkKeeper(self.store, self.projmem.chunks)

    @cached_property
    def collections(self) -> CollectionManager:
        from domain.usecases.chunks import ChunkedCollections
        from domain.usecases.collections import CollectionManager, IndexingParts

        recorder = None
        if self.metadata_index is not None:
            from adapters.fs.front_matter import YamlFrontMatter
            from domain.usecases.metadata import MetadataRecorder

            recorder = MetadataRecorder(self.metadata_index, YamlFrontMatter())
        parts = IndexingParts(
            extraction=self.extraction,
            metadata=recorder,
            # a rooted app adds and indexes only inside folders
            admits=self.scope.allows if self.scope.root is not None else None,
            stamps=self.stamps,
        )
        keeper = self.chunk_keeper
        if keeper is not None:
            return ChunkedCollections(keeper, self.config, self.source, self.clock, parts)
        return CollectionManager(self.store, self.config, self.source, self.clock, parts)

    @cached_property
    def chunks(self) -> ChunkSearch | None:
        """Chunk search (the projmem surface)."""
        if self.projmem is None:
            return None
        from domain.usecases.projmem import ChunkSearch

        tables = self.projmem
        return ChunkSearch(self.store, self.searcher, tables.chunks, tables.figures, tables.timer)

    @cached_property
    def sessions(self) -> SessionMemory | None:
        """Session memory (`qmd session`, the projmem surface)."""
        if self.projmem is None:
            return None
        from domain.usecases.sessions import SessionMemory, SessionStores

        parts = self.projmem
        stores = SessionStores(parts.sessions, parts.summaries, parts.notes, parts.refusal)
        return SessionMemory(stores, self.collections, self.clock)

    # -- the index ----------------------------------------------------------------------------

    @property
    def index_display(self) -> str:
        """Where the index is, for people: the file, or the URL without its password."""
        return redacted(self.db_path)

    def index_size(self) -> int:
        """Bytes the index takes: the SQLite file, or the PostgreSQL schema's tables."""
        if self.storage is not None:
            return self.storage.size()
        return os.path.getsize(self.db_path) if os.path.exists(self.db_path) else 0

    def services(self) -> Services:
        from domain.usecases.services import Services

        return Services(
            self.store,
            self.searcher,
            self.retrieval,
            self.status,
            extraction=self.extraction,
            metadata=self.metadata,
            chunks=self.chunks,
            sessions=self.sessions,
        )

    def close(self) -> None:
        for closer in self.closers:
            closer()
        self.closers.clear()

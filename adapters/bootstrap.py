"""The composition root: the one place that names concrete adapters.

Entry points (CLI, MCP stdio, HTTP) call `build_app`; tests call `assemble` with fakes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from adapters.config.trust import TrustDecision, decide, is_local_config_path, untrusted_view
from adapters.config.yaml_config import (
    YamlConfigRepository,
    cache_dir,
    load_config,
    resolve_paths,
    sync_config_to_store,
)
from adapters.extract.extractor import WorkerExtractor, timeout_from_env
from adapters.fs.claude_sessions import ClaudeCodeSessions, VaultFolder
from adapters.fs.clock import SystemClock
from adapters.fs.content_source import FileSystemSource
from adapters.fs.front_matter import YamlFrontMatter
from adapters.fs.memory import MarkdownMemoryStore
from adapters.fs.root_scope import (
    RootScope,
    RootScopedLexicalIndex,
    RootScopedStore,
    RootScopedVectorIndex,
)
from adapters.fs.watch import IndexWatcher
from adapters.models.bundle import Models
from adapters.models.idle import IdleUnloader
from adapters.postgres.url import index_label, is_postgres_url, redact
from adapters.sqlite.chunks import SqliteChunkIndex
from adapters.sqlite.extraction import SqliteExtractionLedger
from adapters.sqlite.memory import SqliteMemoryRows
from adapters.sqlite.stamps import SqliteFileStamps
from adapters.sqlite.store import SqliteIndex
from domain.errors import INVALID_ARGUMENT, QmdError
from domain.memory import DEFAULT_FUSION_THRESHOLD, DEFAULT_TOPIC_THRESHOLD, require_threshold
from domain.ports import (
    ChunkIndex,
    Clock,
    ConfigRepository,
    ContentSource,
    DocumentExtractor,
    DocumentStore,
    ExtractionLedger,
    FileStampIndex,
    IndexMaintenance,
    LexicalIndex,
    LlmCache,
    MetadataIndex,
    NoteWriter,
    SessionSource,
    SummaryStore,
    VectorIndex,
)
from domain.usecases.chunks import ChunkedCollections, ChunkKeeper
from domain.usecases.collections import CollectionManager
from domain.usecases.extraction import DocumentExtraction
from domain.usecases.memorize import Memorizer, Thresholds
from domain.usecases.metadata import MetadataRecorder, MetadataService
from domain.usecases.projmem import ChunkSearch, IndexFigures
from domain.usecases.retrieval import Retrieval
from domain.usecases.search import Searcher, SearchModels
from domain.usecases.services import Services
from domain.usecases.sessions import SessionMemory
from domain.usecases.status import StatusReader

if TYPE_CHECKING:
    from adapters.postgres.store import PostgresIndex


@dataclass(frozen=True)
class ProjmemAdapters:
    """What the projmem surface and `qmd session` need besides the core ports."""

    chunks: ChunkIndex
    figures: IndexFigures
    sessions: SessionSource
    summaries: SummaryStore
    notes: NoteWriter
    timer: Callable[[], float] = time.perf_counter


@dataclass
class App:
    store: DocumentStore
    lexical: LexicalIndex
    vectors: VectorIndex
    cache: LlmCache
    config: ConfigRepository
    source: ContentSource
    clock: Clock
    models: Models
    collections: CollectionManager
    retrieval: Retrieval
    searcher: Searcher
    status: StatusReader
    maintenance: IndexMaintenance | None = None
    # PDF/DOCX/PPTX/XLSX/HTML extraction and its per-document states (None: not wired)
    extraction: DocumentExtraction | None = None  # None: the index offers no upkeep
    db_path: str = ""
    config_path: str = ""
    home: str | None = None
    # the approval state of a project-local `.qmd/index.yml` (adapters.config.trust)
    trust: TrustDecision | None = None
    force_root: str | None = None
    closers: list[Any] = field(default_factory=list)
    chunks: ChunkSearch | None = None
    sessions: SessionMemory | None = None
    chunk_keeper: ChunkKeeper | None = None

    metadata: MetadataService | None = None  # None: the index keeps no metadata
    # "sqlite" or "postgresql": which storage adapter holds the index (status, doctor)
    backend: str = "sqlite"
    # (lock name, wait) -> held?: a lock every process writing this index shares (advisory
    # locks on PostgreSQL); None: the CLI's lock files beside the SQLite file
    index_lock: Callable[[str, bool], AbstractContextManager[bool]] | None = None

    @property
    def index_display(self) -> str:
        """Where the index is, for people: the file, or the URL without its password."""
        return redact(self.db_path) if is_postgres_url(self.db_path) else self.db_path

    def index_size(self) -> int:
        """Bytes the index takes: the SQLite file, or the PostgreSQL schema's tables."""
        size_bytes = getattr(self.maintenance, "size_bytes", None)
        if callable(size_bytes):  # the PostgreSQL index: its schema's tables
            return int(size_bytes())
        return os.path.getsize(self.db_path) if os.path.exists(self.db_path) else 0

    def services(self) -> Services:
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


def assemble(
    store: DocumentStore,
    lexical: LexicalIndex,
    vectors: VectorIndex,
    cache: LlmCache,
    config: ConfigRepository,
    source: ContentSource,
    clock: Clock,
    models: Models | None = None,
    home: str | None = None,
    maintenance: IndexMaintenance | None = None,
    extractor: DocumentExtractor | None = None,
    ledger: ExtractionLedger | None = None,
    metadata: MetadataIndex | None = None,
    projmem: ProjmemAdapters | None = None,
    stamps: FileStampIndex | None = None,
) -> App:
    """Wire the use cases over whatever adapters (real or fake) are given. Documents other
    than text (PDF, DOCX, …) are extracted only when both `extractor` and `ledger` are given."""
    chosen = models or Models()
    extraction = (
        DocumentExtraction(extractor, ledger, store, clock)
        if extractor is not None and ledger is not None
        else None
    )
    keeper = ChunkKeeper(store, projmem.chunks) if projmem is not None else None
    collections = (
        ChunkedCollections(keeper, config, source, clock, cache)
        if keeper is not None
        else CollectionManager(store, config, source, clock, cache)
    )
    if extraction is not None:
        collections.use_extraction(extraction)
    if metadata is not None:
        collections.metadata = MetadataRecorder(metadata, YamlFrontMatter())
    collections.stamps = stamps
    app = App(
        home=home,
        store=store,
        lexical=lexical,
        vectors=vectors,
        cache=cache,
        config=config,
        source=source,
        clock=clock,
        models=chosen,
        collections=collections,
        retrieval=Retrieval(store, home=home),
        searcher=Searcher(
            store,
            lexical,
            vectors,
            SearchModels(chosen.embedder, chosen.reranker, chosen.expander),
        ),
        status=StatusReader(store, vectors, chosen.identity, extraction),
        maintenance=maintenance,
        extraction=extraction,
        metadata=MetadataService(metadata) if metadata is not None else None,
    )
    if extractor is not None:
        app.closers.append(extractor.close)
    if projmem is not None and keeper is not None:
        _wire_projmem(app, projmem, keeper)
    return app


def _wire_projmem(app: App, adapters: ProjmemAdapters, keeper: ChunkKeeper) -> None:
    """Chunk rows kept by every indexing pass (`keeper`, in the collection manager), chunk
    search and session memory."""
    app.chunk_keeper = keeper
    app.chunks = ChunkSearch(
        app.store, app.searcher, adapters.chunks, adapters.figures, adapters.timer
    )
    app.sessions = SessionMemory(
        adapters.sessions, adapters.summaries, adapters.notes, app.collections, app.clock
    )


def build_app(
    index_name: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    with_models: bool = True,
    force_cpu: bool = False,
    force_root: str | None = None,
    compat: bool = False,
    index_url: str | None = None,
) -> App:
    """The production graph: the index (SQLite file or PostgreSQL URL) + YAML config + file
    system (+ GGUF models).

    With `force_root`, every read the use cases make goes through the root scope
    (`adapters.fs.root_scope`): the app sees only collections whose folders lie inside it.
    `compat`: the models follow the original 2.8.3's rules (the `--compat` MCP server).
    """
    environ = os.environ if env is None else env
    db_path, config_path = index_location(index_name, environ, index_url)
    index = open_index(db_path, environ)
    config = load_config(config_path)
    trust = decide(config, config_path, environ, builtin_models())
    if os.path.exists(config_path):
        sync_config_to_store(
            config,
            index,
            config_dir=os.path.dirname(config_path),
            home=environ.get("HOME"),
        )
    models = build_models(
        config_path,
        environ,
        force_cpu=force_cpu,
        cache=index,
        original_rules=compat,
        trust=trust,
    )
    if not with_models:
        # Nothing loads either way; this keeps the adapters out of commands that need no
        # model while `status` still counts pending embeddings for the configured model.
        models = Models(identity=models.identity)
    app = _wire(
        index,
        config_path,
        models,
        environ.get("HOME"),
        force_root,
        _projmem_adapters(index, environ),
    )
    app.db_path, app.config_path = db_path, config_path
    app.trust = trust
    return app


def index_location(
    index_name: str | None, env: Mapping[str, str], index_url: str | None = None
) -> tuple[str, str]:
    """(index location, config path): a SQLite file or a PostgreSQL URL, chosen by
    `--index-url`, then `INDEX_PATH`, then `index_url:` in the (global) index.yml, then the
    default SQLite file. A project-local `.qmd/index.yml` cannot point the index at a database:
    a checked-out folder must not send your documents to a server it names."""
    db_path, config_path = resolve_paths(index_name, env)
    if index_url:
        return index_url, config_path
    if env.get("INDEX_PATH") or is_local_config_path(config_path):
        return db_path, config_path
    configured = load_config(config_path).extra.get("index_url")
    if isinstance(configured, str) and is_postgres_url(configured.strip()):
        return configured.strip(), config_path
    return db_path, config_path


def open_index(location: str, env: Mapping[str, str]) -> SqliteIndex | PostgresIndex:
    if is_postgres_url(location):
        from adapters.postgres.store import PostgresIndex  # the driver only when needed

        return PostgresIndex.open(location, env)
    return SqliteIndex.open(location, env)


def _projmem_adapters(
    index: SqliteIndex | PostgresIndex, environ: Mapping[str, str]
) -> ProjmemAdapters:
    """Chunk tables in the index file; sessions from `QMD_SESSIONS_DIR` (default
    `~/.claude/projects`); summary notes into `QMD_SESSIONS_VAULT` (default
    `$XDG_DATA_HOME/qmd/sessions`, else `~/.local/share/qmd/sessions`)."""
    home = environ.get("HOME") or os.path.expanduser("~")
    sessions_dir = environ.get("QMD_SESSIONS_DIR") or os.path.join(home, ".claude", "projects")
    data_home = environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    vault = environ.get("QMD_SESSIONS_VAULT") or os.path.join(data_home, "qmd", "sessions")
    tables: SqliteChunkIndex | PostgresIndex = (
        SqliteChunkIndex(index.connection) if isinstance(index, SqliteIndex) else index
    )
    return ProjmemAdapters(
        chunks=tables,
        figures=tables,
        sessions=ClaudeCodeSessions(sessions_dir),
        summaries=tables,
        notes=VaultFolder(vault),
    )


def _wire(
    index: SqliteIndex | PostgresIndex,
    config_path: str,
    models: Models,
    home: str | None,
    force_root: str | None,
    projmem: ProjmemAdapters | None = None,
) -> App:
    store: DocumentStore = index
    lexical: LexicalIndex = index
    vectors: VectorIndex = index
    if force_root is not None:
        scope = RootScope(force_root, index)
        scoped_store = RootScopedStore(index, scope)
        store = scoped_store
        lexical = RootScopedLexicalIndex(index, scope)
        vectors = RootScopedVectorIndex(index, scoped_store, scope)
    app = assemble(
        store=store,
        lexical=lexical,
        vectors=vectors,
        cache=index,
        config=YamlConfigRepository(config_path),
        source=FileSystemSource(),
        clock=SystemClock(),
        models=models,
        home=home,
        maintenance=index,
        # the parsers run in a worker process, started on the first extracted file
        extractor=WorkerExtractor(timeout_s=timeout_from_env(os.environ)),
        ledger=(
            SqliteExtractionLedger(index.connection) if isinstance(index, SqliteIndex) else index
        ),
        metadata=index,
        projmem=projmem,
        # PostgreSQL keeps no stamps yet: there every update reads every file
        stamps=SqliteFileStamps(index.connection) if isinstance(index, SqliteIndex) else None,
    )
    app.force_root = force_root
    app.closers.append(index.close)
    if not isinstance(index, SqliteIndex):
        app.backend = "postgresql"
        app.index_lock = _advisory_lock(index)
    return app


def _advisory_lock(index: PostgresIndex) -> Callable[[str, bool], AbstractContextManager[bool]]:
    @contextmanager
    def lock(name: str, wait: bool) -> Iterator[bool]:
        with index.index_lock(name, wait) as held:
            yield held

    return lock


@dataclass
class IndexReader:
    """A second view of a built app for one worker thread: its own SQLite connection, the
    same models (shared, each behind its own lock) and the same root scope."""

    services: Services
    interrupt: Callable[[], None]  # abort the statement running on this connection
    close: Callable[[], None]


def open_reader(app: App, env: Mapping[str, str] | None = None) -> IndexReader:
    """Open another connection to `app`'s index (WAL: readers run beside each other and
    beside a writer such as `qmd update`), wired like `app` itself."""
    environ = os.environ if env is None else env
    index = open_index(app.db_path, environ)
    projmem = _projmem_adapters(index, environ)
    reader = _wire(index, app.config_path, app.models, app.home, app.force_root, projmem)
    if not isinstance(index, SqliteIndex):
        return IndexReader(reader.services(), index.interrupt, reader.close)
    raw = index.connection.raw
    return IndexReader(reader.services(), raw.interrupt, reader.close)


def keep_models_warm(models: Models, idle_s: float) -> IdleUnloader:
    """Models stay loaded between requests; with `idle_s` > 0 a model unused that long is
    unloaded (never one in use) and loads again on its next call (adapters/models/idle.py)."""
    return IdleUnloader(models.residents(), idle_s).start()


def watch_collections(app: App, env: Mapping[str, str] | None = None) -> IndexWatcher:
    """Re-index a collection of `app`'s index soon after its files change, on a thread and
    connection of its own (adapters/fs/watch.py). `app.close()` stops it."""
    environ = os.environ if env is None else env
    opened: list[App] = []

    def writer() -> App:
        if not opened:  # opened on the watcher's thread, which alone uses it
            index = open_index(app.db_path, environ)
            projmem = _projmem_adapters(index, environ)
            # wired like the app (chunks kept in step), without models: it never embeds
            opened.append(_wire(index, app.config_path, Models(), app.home, None, projmem))
        return opened[0]

    def reindex(name: str) -> None:
        manager = writer().collections
        manager.index(manager.get(name))

    watcher = IndexWatcher(lambda: writer().store.list_collections(), reindex).start()

    def stop() -> None:
        watcher.stop()
        for own in opened:
            own.close()

    app.closers.insert(0, stop)
    return watcher


def build_models(
    config_path: str,
    env: Mapping[str, str],
    force_cpu: bool = False,
    cache: LlmCache | None = None,
    original_rules: bool = False,
    trust: TrustDecision | None = None,
) -> Models:
    """GGUF model adapters; they resolve and load their files lazily, on first use. An
    unapproved project-local config's custom models are not used (the defaults are)."""
    from adapters.models.factory import models_from_config  # imports model code on demand

    config = load_config(config_path)
    from_yaml = (untrusted_view(config, trust) if trust is not None else config).models
    config_dir = os.path.dirname(os.path.abspath(config_path))
    return models_from_config(
        from_yaml,
        config_dir,
        env,
        force_cpu=force_cpu,
        cache=cache,
        original_rules=original_rules,
    )


def builtin_models() -> dict[str, str]:
    """The default model reference per role: a local config naming these needs no approval."""
    from adapters.models.references import DEFAULT_MODELS

    return {str(role): ref for role, ref in DEFAULT_MODELS.items()}


MEMORY_COLLECTION = "memory"


def memory_folder(app: App, env: Mapping[str, str] | None = None) -> str:
    """Seed 004's memory folder: `QMD_MEMORY_DIR`, else `<index name>-memory` beside the
    index (so every index has its own memory); for a PostgreSQL index, in the cache folder,
    named after the server, database and schema."""
    environ = os.environ if env is None else env
    chosen = environ.get("QMD_MEMORY_DIR")
    if chosen:
        return os.path.realpath(os.path.expanduser(chosen))
    if is_postgres_url(app.db_path):
        return os.path.join(cache_dir(environ), f"{index_label(app.db_path)}-memory")
    stem = os.path.splitext(os.path.basename(app.db_path))[0] or "index"
    return os.path.join(os.path.dirname(os.path.abspath(app.db_path)), f"{stem}-memory")


def memory_thresholds(env: Mapping[str, str] | None = None) -> Thresholds:
    """`QMD_MEMORY_TOPIC_THRESHOLD` and `QMD_MEMORY_FUSION_THRESHOLD`, each in 0..1."""
    environ = os.environ if env is None else env
    values = []
    for name, default in (
        ("QMD_MEMORY_TOPIC_THRESHOLD", DEFAULT_TOPIC_THRESHOLD),
        ("QMD_MEMORY_FUSION_THRESHOLD", DEFAULT_FUSION_THRESHOLD),
    ):
        raw = environ.get(name, "").strip()
        try:
            number = float(raw) if raw else None
        except ValueError:
            raise QmdError(INVALID_ARGUMENT, f"{name} must be a number between 0 and 1") from None
        values.append(require_threshold(name, number, default))
    return Thresholds(topic=values[0], fusion=values[1])


def _memory_store(app: App, folder: str, env: Mapping[str, str]) -> MarkdownMemoryStore:
    """The memory's files in `folder`, its rows in the index on a connection of their own;
    on PostgreSQL, writers are serialised by the index's advisory lock (across machines)."""
    if is_postgres_url(app.db_path):
        from adapters.postgres.store import PostgresIndex

        index = PostgresIndex.open(app.db_path, env)
        index_lock = app.index_lock or _advisory_lock(index)

        def lock() -> AbstractContextManager[bool]:
            return index_lock("memory", True)

        return MarkdownMemoryStore(folder, index, lock=lock, on_close=index.close)
    rows = SqliteMemoryRows.open(app.db_path, env)
    return MarkdownMemoryStore(folder, rows, on_close=rows.close)


def open_memory(app: App, env: Mapping[str, str] | None = None) -> Memorizer:
    """Seed 004's memory over `app`'s index: the markdown store in the memory folder (made a
    QMD collection named `memory` when no collection covers it yet), the app's embedder."""
    folder = memory_folder(app, env)
    store = _memory_store(app, folder, os.environ if env is None else env)
    app.closers.insert(0, store.close)
    memorizer = Memorizer(store, app.models.embedder, app.clock, memory_thresholds(env))
    collection = next((c for c in app.store.list_collections() if c.path == folder), None)
    if collection is None and app.store.get_collection(MEMORY_COLLECTION) is None:
        collection, _ = app.collections.add(folder, MEMORY_COLLECTION, "**/*.md")
    if collection is not None:
        indexed = collection
        lock = threading.Lock()

        def reindex() -> None:
            with lock:
                app.collections.index(indexed)

        memorizer.on_written(reindex)
    return memorizer


def repair_memory(app: App, env: Mapping[str, str] | None = None) -> int | None:
    """`qmd update`'s part in seed 004: re-embed hand-edited records and finish or undo
    interrupted merges. None when this index has no memory folder."""
    environ = os.environ if env is None else env
    if not os.path.isdir(memory_folder(app, environ)):
        return None
    embedder = app.models.embedder
    if embedder is None:  # `qmd update` runs without models; the memory may need one
        embedder = build_models(app.config_path, environ, cache=app.cache).embedder
    store = _memory_store(app, memory_folder(app, environ), environ)
    try:
        return Memorizer(store, embedder, app.clock, memory_thresholds(environ)).repair()
    finally:
        store.close()

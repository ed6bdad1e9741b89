"""The composition root: the one place that names concrete adapters.

Entry points (CLI, MCP stdio, HTTP) call `build_app`; tests call `assemble` with fakes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from adapters.backend import Backend, StoreIndex
from adapters.backends import open_backend
from adapters.config.trust import TrustDecision, decide, is_local_config_path, untrusted_view
from adapters.config.yaml_config import (
    YamlConfigRepository,
    cache_dir,
    first_own_config,
    load_config,
    own_config_path,
    resolve_paths,
    save_config,
    sync_config_to_store,
)
from adapters.extract.extractor import WorkerExtractor, timeout_from_env
from adapters.fs.claude_sessions import ClaudeCodeSessions, VaultFolder
from adapters.fs.clock import SystemClock
from adapters.fs.content_source import FileSystemSource
from adapters.fs.deadline import RequestTimeBudget
from adapters.fs.front_matter import YamlFrontMatter
from adapters.fs.memory import MarkdownMemoryStore
from adapters.fs.scope import (
    FolderScopedMemoryRows,
    RootScope,
    RootScopedLexicalIndex,
    RootScopedStore,
    RootScopedVectorIndex,
    ScopePolicy,
)
from adapters.fs.watch import IndexWatcher
from adapters.ldims_api.client import HttpDocumentBackend
from adapters.models.bundle import Models
from adapters.models.idle import IdleUnloader
from adapters.postgres.url import config_label, index_label, is_postgres_url, redact
from domain.document_backend import DocumentBackend
from domain.errors import INVALID_ARGUMENT, QmdError
from domain.memory import require_threshold
from domain.model import Collection
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
    MemoryRows,
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
    # root, trust and allow-list: every part that reads or writes a file asks it
    scope: ScopePolicy = field(default_factory=ScopePolicy)
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
    # lock name -> who holds it (`pid N on HOST: qmd embed`), for refusals; None: lock files
    lock_holder: Callable[[str], str | None] | None = None
    # the opened index with its hooks (adapters/backend.py); None: an app of fakes
    storage: Backend | None = None

    @property
    def index_display(self) -> str:
        """Where the index is, for people: the file, or the URL without its password."""
        return redact(self.db_path) if is_postgres_url(self.db_path) else self.db_path

    def index_size(self) -> int:
        """Bytes the index takes: the SQLite file, or the PostgreSQL schema's tables."""
        if self.storage is not None:
            return self.storage.size()
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
            budget=RequestTimeBudget(),  # the served request's time limit (adapters/fs)
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
        adapters.sessions,
        adapters.summaries,
        adapters.notes,
        app.collections,
        app.clock,
    )
    app.sessions.refusal = adapters.refusal


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

    One scope policy (`adapters.fs.scope`) is built here from `force_root` and the trust
    decision and reaches every part that reads or writes a file: with `force_root` the app
    sees only collections whose folders lie inside it, and an unapproved local config's
    outside collections are never indexed (not by `--watch` either).
    `compat`: the models follow the original 2.8.3's rules (the `--compat` MCP server).
    """
    environ = os.environ if env is None else env
    db_path, config_path = index_location(index_name, environ, index_url)
    storage = open_backend(db_path, environ)
    index = storage.index
    shared_path = resolve_paths(index_name, environ)[1]
    if config_path != shared_path and not os.path.exists(config_path):
        _first_own_config(index, config_path, shared_path)
    config = load_config(config_path)
    trust = decide(config, config_path, environ, builtin_models())
    scope = scope_policy(force_root, trust, environ.get("HOME"))
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
        storage,
        config_path,
        models,
        environ.get("HOME"),
        scope,
        _projmem_adapters(storage, environ, scope),
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
    a checked-out folder must not send your documents to a server it names.

    A PostgreSQL index named by `--index-url` or `INDEX_PATH` keeps its collections in its own
    `NAME@postgresql-HOST-PORT-DB-SCHEMA.yml` beside `NAME.yml`, so it never shares them with
    the SQLite index of that name, unless `NAME.yml` itself says `index_url:` that URL (the
    user chose to share it). A SQLite index keeps `NAME.yml`, as in the original."""
    db_path, config_path = resolve_paths(index_name, env)
    url = index_url or env.get("INDEX_PATH") or ""
    if is_postgres_url(url):
        if not is_local_config_path(config_path):
            named = load_config(config_path).extra.get("index_url")
            if isinstance(named, str) and named.strip() == url:
                return url, config_path
        return url, own_config_path(config_path, config_label(url))
    if env.get("INDEX_PATH") or is_local_config_path(config_path):
        return db_path, config_path
    configured = load_config(config_path).extra.get("index_url")
    if isinstance(configured, str) and is_postgres_url(configured.strip()):
        return configured.strip(), config_path
    return db_path, config_path


def _first_own_config(index: StoreIndex, config_path: str, shared_path: str) -> None:
    """Write the first own `index.yml` of a PostgreSQL index (`index_location`): the shared
    file's settings, and the collections the index holds documents of. Before, such an index
    mirrored the shared file, so it also listed the local index's collections, with 0 files;
    those are left out and forgotten by the sync that follows."""
    holding = {count.name for count in index.collection_counts() if count.documents}
    held = [c for c in index.list_collections() if c.name in holding]
    if not held and not os.path.exists(shared_path):
        return  # nothing to carry over: the file appears with the first `collection add`
    shared = load_config(shared_path)
    save_config(config_path, first_own_config(shared, held, index.get_global_context()))


def scope_policy(
    force_root: str | None, trust: TrustDecision | None, home: str | None
) -> ScopePolicy:
    """The process's one scope policy: the root, and the collections an unapproved
    project-local config names outside its project (never indexed, REQ-SEC-SCOPE-002)."""
    withheld = (
        [name for name, _path in trust.gated.paths]
        if trust is not None and not trust.allowed
        else []
    )
    return ScopePolicy(force_root, withheld, home)


def _projmem_adapters(
    storage: Backend,
    environ: Mapping[str, str],
    scope: ScopePolicy | None = None,
) -> ProjmemAdapters:
    """Chunk tables in the index file; sessions from `QMD_SESSIONS_DIR` (default
    `~/.claude/projects`); summary notes into `QMD_SESSIONS_VAULT` (default
    `$XDG_DATA_HOME/qmd/sessions`, else `~/.local/share/qmd/sessions`).

    Under a root, a transcript whose real path lies outside it is absent (the sessions
    folder is read-only, so it is confined), and a vault outside it makes the projmem surface
    refuse to start (it is written to), REQ-SEC-SCOPE-003."""
    policy = scope or ScopePolicy()
    home = environ.get("HOME") or os.path.expanduser("~")
    sessions_dir = environ.get("QMD_SESSIONS_DIR") or os.path.join(home, ".claude", "projects")
    data_home = environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    vault = environ.get("QMD_SESSIONS_VAULT") or os.path.join(data_home, "qmd", "sessions")
    tables = storage.chunks
    refusal: QmdError | None = None
    try:
        policy.require_inside("QMD_SESSIONS_VAULT", os.path.expanduser(vault))
    except QmdError as error:
        refusal = error
    return ProjmemAdapters(
        chunks=tables,
        figures=tables,
        sessions=ClaudeCodeSessions(sessions_dir, admit=policy.contains_path),
        summaries=tables,
        notes=VaultFolder(vault),
        refusal=refusal,
    )


def _wire(
    storage: Backend,
    config_path: str,
    models: Models,
    home: str | None,
    policy: ScopePolicy,
    projmem: ProjmemAdapters | None = None,
) -> App:
    index = storage.index
    store: DocumentStore = index
    lexical: LexicalIndex = index
    vectors: VectorIndex = index
    if policy.root is not None:
        scope = RootScope(policy, index)
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
        ledger=storage.ledger,
        metadata=index,
        projmem=projmem,
        stamps=storage.stamps,
    )
    app.force_root = policy.root
    app.scope = policy
    if policy.root is not None:  # a rooted server adds and indexes only inside folders
        app.collections.admits = policy.allows
    app.closers.append(storage.close)
    app.storage = storage
    app.backend = storage.name
    app.index_lock = storage.lock
    app.lock_holder = storage.lock_holder
    return app


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
    storage = open_backend(app.db_path, environ)
    projmem = _projmem_adapters(storage, environ, app.scope)
    reader = _wire(storage, app.config_path, app.models, app.home, app.scope, projmem)
    return IndexReader(reader.services(), storage.interrupt, reader.close)


def keep_models_warm(models: Models, idle_s: float) -> IdleUnloader:
    """Models stay loaded between requests; with `idle_s` > 0 a model unused that long is
    unloaded (never one in use) and loads again on its next call (adapters/models/idle.py)."""
    return IdleUnloader(models.residents(), idle_s).start()


def watch_collections(app: App, env: Mapping[str, str] | None = None) -> IndexWatcher:
    """Re-index a collection of `app`'s index soon after its files change, on a thread and
    connection of its own (adapters/fs/watch.py). `app.close()` stops it. Only collections
    the app's scope policy allows are watched and re-indexed, start-up catch-up included:
    not one outside the root, not one an unapproved local config names (REQ-SEC-SCOPE-002)."""
    environ = os.environ if env is None else env
    opened: list[App] = []

    def writer() -> App:
        if not opened:  # opened on the watcher's thread, which alone uses it
            storage = open_backend(app.db_path, environ)
            projmem = _projmem_adapters(storage, environ)
            # wired like the app (chunks kept in step), without models: it never embeds; it
            # writes every collection's rows, so its own store is not scoped (what it is
            # asked to re-index is)
            opened.append(
                _wire(storage, app.config_path, Models(), app.home, ScopePolicy(), projmem)
            )
        return opened[0]

    def allowed() -> list[Collection]:
        return [c for c in writer().store.list_collections() if app.scope.allows(c)]

    def reindex(name: str) -> None:
        manager = writer().collections
        collection = manager.get(name)
        if app.scope.allows(collection):
            manager.index(collection)

    watcher = IndexWatcher(allowed, reindex).start()

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


LDIMS_BACKEND_VAR = "LDIMS_API_BASE_URL"


def document_backend(env: Mapping[str, str], timeout_s: float) -> DocumentBackend | None:
    """Seed 003's LDIMS backend named by `LDIMS_API_BASE_URL` (e.g. `http://10.0.0.5:8181/api`),
    reached over HTTP with the service's request timeout; None when unset (the LDIMS surface
    serves this index). A URL that is not http(s) is `invalid-argument`."""
    url = env.get(LDIMS_BACKEND_VAR, "").strip()
    return HttpDocumentBackend(url, timeout_s) if url else None


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
    """`QMD_MEMORY_TOPIC_THRESHOLD` and `QMD_MEMORY_FUSION_THRESHOLD`, each in 0..1; unset,
    the embedding model's calibration applies (domain/memory.py CALIBRATIONS)."""
    environ = os.environ if env is None else env
    values: list[float | None] = []
    for name in ("QMD_MEMORY_TOPIC_THRESHOLD", "QMD_MEMORY_FUSION_THRESHOLD"):
        raw = environ.get(name, "").strip()
        try:
            number = float(raw) if raw else None
        except ValueError:
            raise QmdError(INVALID_ARGUMENT, f"{name} must be a number between 0 and 1") from None
        values.append(None if number is None else require_threshold(name, number, 0.0))
    return Thresholds(topic=values[0], fusion=values[1])


def _memory_store(app: App, folder: str, env: Mapping[str, str]) -> MarkdownMemoryStore:
    """The memory's files in `folder`, its rows in the index on a connection of their own;
    on PostgreSQL, writers are serialised by the index's advisory lock (across machines)."""
    storage = open_backend(app.db_path, env)  # a connection of the memory's own
    rows = _scoped_rows(app, storage.memory(), folder)
    index_lock = app.index_lock or storage.lock
    if index_lock is None:  # the memory folder's lock file
        return MarkdownMemoryStore(folder, rows, on_close=storage.close)
    shared = index_lock

    def lock() -> AbstractContextManager[bool]:
        return shared("memory", True)

    return MarkdownMemoryStore(folder, rows, lock, storage.close)


def _scoped_rows(app: App, rows: MemoryRows, folder: str) -> MemoryRows:
    """Under a root, the index's memory rows as seen from this folder alone: records stored
    from a folder elsewhere (by an unrooted server) are absent (REQ-SEC-SCOPE-004)."""
    return FolderScopedMemoryRows(rows, folder) if app.scope.root is not None else rows


def open_memory(app: App, env: Mapping[str, str] | None = None) -> Memorizer:
    """Seed 004's memory over `app`'s index: the markdown store in the memory folder (made a
    QMD collection named `memory` when no collection covers it yet), the app's embedder."""
    folder = memory_folder(app, env)
    # under --force-root the memory's files must lie inside: refuse before anything is
    # created (REQ-SEC-SCOPE-003)
    app.scope.require_inside("QMD_MEMORY_DIR", folder)
    store = _memory_store(app, folder, os.environ if env is None else env)
    app.closers.insert(0, store.close)
    memorizer = Memorizer(store, app.models.embedder, app.clock, memory_thresholds(env))
    collection = next((c for c in app.store.list_collections() if c.path == folder), None)
    if collection is None and not app.collections.name_taken(MEMORY_COLLECTION):
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

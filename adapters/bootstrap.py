"""The composition root: the one place that names concrete adapters.

Entry points (CLI, MCP stdio, HTTP) call `build_app`; tests call `assemble` with fakes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters.config.trust import TrustDecision, decide, untrusted_view
from adapters.config.yaml_config import (
    YamlConfigRepository,
    load_config,
    resolve_paths,
    sync_config_to_store,
)
from adapters.fs.claude_sessions import ClaudeCodeSessions, VaultFolder
from adapters.fs.clock import SystemClock
from adapters.fs.content_source import FileSystemSource
from adapters.fs.root_scope import (
    RootScope,
    RootScopedLexicalIndex,
    RootScopedStore,
    RootScopedVectorIndex,
)
from adapters.models.bundle import Models
from adapters.sqlite.chunks import SqliteChunkIndex
from adapters.sqlite.store import SqliteIndex
from domain.ports import (
    ChunkIndex,
    Clock,
    ConfigRepository,
    ContentSource,
    DocumentStore,
    IndexMaintenance,
    LexicalIndex,
    LlmCache,
    NoteWriter,
    SessionSource,
    SummaryStore,
    VectorIndex,
)
from domain.usecases.chunks import ChunkedCollections, ChunkKeeper
from domain.usecases.collections import CollectionManager
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
    maintenance: IndexMaintenance | None = None  # None: the index offers no upkeep
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

    def services(self) -> Services:
        return Services(
            self.store, self.searcher, self.retrieval, self.status, self.chunks, self.sessions
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
    projmem: ProjmemAdapters | None = None,
) -> App:
    """Wire the use cases over whatever adapters (real or fake) are given."""
    chosen = models or Models()
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
        collections=CollectionManager(store, config, source, clock, cache),
        retrieval=Retrieval(store, home=home),
        searcher=Searcher(
            store,
            lexical,
            vectors,
            SearchModels(chosen.embedder, chosen.reranker, chosen.expander),
        ),
        status=StatusReader(store, vectors, chosen.identity),
        maintenance=maintenance,
    )
    if projmem is not None:
        _wire_projmem(app, projmem)
    return app


def _wire_projmem(app: App, adapters: ProjmemAdapters) -> None:
    """Chunk rows kept by every indexing pass, chunk search and session memory."""
    keeper = ChunkKeeper(app.store, adapters.chunks)
    app.chunk_keeper = keeper
    app.collections = ChunkedCollections(keeper, app.config, app.source, app.clock, app.cache)
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
) -> App:
    """The production graph: SQLite index + YAML config + file system (+ GGUF models).

    With `force_root`, every read the use cases make goes through the root scope
    (`adapters.fs.root_scope`): the app sees only collections whose folders lie inside it.
    `compat`: the models follow the original 2.8.3's rules (the `--compat` MCP server).
    """
    environ = os.environ if env is None else env
    db_path, config_path = resolve_paths(index_name, environ)
    index = SqliteIndex.open(db_path, environ)
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


def _projmem_adapters(index: SqliteIndex, environ: Mapping[str, str]) -> ProjmemAdapters:
    """Chunk tables in the index file; sessions from `QMD_SESSIONS_DIR` (default
    `~/.claude/projects`); summary notes into `QMD_SESSIONS_VAULT` (default
    `$XDG_DATA_HOME/qmd/sessions`, else `~/.local/share/qmd/sessions`)."""
    home = environ.get("HOME") or os.path.expanduser("~")
    sessions_dir = environ.get("QMD_SESSIONS_DIR") or os.path.join(home, ".claude", "projects")
    data_home = environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    vault = environ.get("QMD_SESSIONS_VAULT") or os.path.join(data_home, "qmd", "sessions")
    tables = SqliteChunkIndex(index.connection)
    return ProjmemAdapters(
        chunks=tables,
        figures=tables,
        sessions=ClaudeCodeSessions(sessions_dir),
        summaries=tables,
        notes=VaultFolder(vault),
    )


def _wire(
    index: SqliteIndex,
    config_path: str,
    models: Models,
    home: str | None,
    force_root: str | None,
    projmem: ProjmemAdapters,
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
        projmem=projmem,
    )
    app.force_root = force_root
    app.closers.append(index.close)
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
    index = SqliteIndex.open(app.db_path, environ)
    projmem = _projmem_adapters(index, environ)
    reader = _wire(index, app.config_path, app.models, app.home, app.force_root, projmem)
    raw = index.connection.raw
    return IndexReader(reader.services(), raw.interrupt, reader.close)


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

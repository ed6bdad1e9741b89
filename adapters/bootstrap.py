"""The composition root: the one place that names concrete adapters.

Entry points (CLI, MCP stdio, HTTP) call `build_app`; tests build an `App` of fakes. The
application object itself is adapters/app.py; where the index, its config and the memory and
session folders are is adapters/locations.py; the memory's wiring is adapters/memory_wiring.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adapters.app import App as App
from adapters.app import ProjmemAdapters as ProjmemAdapters
from adapters.config.trust import TrustDecision, decide, untrusted_view
from adapters.config.yaml_config import (
    QmdConfig,
    YamlConfigRepository,
    is_local_config_path,
    load_config,
    resolve_paths,
    sync_config_to_store,
)
from adapters.deferred import deferred
from adapters.extract.extractor import WorkerExtractor, timeout_from_env
from adapters.fs.clock import SystemClock
from adapters.fs.scope import (
    RootScope,
    RootScopedLexicalIndex,
    RootScopedStore,
    RootScopedVectorIndex,
    ScopePolicy,
)
from adapters.locations import (
    ConfigLoader,
    config_reader,
    index_location,
    session_folders,
    write_first_own_config,
)
from adapters.models.bundle import Models
from adapters.storage.backend import Backend, StoreIndex
from adapters.storage.registry import open_backend
from domain.errors import QmdError
from domain.model import Collection
from domain.ports import (
    ContentSource,
    DocumentStore,
    LexicalIndex,
    LlmCache,
    NoteWriter,
    SessionSource,
    VectorIndex,
)

if TYPE_CHECKING:
    from adapters.fs.watch import IndexWatcher
    from adapters.models.idle import IdleUnloader
    from domain.document_backend import DocumentBackend
    from domain.usecases.services import Services
    from domain.usecases.status import EmbeddingIdentity


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
    load = config_reader()  # index.yml is parsed once, whoever reads it
    db_path, config_path = index_location(index_name, environ, index_url, load)
    storage = open_backend(db_path, environ)
    index = storage.index
    shared_path = resolve_paths(index_name, environ)[1]
    if config_path != shared_path and not os.path.exists(config_path):
        _first_own_config(index, config_path, shared_path)
    config = load(config_path)
    # the built-in model names matter only to a project-local config's approval
    builtins = builtin_models() if is_local_config_path(config_path) else {}
    trust = decide(config, config_path, environ, builtins)
    scope = scope_policy(force_root, trust, environ.get("HOME"))
    if os.path.exists(config_path):
        sync_config_to_store(
            config,
            index,
            config_path=config_path,
            home=environ.get("HOME"),
        )
    if with_models:
        models = build_models(
            config_path,
            environ,
            force_cpu=force_cpu,
            cache=index,
            original_rules=compat,
            trust=trust,
            load=load,
        )
    else:
        # No model adapter is built (nor imported); `status` still counts pending
        # embeddings for the configured model by its identity.
        models = Models(
            identify=lambda: embedding_identity(config_path, environ, trust, load, cache=index),
            same_model=same_embedding_model(environ),
        )
    return _wire(
        storage,
        config_path,
        models,
        environ.get("HOME"),
        scope,
        _projmem_adapters(storage, environ, scope),
        db_path=db_path,
        trust=trust,
        settings=config,
    )


def _first_own_config(index: StoreIndex, config_path: str, shared_path: str) -> None:
    """The first own `index.yml` of a PostgreSQL index, from what the index holds
    (adapters/locations.py `write_first_own_config`)."""
    holding = {count.name for count in index.collection_counts() if count.documents}
    held = [c for c in index.list_collections() if c.name in holding]
    write_first_own_config(config_path, shared_path, held, index.get_global_context())


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
    folders = session_folders(environ)
    sessions_dir, vault = folders.transcripts, folders.vault
    tables = storage.chunks
    refusal: QmdError | None = None
    try:
        policy.require_inside("QMD_SESSIONS_VAULT", os.path.expanduser(vault))
    except QmdError as error:
        refusal = error

    # built on first use, like the chunk tables (adapters/deferred.py): only the projmem
    # surface and `qmd session` read sessions or write notes
    def sessions() -> SessionSource:
        from adapters.fs.claude_sessions import ClaudeCodeSessions

        return ClaudeCodeSessions(sessions_dir, admit=policy.contains_path)

    def notes() -> NoteWriter:
        from adapters.fs.claude_sessions import VaultFolder

        return VaultFolder(vault)

    return ProjmemAdapters(
        chunks=tables,
        figures=tables,
        sessions=deferred(sessions),
        summaries=tables,
        notes=deferred(notes),
        refusal=refusal,
    )


def _wire(
    storage: Backend,
    config_path: str,
    models: Models,
    home: str | None,
    policy: ScopePolicy,
    projmem: ProjmemAdapters | None = None,
    *,
    db_path: str = "",
    trust: TrustDecision | None = None,
    settings: QmdConfig | None = None,
) -> App:
    index = storage.index
    store, lexical, vectors = scoped_ports(policy, index, index, index)
    return App(
        store=store,
        lexical=lexical,
        vectors=vectors,
        cache=index,
        # every edit of index.yml re-mirrors it into the (unscoped) index it belongs to
        config=YamlConfigRepository(config_path, mirror=index, home=home),
        source=deferred(_file_system),  # folders are read by indexing commands only
        clock=SystemClock(),
        models=models,
        home=home,
        maintenance=index,
        # the parsers run in a worker process, started on the first extracted file
        extractor=WorkerExtractor(timeout_s=timeout_from_env(os.environ)),
        ledger=storage.ledger,
        metadata_index=index,
        projmem=projmem,
        # None where the backend keeps no stamps: there every update reads every file
        stamps=storage.stamps,
        db_path=db_path,
        config_path=config_path,
        trust=trust,
        scope=policy,
        settings=settings,
        storage=storage,
    )


def scoped_ports(
    policy: ScopePolicy, store: DocumentStore, lexical: LexicalIndex, vectors: VectorIndex
) -> tuple[DocumentStore, LexicalIndex, VectorIndex]:
    """The index's read ports as `policy` lets them be seen: under a root, only the
    collections it allows exist for the use cases (adapters/fs/scope.py); without one, as
    they are. The surfaces' services come from these, and their `SurfaceContext` carries the
    same policy."""
    if policy.root is None:
        return store, lexical, vectors
    scope = RootScope(policy, store)
    scoped_store = RootScopedStore(store, scope)
    return (
        scoped_store,
        RootScopedLexicalIndex(lexical, scope),
        RootScopedVectorIndex(vectors, scoped_store, scope),
    )


def _file_system() -> ContentSource:
    from adapters.fs.content_source import FileSystemSource

    return FileSystemSource()


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
    from adapters.models.idle import IdleUnloader  # servers only

    return IdleUnloader(models.residents(), idle_s).start()


def watch_collections(app: App, env: Mapping[str, str] | None = None) -> IndexWatcher:
    """Re-index a collection of `app`'s index soon after its files change, on a thread and
    connection of its own (adapters/fs/watch.py). `app.close()` stops it. Only collections
    the app's scope policy allows are watched and re-indexed, start-up catch-up included:
    not one outside the root, not one an unapproved local config names (REQ-SEC-SCOPE-002)."""
    from adapters.fs.watch import IndexWatcher  # `--watch` only

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

    app.on_close(stop)
    return watcher


def build_models(
    config_path: str,
    env: Mapping[str, str],
    force_cpu: bool = False,
    cache: LlmCache | None = None,
    original_rules: bool = False,
    trust: TrustDecision | None = None,
    load: ConfigLoader = load_config,
) -> Models:
    """GGUF model adapters; they resolve and load their files lazily, on first use. An
    unapproved project-local config's custom models are not used (the defaults are)."""
    from adapters.fs.deadline import RequestTimeBudget
    from adapters.models.factory import models_from_config  # imports model code on demand

    return models_from_config(
        _models_of(load(config_path), trust),
        os.path.dirname(os.path.abspath(config_path)),
        env,
        force_cpu=force_cpu,
        cache=cache,
        original_rules=original_rules,
        # the served request's: a model call stops at its next step once that is given up
        stop_check=RequestTimeBudget().check,
    )


def embedding_identity(
    config_path: str,
    env: Mapping[str, str],
    trust: TrustDecision | None = None,
    load: ConfigLoader = load_config,
    cache: LlmCache | None = None,
) -> EmbeddingIdentity:
    """The configured embedding model's name and fingerprint, with no model adapter built:
    for the commands that need no model (`status` counts pending embeddings with it). `cache`:
    the index, where a remote model's embedding space is remembered."""
    from adapters.models.factory import embedding_identity as identity_of

    config_dir = os.path.dirname(os.path.abspath(config_path))
    return identity_of(_models_of(load(config_path), trust), config_dir, env, cache)


def same_embedding_model(env: Mapping[str, str]) -> Callable[[str, str], bool]:
    """Whether vectors stored under a model name are the configured model's
    (REQ-VEC-MODEL-001), for the commands that build no model adapter; asked only about a
    stored name that differs from the configured one, so the resolver's module is imported
    then."""

    def same(stored: str, current: str) -> bool:
        if stored == current:
            return True
        from adapters.models.references import ModelResolver

        return ModelResolver(env=env).names_same_model(stored, current)

    return same


def _models_of(config: QmdConfig, trust: TrustDecision | None) -> Mapping[str, str]:
    return (untrusted_view(config, trust) if trust is not None else config).models


def builtin_models() -> dict[str, str]:
    """The default model reference per role: a local config naming these needs no approval."""
    from adapters.models.references import DEFAULT_MODELS

    return {str(role): ref for role, ref in DEFAULT_MODELS.items()}


LDIMS_BACKEND_VAR = "LDIMS_API_BASE_URL"


def document_backend(env: Mapping[str, str], timeout_s: float) -> DocumentBackend | None:
    """Seed 003's LDIMS backend named by `LDIMS_API_BASE_URL` (e.g. `http://10.0.0.5:8181/api`),
    reached over HTTP with the service's request timeout; None when unset (the LDIMS surface
    serves this index). A URL that is not http(s) is `invalid-argument`. Each exchange also
    ends with the request it serves: sooner when less of its time is left, at once when it
    is given up (REQ-LDIMS-DEPLOY-006)."""
    url = env.get(LDIMS_BACKEND_VAR, "").strip()
    if not url:
        return None
    from adapters.fs.deadline import RequestTimeBudget
    from adapters.ldims_api.client import HttpDocumentBackend  # HTTP code only when named

    budget = RequestTimeBudget()
    return HttpDocumentBackend(
        url, timeout_s, time_left=budget.seconds_left, stop_check=budget.check
    )

"""The composition root: the one place that names concrete adapters.

Entry points (CLI, MCP stdio, HTTP) call `build_app`; tests call `assemble` with fakes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters.config.yaml_config import (
    YamlConfigRepository,
    load_config,
    resolve_paths,
    sync_config_to_store,
)
from adapters.fs.clock import SystemClock
from adapters.fs.content_source import FileSystemSource
from adapters.mcp.services import Services
from adapters.sqlite.store import SqliteIndex
from domain.ports import (
    Clock,
    ConfigRepository,
    ContentSource,
    DocumentStore,
    Embedder,
    LexicalIndex,
    LlmCache,
    QueryExpander,
    Reranker,
    VectorIndex,
)
from domain.usecases.collections import CollectionManager
from domain.usecases.retrieval import Retrieval
from domain.usecases.search import Searcher
from domain.usecases.status import EmbeddingIdentity, StatusReader

DEFAULT_EMBED_MODEL = "hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf"


@dataclass
class Models:
    """The model adapters in use; any may be absent (the features then degrade or error)."""

    embedder: Embedder | None = None
    reranker: Reranker | None = None
    expander: QueryExpander | None = None
    identity: EmbeddingIdentity = field(
        default_factory=lambda: EmbeddingIdentity(DEFAULT_EMBED_MODEL, "")
    )


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
    db_path: str = ""
    config_path: str = ""
    closers: list[Any] = field(default_factory=list)

    def services(self) -> Services:
        return Services(self.store, self.searcher, self.retrieval, self.status)

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
) -> App:
    """Wire the use cases over whatever adapters (real or fake) are given."""
    chosen = models or Models()
    return App(
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
            store, lexical, vectors, chosen.embedder, chosen.reranker, chosen.expander
        ),
        status=StatusReader(store, vectors, chosen.identity),
    )


def build_app(
    index_name: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    with_models: bool = True,
    force_cpu: bool = False,
    compat: bool = False,
) -> App:
    """The production graph: SQLite index + YAML config + file system (+ GGUF models).

    `compat`: the models follow the original 2.8.3's rules (the `--compat` MCP server)."""
    environ = os.environ if env is None else env
    db_path, config_path = resolve_paths(index_name, environ)
    index = SqliteIndex.open(db_path, environ)
    if os.path.exists(config_path):
        sync_config_to_store(load_config(config_path), index)
    models = build_models(
        config_path, environ, force_cpu=force_cpu, cache=index, original_rules=compat
    )
    if not with_models:
        # Nothing loads either way; this keeps the adapters out of commands that need no
        # model while `status` still counts pending embeddings for the configured model.
        models = Models(identity=models.identity)
    app = assemble(
        store=index,
        lexical=index,
        vectors=index,
        cache=index,
        config=YamlConfigRepository(config_path),
        source=FileSystemSource(),
        clock=SystemClock(),
        models=models,
        home=environ.get("HOME"),
    )
    app.db_path, app.config_path = db_path, config_path
    app.closers.append(index.close)
    return app


def build_models(
    config_path: str,
    env: Mapping[str, str],
    force_cpu: bool = False,
    cache: LlmCache | None = None,
    original_rules: bool = False,
) -> Models:
    """GGUF model adapters; they resolve and load their files lazily, on first use."""
    from adapters.models.factory import models_from_config  # imports model code on demand

    return models_from_config(
        config_path, env, force_cpu=force_cpu, cache=cache, original_rules=original_rules
    )

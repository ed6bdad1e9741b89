"""Seed 004's memory over a built app: its markdown store in the memory folder
(adapters/locations.py), its rows in the app's index, the app's embedder. Imported only by the
commands that serve or repair the memory, so no other command pays for the memory's code."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager

from adapters.bootstrap import App, build_models
from adapters.fs.memory import MarkdownMemoryStore
from adapters.fs.scope import FolderScopedMemoryRows
from adapters.locations import MEMORY_COLLECTION, memory_folder, memory_thresholds
from adapters.storage.registry import open_backend
from domain.ports import MemoryRows
from domain.usecases.memorize import Memorizer


def _memory_store(app: App, folder: str, env: Mapping[str, str]) -> MarkdownMemoryStore:
    """The memory's files in `folder`, its rows in the index on a connection of their own;
    where the backend has a shared lock (PostgreSQL's advisory locks), writers on every machine
    take it; otherwise the memory folder's lock file serialises them."""
    storage = open_backend(app.db_path, env)  # a connection of the memory's own
    rows = _scoped_rows(app, storage.memory(), folder)
    index_lock = app.index_lock or storage.lock
    if index_lock is None:
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
    environ = os.environ if env is None else env
    folder = memory_folder(app.db_path, environ)
    # under --force-root the memory's files must lie inside: refuse before anything is
    # created (REQ-SEC-SCOPE-003)
    app.scope.require_inside("QMD_MEMORY_DIR", folder)
    store = _memory_store(app, folder, environ)
    app.on_close(store.close)
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
    folder = memory_folder(app.db_path, environ)
    if not os.path.isdir(folder):
        return None
    embedder = app.models.embedder
    if embedder is None:  # `qmd update` runs without models; the memory may need one
        embedder = build_models(app.config_path, environ, cache=app.cache).embedder
    store = _memory_store(app, folder, environ)
    try:
        return Memorizer(store, embedder, app.clock, memory_thresholds(environ)).repair()
    finally:
        store.close()

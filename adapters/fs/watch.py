"""Keeping the index fresh while serving: watch the collection folders, re-index a collection
shortly after its files change (`qmd mcp --watch`; docs/decisions/0032).

File events come from `watchfiles` (inotify on Linux, FSEvents on macOS, ReadDirectoryChangesW
on Windows, through the Rust `notify` crate), batched: a burst of saves (a `git checkout`, an
editor's write-rename dance) becomes one re-index once the folder has been quiet for the
debounce time. An event counts only if it concerns a file the collection would index (its
mask, its ignore globs, no dot-folders, no `node_modules` and the like) or could hide one (a
folder appearing or disappearing). The re-index runs on this watcher's own thread and its
own index connection, so requests are never held up by it (SQLite WAL: readers see the last
committed state), and a failed re-index is logged and retried at the next change.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from adapters.fs.content_source import DEFAULT_IGNORES, EXCLUDED_DIRS
from domain.globs import glob_match, split_glob_mask
from domain.model import Collection

log = logging.getLogger("qmd.watch")

DEFAULT_DEBOUNCE_MS = 300
_RECHECK_MS = 2000  # how often the list of collections is looked at again


def collection_root(collection: Collection) -> str:
    return os.path.abspath(os.path.expanduser(collection.path))


def wants(collection: Collection, relative: str) -> bool:
    """Whether a file at `relative` (POSIX, inside the collection folder) would be indexed."""
    parts = relative.split("/")
    if any(part.startswith(".") or part in EXCLUDED_DIRS for part in parts):
        return False
    patterns = [p for p in split_glob_mask(collection.pattern) if p]
    if not any(glob_match(p, relative) for p in patterns):
        return False
    ignores = (*DEFAULT_IGNORES, *(g for g in collection.ignore if g))
    return not any(glob_match(g, relative) for g in ignores)


def affected(collections: Sequence[Collection], paths: Iterable[str]) -> list[str]:
    """The names of the collections that changed `paths` (absolute) concern, in order."""
    names: list[str] = []
    for path in paths:
        for collection in collections:
            if collection.name in names:
                continue
            root = collection_root(collection)
            if path != root and not path.startswith(root + os.sep):
                continue
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if (
                relative == "."
                or wants(collection, relative)
                or _may_hide_files(collection, path, relative)
            ):
                names.append(collection.name)
    return names


def _may_hide_files(collection: Collection, path: str, relative: str) -> bool:
    """A folder that appeared, or a path that vanished and may have been one (a removed or
    renamed folder sends one event for itself, none for the files it held)."""
    if any(part.startswith(".") or part in EXCLUDED_DIRS for part in relative.split("/")):
        return False
    return os.path.isdir(path) or not os.path.lexists(path)


@dataclass
class WatchStats:
    reindexed: int = 0
    failures: int = 0


class IndexWatcher:
    """Watches the folders of `collections()` and calls `reindex(name)` for each collection
    whose files changed. `start()` runs it on a thread of its own; `stop()` ends it."""

    def __init__(
        self,
        collections: Callable[[], Sequence[Collection]],
        reindex: Callable[[str], object],
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
    ) -> None:
        self._collections = collections
        self._reindex = reindex
        self._debounce_ms = debounce_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats = WatchStats()
        self.ready = threading.Event()  # set once the first watch is in place

    def start(self) -> IndexWatcher:
        self._thread = threading.Thread(target=self._run, name="qmd-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch_once()
            except Exception:  # a watch that broke (a folder gone) is set up again
                log.exception("watching the collection folders failed; retrying")
                self._stop.wait(_RECHECK_MS / 1000)

    def _watch_once(self) -> None:
        """Watch the current folders until they change (a collection added or removed)."""
        from watchfiles import watch

        collections = list(self._collections())
        roots = sorted({collection_root(c) for c in collections if os.path.isdir(c.path)})
        if not roots:
            self.ready.set()
            self._stop.wait(_RECHECK_MS / 1000)
            return
        log.info("Watching %d folder(s) for changes", len(roots))
        first = True
        for changes in watch(
            *roots,
            debounce=self._debounce_ms,
            step=50,
            stop_event=self._stop,
            rust_timeout=_RECHECK_MS,
            yield_on_timeout=True,
            recursive=True,
            ignore_permission_denied=True,
        ):
            self.ready.set()
            current = list(self._collections())
            if first:
                # The watch is in place from the first yield on; what changed before it (while
                # the server was starting, or down) is caught up by one re-index of everything.
                first = False
                for collection in current:
                    self._update(collection.name)
            elif changes:
                for name in affected(current, (path for _change, path in changes)):
                    self._update(name)
            now = sorted({collection_root(c) for c in current if os.path.isdir(c.path)})
            if now != roots:
                return  # watch the new set of folders

    def _update(self, name: str) -> None:
        try:
            self._reindex(name)
            self.stats.reindexed += 1
        except Exception as error:  # the next change tries again; serving goes on
            self.stats.failures += 1
            log.warning("Re-indexing collection %r after a change failed: %s", name, error)

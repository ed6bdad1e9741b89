"""Compiled dataclass methods kept between runs, as Python keeps a module's bytecode.

Creating a dataclass writes its `__init__`, `__repr__`, `__eq__`, `__hash__` (and, frozen,
`__setattr__`/`__delattr__`) as source text and compiles each: a cold `qmd search` compiles
about 260 such texts, a quarter of its time (issue 35). The texts are the same from run to run,
so their code objects are kept in the cache folder, in one file per Python build, keyed by the
text itself: a changed class is a new text, compiled once. The methods are built from the code
exactly as before; only the compilation is skipped. A missing, unreadable or damaged file is
compiled around and written again; a folder that cannot be written is left alone.

The cache is bounded, since every change of the code adds texts and nothing else takes them
away: the file is written only when a run compiled something, and each write counts one
generation. A text a run used is marked with that generation; one no run used for
`KEEP_GENERATIONS` writes (an old version of a class, a command not run for long) is dropped,
and past `MAX_ENTRIES` the least recently used go first. A dropped text still in use costs one
compilation. Of other Python builds' files, the `MAX_BUILDS` most recently written are kept.
"""

from __future__ import annotations

import dataclasses
import marshal
import os
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import CodeType
from typing import Any

CACHE_NAME = "dataclass-methods"
# A cold `qmd search` uses about 260 texts and every command together about 700: room for all
# of them several times over, and for their old versions until they age out.
MAX_ENTRIES = 3000
KEEP_GENERATIONS = 8  # writes a text may go unused before it is dropped
MAX_BUILDS = 3  # this build's file and the two other builds' most recently written
_FORMAT = 2  # (format, generation, {text: (generation last used, code)})


def cache_file(folder: str) -> str:
    """This Python build's file in `folder`: code objects are valid for one build only."""
    build = f"{zlib.crc32(sys.version.encode('utf-8')):08x}"
    return os.path.join(folder, f"{CACHE_NAME}-{sys.implementation.cache_tag}-{build}.marshal")


Entries = dict[str, tuple[int, CodeType]]


def _load(path: str) -> tuple[int, Entries]:
    """(the file's generation, its texts with the generation each was last used in); an
    unreadable file or one of another format is empty."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        # from bytes: `marshal.load` on a file reads it piecemeal, about 10 times slower
        loaded = marshal.loads(data)
    except (OSError, EOFError, ValueError, TypeError):
        return 0, {}
    if not (isinstance(loaded, tuple) and len(loaded) == 3 and loaded[0] == _FORMAT):
        return 0, {}
    _format, generation, stored = loaded
    if not isinstance(generation, int) or not isinstance(stored, dict):
        return 0, {}
    return generation, {
        text: entry
        for text, entry in stored.items()
        if isinstance(text, str)
        and isinstance(entry, tuple)
        and len(entry) == 2
        and isinstance(entry[0], int)
        and isinstance(entry[1], CodeType)
    }


def pruned(entries: Entries, generation: int) -> Entries:
    """The entries a file written at `generation` keeps: those used in the last
    `KEEP_GENERATIONS` writes, at most `MAX_ENTRIES` of them, the most recently used first."""
    kept = [
        (text, entry) for text, entry in entries.items() if entry[0] > generation - KEEP_GENERATIONS
    ]
    if len(kept) > MAX_ENTRIES:
        kept.sort(key=lambda item: item[1][0], reverse=True)
        kept = kept[:MAX_ENTRIES]
    return dict(kept)


def _save(path: str, generation: int, entries: Entries) -> None:
    partial = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(partial, "wb") as handle:
            marshal.dump((_FORMAT, generation, entries), handle)
        os.replace(partial, path)  # whole or not at all, for a run reading it meanwhile
    except OSError:
        with suppress(OSError):
            os.unlink(partial)
    _drop_other_builds(path)


def _drop_other_builds(path: str) -> None:
    """Keep the `MAX_BUILDS` most recently written method files (this one among them): a
    Python upgraded or a virtualenv removed leaves its file behind otherwise."""
    folder, own = os.path.split(path)
    try:
        names = [
            name
            for name in os.listdir(folder)
            if name.startswith(CACHE_NAME + "-") and name.endswith(".marshal") and name != own
        ]
        dated = sorted(
            ((os.path.getmtime(os.path.join(folder, n)), n) for n in names), reverse=True
        )
    except OSError:
        return
    for _when, name in dated[MAX_BUILDS - 1 :]:
        with suppress(OSError):
            os.unlink(os.path.join(folder, name))


class MethodCache:
    """The `exec` the dataclasses module calls while this cache is in use."""

    def __init__(self, entries: Entries, generation: int = 0) -> None:
        self.entries = entries
        self.generation = generation + 1  # the generation this run's write would be
        self.used: set[str] = set()
        self.compiled = 0  # texts not found in the file: compiled in this run

    def exec(self, source: Any, globals_: Any = None, locals_: Any = None) -> None:
        if isinstance(source, str):
            entry = self.entries.get(source)
            if entry is None:
                code = compile(source, "<string>", "exec")
                self.entries[source] = (self.generation, code)
                self.compiled += 1
            else:
                code = entry[1]
            self.used.add(source)
            source = code
        exec(source, globals_, locals_)

    def to_keep(self) -> Entries:
        """What the file keeps after this run: the texts it used marked with its generation,
        the stale ones dropped (`pruned`)."""
        for text in self.used:
            self.entries[text] = (self.generation, self.entries[text][1])
        return pruned(self.entries, self.generation)


@contextmanager
def cached_methods(folder: str) -> Iterator[MethodCache]:
    """Dataclasses created inside take their methods' code from `folder`'s file; when texts
    were compiled meanwhile, the file is written again with them, pruned."""
    path = cache_file(folder)
    generation, entries = _load(path)
    cache = MethodCache(entries, generation)
    module_globals = vars(dataclasses)
    already = "exec" in module_globals  # someone else's hook: leave it be
    if not already:
        module_globals["exec"] = cache.exec
    try:
        yield cache
    finally:
        if not already:
            del module_globals["exec"]
        if cache.compiled:
            _save(path, cache.generation, cache.to_keep())

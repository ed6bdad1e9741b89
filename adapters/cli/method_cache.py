"""Compiled dataclass methods kept between runs, as Python keeps a module's bytecode.

Creating a dataclass writes its `__init__`, `__repr__`, `__eq__`, `__hash__` (and, frozen,
`__setattr__`/`__delattr__`) as source text and compiles each: a cold `qmd search` compiles
about 260 such texts, a quarter of its time (issue 35). The texts are the same from run to run,
so their code objects are kept in the cache folder, in one file per Python build, keyed by the
text itself: a changed class is a new text, compiled once. The methods are built from the code
exactly as before; only the compilation is skipped. A missing, unreadable or damaged file is
compiled around and written again; a folder that cannot be written is left alone.
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


def cache_file(folder: str) -> str:
    """This Python build's file in `folder`: code objects are valid for one build only."""
    build = f"{zlib.crc32(sys.version.encode('utf-8')):08x}"
    return os.path.join(folder, f"{CACHE_NAME}-{sys.implementation.cache_tag}-{build}.marshal")


def _load(path: str) -> dict[str, CodeType]:
    try:
        with open(path, "rb") as handle:
            loaded = marshal.load(handle)
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, CodeType)}


def _save(path: str, codes: dict[str, CodeType]) -> None:
    partial = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(partial, "wb") as handle:
            marshal.dump(codes, handle)
        os.replace(partial, path)  # whole or not at all, for a run reading it meanwhile
    except OSError:
        with suppress(OSError):
            os.unlink(partial)


class MethodCache:
    """The `exec` the dataclasses module calls while this cache is in use."""

    def __init__(self, codes: dict[str, CodeType]) -> None:
        self.codes = codes
        self.compiled = 0  # texts not found in the file: compiled in this run

    def exec(self, source: Any, globals_: Any = None, locals_: Any = None) -> None:
        if isinstance(source, str):
            code = self.codes.get(source)
            if code is None:
                code = self.codes[source] = compile(source, "<string>", "exec")
                self.compiled += 1
            source = code
        exec(source, globals_, locals_)


@contextmanager
def cached_methods(folder: str) -> Iterator[MethodCache]:
    """Dataclasses created inside take their methods' code from `folder`'s file; the texts
    compiled meanwhile are added to it on the way out."""
    path = cache_file(folder)
    cache = MethodCache(_load(path))
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
            _save(path, cache.codes)

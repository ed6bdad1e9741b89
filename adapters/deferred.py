"""Adapters built the first time they are used.

A command starts a new process every time (an agent runs one per call), and most commands use
few of the adapters the composition root wires: `qmd search` never reads a folder, extracts a
file, keeps file stamps or chunk rows. What costs is importing their modules, not building
them, so `deferred(make)` stands in for the adapter `make()` returns and calls `make` (which
imports what it needs) on the first attribute read; every later read goes to that one object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


class _Deferred:
    """Forwards attribute reads (method calls) to the object `make` builds once."""

    __slots__ = ("_lock", "_made", "_make")

    def __init__(self, make: Callable[[], object]) -> None:
        self._make: Callable[[], object] | None = make
        self._made: object = None
        self._lock = threading.Lock()  # two threads' first calls build it once

    def __getattr__(self, name: str) -> Any:
        if self._make is not None:
            with self._lock:
                if self._make is not None:
                    # `_made` is set before `_make` is cleared: a reader that sees no `_make`
                    # sees the object
                    self._made, self._make = self._make(), None
        return getattr(self._made, name)

    def __repr__(self) -> str:
        return f"deferred({self._made!r})" if self._make is None else "deferred(not built yet)"


def deferred(make: Callable[[], T]) -> T:
    """The adapter `make()` returns, built on its first use (see the module text). For
    adapters used through their methods only: no operators, no `isinstance`."""
    return cast(T, _Deferred(make))

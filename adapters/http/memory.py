"""Giving freed reply memory back to the operating system (REQ-HTTP-LIMIT-008).

Replies are built on the worker threads, each of which allocates from an arena of glibc's
malloc of its own; when a dropped client's replies are freed, the arenas keep the pages, so
the process's resident memory would stay at its peak after the clients have gone.
`malloc_trim(0)` hands every arena's free pages back. It runs on a thread of its own (it
holds the arenas' locks, not the GIL), at most once per `TRIM_EVERY_S`, after connections
end. Where the C library has no `malloc_trim` (not glibc), nothing is done.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("qmd.http")
TRIM_EVERY_S = 1.0


def _malloc_trim() -> Callable[[], None] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def trim_all() -> None:
        trim(0)  # 0: keep no slack at the top of the main heap

    return trim_all


class MemoryTrimmer:
    """`soon()` asks for a trim within TRIM_EVERY_S; repeated asks share one."""

    def __init__(self) -> None:
        self._trim = _malloc_trim()
        self._pending = False
        self._lock = threading.Lock()

    def soon(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._trim is None:
            return
        with self._lock:
            if self._pending:
                return
            self._pending = True
        loop.call_later(TRIM_EVERY_S, self._start)

    def _start(self) -> None:
        threading.Thread(target=self._run, name="qmd-trim", daemon=True).start()

    def _run(self) -> None:
        with self._lock:
            self._pending = False
        if self._trim is not None:
            self._trim()

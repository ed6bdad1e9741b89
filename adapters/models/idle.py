"""Unloading models nobody has used for a while, and never one in use (docs/decisions/0032).

A long-lived server keeps its models loaded: the first request pays the load, the next ones
do not. With an idle limit (`qmd mcp --models-idle-unload S`), a model that has not been used
for S seconds is closed to give its memory back, and loaded again by the next call that needs
it. The original 2.8.3 disposes models on a timer while a request may still be using them,
and its daemon then crashes (tobi/qmd #947). Here a model is closed only while its reaper
holds the model's own lock, and every use of a model holds that lock (adapters/models/llama.py:
"every call on a model holds that model's lock"), so a model in use cannot be closed: the
reaper tries the lock without waiting and leaves a busy model for the next sweep.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Protocol

log = logging.getLogger("qmd.models")

# how often a call waiting for a model another call is using asks whether it is still wanted
WAIT_CHECK_S = 0.05


def never_given_up() -> None:
    """The stop check of work that serves no request (the CLI, `qmd embed`): it never stops."""


class UseLock:
    """A re-entrant lock that remembers when it was last released: the moment a model was
    last used (a call that ran for a minute was in use until its end, not its start)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.RLock()
        self._clock = clock
        self.last_released = clock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self.last_released = self._clock()
        self._lock.release()

    @contextmanager
    def held(self, stop_check: Callable[[], None]) -> Iterator[None]:
        """Hold the lock for one use. While another use holds it, `stop_check` runs every
        `WAIT_CHECK_S`, so a call whose request is given up leaves the queue (its error
        propagates) instead of waiting its turn to do work nobody will read."""
        stop_check()
        while not self._lock.acquire(timeout=WAIT_CHECK_S):
            stop_check()
        try:
            yield
        finally:
            self.release()

    def release_unused(self) -> None:
        """Release without counting as a use (the unloader held it to close the model)."""
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


class Resident(Protocol):
    """A model that can be unloaded and comes back on its next use."""

    @property
    def lock(self) -> UseLock: ...
    @property
    def loaded(self) -> bool: ...
    @property
    def role(self) -> str: ...
    def close(self) -> None: ...


class IdleUnloader:
    """Closes the loaded models that have not been used for `idle_s` seconds."""

    def __init__(
        self,
        residents: Sequence[Resident],
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
        period_s: float | None = None,
    ) -> None:
        self.residents = list(residents)
        self.idle_s = idle_s
        self._clock = clock
        self._period_s = period_s if period_s is not None else max(0.05, min(idle_s / 4, 30.0))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.unloads = 0

    def sweep(self) -> int:
        """One pass; how many models it closed. A model whose lock is held is in use: left."""
        if self.idle_s <= 0:  # 0: models stay loaded
            return 0
        closed = 0
        for resident in self.residents:
            lock = resident.lock
            if not resident.loaded or self._clock() - lock.last_released < self.idle_s:
                continue
            if not lock.acquire(blocking=False):
                continue  # a call is using it right now
            try:
                # re-checked under the lock: a call may have ended just before we took it
                if resident.loaded and self._clock() - lock.last_released >= self.idle_s:
                    resident.close()
                    closed += 1
                    log.info(
                        "Unloaded the %s model after %g s without use", resident.role, self.idle_s
                    )
            finally:
                lock.release_unused()
        self.unloads += closed
        return closed

    def start(self) -> IdleUnloader:
        if self.idle_s > 0 and self.residents and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="qmd-unload", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            try:
                self.sweep()
            except Exception:  # a failed close must not end the sweeping
                log.exception("unloading an idle model failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

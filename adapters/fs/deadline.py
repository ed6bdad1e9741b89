"""The time limit of the request being served, as the transport set it, for the domain's
`TimeBudget` port (REQ-SEARCH-DEGRADE-001), and whether the request has been given up
(REQ-SEARCH-CANCEL-LDIMSCANCEL-001).

A transport's worker runs each request under `request_deadline(deadline, cancelled,
interrupt)` (a context variable: each worker thread sees only its own request's);
`RequestTimeBudget` reads it. Work that runs outside a request (the CLI, `qmd update`) has no
deadline, no limit and is never given up.

A request given up (its time limit passed, its client went away: the transport sets
`cancelled`) stops: its running SQL statement is interrupted by the transport, and the search
stops at its next `check` between stages. Work run on a thread of its own past a bound
(`run_within`, `answer_within`) is given up the same way, one level down: it runs in a scope
of the request that the bound cancels, so it stops at its next check instead of running on
unseen. A model call stops at its next step (REQ-SEARCH-CANCEL-MODEL-001): the composition root
hands `RequestTimeBudget.check` to the model adapters, which ask it between their steps.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from domain.ports import OverBudgetError, WorkCancelledError

T = TypeVar("T")


@dataclass(frozen=True)
class _Request:
    """One request being served, or a bounded part of one (`outer`: the request it is part
    of; giving up the request gives up its parts)."""

    deadline: float | None
    cancelled: threading.Event
    # aborts the SQL statement running on the request's connection; None: none to abort
    interrupt: Callable[[], None] | None
    outer: _Request | None = None

    def given_up(self) -> bool:
        request: _Request | None = self
        while request is not None:
            if request.cancelled.is_set():
                return True
            request = request.outer
        return False


_request: ContextVar[_Request | None] = ContextVar("qmd_request", default=None)


@contextmanager
def request_deadline(
    deadline: float | None,
    cancelled: threading.Event | None = None,
    interrupt: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Run the block as a request that must end by `deadline` (time.monotonic; None: never),
    given up once `cancelled` is set; `interrupt` aborts its running SQL statement."""
    outer = _request.get()
    if interrupt is None and outer is not None:
        interrupt = outer.interrupt
    request = _Request(deadline, cancelled or threading.Event(), interrupt, outer)
    token = _request.set(request)
    try:
        yield
    finally:
        _request.reset(token)


class LeftBehindError(OverBudgetError):
    """Work that did not finish within its bound. It has been told to stop; `ended` is set
    once its thread has returned (whoever shares its connection may wait for that)."""

    def __init__(self, message: str, ended: threading.Event) -> None:
        super().__init__(message)
        self.ended = ended


# the `ended` events of the bounded stages whose threads are still running: what the end of a
# server must wait for before the interpreter is torn down (`wait_stages_ended`)
_running_stages: set[threading.Event] = set()
_running_lock = threading.Lock()


def wait_stages_ended(timeout: float) -> bool:
    """Wait up to `timeout` seconds for every bounded stage still running (one left behind by
    its request, maybe inside a native model call) to return; False if one still runs. A
    process must not finalize its interpreter under such a thread: llama.cpp crashes when its
    globals are torn down, or its log callback calls into a finalized interpreter, while a
    load or a decode is under way (REQ-SPEC-STDIO-003)."""
    end = time.monotonic() + max(0.0, timeout)
    while True:
        with _running_lock:
            running = list(_running_stages)
        if not running:
            return True
        for ended in running:
            if not ended.wait(max(0.0, end - time.monotonic())):
                return False
        with _running_lock:
            _running_stages.difference_update(running)


def _bounded(seconds: float, work: Callable[[], T], *, interrupt_sql: bool) -> T:
    """`work` on a thread of its own, in a part of the current request that ends after
    `seconds`; past them that part is given up (and, with `interrupt_sql`, its running SQL
    statement aborted) and LeftBehindError is raised."""
    outer = _request.get()
    bound = time.monotonic() + max(0.0, seconds)
    deadline = bound if outer is None or outer.deadline is None else min(bound, outer.deadline)
    part = _Request(deadline, threading.Event(), outer.interrupt if outer else None, outer)
    context = contextvars.copy_context()
    outcome: list[T] = []
    failure: list[BaseException] = []
    ended = threading.Event()

    def inside() -> T:
        _request.set(part)  # in the copied context only
        return work()

    def run() -> None:
        try:
            outcome.append(context.run(inside))
        except BaseException as error:  # handed to the waiting request as it is
            failure.append(error)
        finally:
            with _running_lock:
                _running_stages.discard(ended)
            ended.set()

    with _running_lock:
        _running_stages.add(ended)
    threading.Thread(target=run, name="qmd-bounded-stage", daemon=True).start()
    if not ended.wait(max(0.0, seconds)):
        part.cancelled.set()
        if interrupt_sql and part.interrupt is not None:
            part.interrupt()
        raise LeftBehindError(f"the stage did not finish in {seconds:.1f} s", ended)
    if failure:
        raise failure[0]
    return outcome[0]


def answer_within(seconds: float, work: Callable[[], T]) -> T:
    """`work`'s result if it comes within `seconds`, else LeftBehindError at that time: the
    work is given up (its running SQL statement aborted, the search stopped at its next
    check), so a caller that answers its own timeout does not leave it running unseen."""
    return _bounded(seconds, work, interrupt_sql=True)


class RequestTimeBudget:
    """The domain's TimeBudget over the deadline of the request being served."""

    def seconds_left(self) -> float | None:
        request = _request.get()
        if request is None or request.deadline is None:
            return None
        return max(0.0, request.deadline - time.monotonic())

    def run_within(self, seconds: float, stage: Callable[[], T]) -> T:
        # the request goes on after the bound on the same connection: its SQL is not aborted
        return _bounded(seconds, stage, interrupt_sql=False)

    def check(self) -> None:
        request = _request.get()
        if request is not None and request.given_up():
            raise WorkCancelledError("the request was given up")

"""The time limit of the request being served, as the transport set it, for the domain's
`TimeBudget` port (REQ-SEARCH-DEGRADE-001).

A transport's worker runs each request under `request_deadline(deadline)` (a context variable:
each worker thread sees only its own request's); `RequestTimeBudget` reads it. Work that runs
outside a request (the CLI, `qmd update`) has no deadline and no limit.

A stage run `run_within` a bound runs on a thread of its own: a model call cannot be stopped,
so past the bound the request goes on without it, and the call ends in the background (its
result dropped, a reranker's scores still cached for the next search).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from domain.ports import OverBudgetError

T = TypeVar("T")

_deadline: ContextVar[float | None] = ContextVar("qmd_request_deadline", default=None)


@contextmanager
def request_deadline(deadline: float | None) -> Iterator[None]:
    """Run the block as a request that must end by `deadline` (time.monotonic; None: never)."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


class RequestTimeBudget:
    """The domain's TimeBudget over the deadline of the request being served."""

    def seconds_left(self) -> float | None:
        deadline = _deadline.get()
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def run_within(self, seconds: float, stage: Callable[[], T]) -> T:
        outcome: list[T] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                outcome.append(stage())
            except BaseException as error:  # handed to the waiting request as it is
                failure.append(error)

        worker = threading.Thread(target=run, name="qmd-bounded-stage", daemon=True)
        worker.start()
        worker.join(max(0.0, seconds))
        if worker.is_alive():
            raise OverBudgetError(f"the stage did not finish in {seconds:.1f} s")
        if failure:
            raise failure[0]
        return outcome[0]

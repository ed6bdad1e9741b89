"""Where requests run: worker threads that each own a session over their own index
connection, and a bounded lane for requests that may run a model. The HTTP service
(`adapters/http/app.py`) and the stdio dispatcher (`adapters/mcp/dispatch.py`) share them.

SQLite in WAL mode lets readers run in parallel with each other and with one writer (`qmd
update` beside the server), but a connection is not for two threads at once; so every worker
thread opens its own (`WorkerFactory`). Models are shared, and a model call can take seconds:
such requests go to a small pool of their own with a bounded queue, so a slow `query` never
holds up `get`, `status` or `/health`, and a flood of them is refused instead of piling up.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TypeVar

from adapters.fs.deadline import request_deadline
from adapters.mcp.protocol import Session
from domain.ports import WorkCancelledError
from domain.usecases.services import Services

T = TypeVar("T")
log = logging.getLogger("qmd.workers")


@dataclass
class Worker:
    """What one worker thread owns: a session over its own connection."""

    session: Session
    services: Services
    interrupt: Callable[[], None]  # aborts the SQL statement this worker is running
    close: Callable[[], None]


WorkerFactory = Callable[[], Worker]


class BusyError(Exception):
    """The model lane's queue is full."""


class CancelledJobError(Exception):
    """The job was cancelled (timeout, client gone) before it started."""


class Job:
    """One request's work; cancelling it before it starts skips it, while it runs it
    interrupts the worker's current SQL statement, stops a search at its next check between
    stages (a model call at its next step; adapters/fs/deadline.py) and ends its waits on the
    client (`on_cancel`). A tool that writes claims the right to write with
    `commit` just before it does: from then on a cancel is refused, so a cancelled write is
    never written and a committed one is never reported as cancelled."""

    def __init__(
        self, *, deadline: float | None = None, progress_every_s: float | None = None
    ) -> None:
        """From the transport: when its time limit ends the job (time.monotonic; None: no
        limit), and how often a wait on the client reports progress (`Budgets`)."""
        self.cancelled = False
        self.committed = False
        # set with `cancelled`: what the work's own checks see (RequestTimeBudget.check)
        self.given_up = threading.Event()
        self.deadline = deadline
        self.progress_every_s = progress_every_s
        self._worker: Worker | None = None
        self._lock = threading.Lock()
        self._on_cancel: list[Callable[[], None]] = []
        # set by the model lane while the job holds a slot it may lend (ModelLane.lend)
        self.lender: Callable[[], AbstractContextManager[None]] | None = None

    def started(self, worker: Worker) -> None:
        with self._lock:
            if self.cancelled:
                raise CancelledJobError
            self._worker = worker

    def finished(self) -> None:
        with self._lock:
            self._worker = None

    def cancel(self) -> bool:
        """Cancel the work; False (nothing changes) when it has committed a write."""
        with self._lock:
            if self.committed:
                return False
            self.cancelled = True
            self.given_up.set()
            if self._worker is not None:
                self._worker.interrupt()
            callbacks, self._on_cancel = self._on_cancel, []
        for callback in callbacks:
            callback()
        return True

    def commit(self) -> bool:
        """Claim the right to write; False when the job was cancelled (write nothing)."""
        with self._lock:
            if self.cancelled:
                return False
            self.committed = True
            return True

    @contextmanager
    def waiting_on_client(self) -> Iterator[None]:
        """Around a wait on the client (a sampling request): a job running in the model lane
        for a tool declared to wait on the client gives its slot back meanwhile and takes one
        again after, so unanswered waits never hold the lane (REQ-MCP-LANE-001)."""
        lend = self.lender
        if lend is None:
            yield
            return
        with lend():
            yield

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` when the job is cancelled (at once if it is already); returns a
        function that withdraws it."""
        with self._lock:
            if not self.cancelled:
                self._on_cancel.append(callback)
                return lambda: self._withdraw(callback)
        callback()
        return lambda: None

    def _withdraw(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._on_cancel:
                self._on_cancel.remove(callback)


class _Seat:
    """One model-lane job: whether it holds a slot now, and whether it ever took one."""

    held = False
    began = False


class ModelLane:
    """The slots model work runs in (`slots` at a time), handed out in arrival order. A job
    whose tool waits on the client lends its slot while it waits (`lend`): at most `lenders`
    at once, each taking a slot again, ahead of the queue, when its wait ends."""

    def __init__(self, slots: int, lenders: int) -> None:
        self._cond = threading.Condition()
        self._free = slots
        self._queue: deque[object] = deque()
        self._lenders = lenders

    def take(self, job: Job, seat: _Seat, *, first: bool = False) -> None:
        """Wait for a slot (CancelledJobError when the job is cancelled meanwhile)."""
        ticket = object()
        withdraw = job.on_cancel(self._wake)  # outside the condition: it may call at once
        try:
            with self._cond:
                if first:
                    self._queue.appendleft(ticket)
                else:
                    self._queue.append(ticket)
                try:
                    while not (self._free and self._queue[0] is ticket):
                        if job.cancelled:
                            raise CancelledJobError
                        self._cond.wait()
                    self._free -= 1
                    seat.held = seat.began = True
                finally:
                    self._queue.remove(ticket)
                    self._cond.notify_all()
        finally:
            withdraw()

    def give(self, seat: _Seat) -> None:
        with self._cond:
            if seat.held:
                seat.held = False
                self._free += 1
                self._cond.notify_all()

    @contextmanager
    def lend(self, job: Job, seat: _Seat) -> Iterator[None]:
        from adapters.mcp.outgoing import ClientRequestError

        with self._cond:
            if not self._lenders:
                raise ClientRequestError(
                    "the server is already waiting on clients for as many calls as it "
                    "allows; try again when one of them has been answered"
                )
            self._lenders -= 1
        self.give(seat)
        try:
            yield
        finally:
            with self._cond:
                self._lenders += 1
            try:
                self.take(job, seat, first=True)
            except CancelledJobError:
                # given up while it waited: the tool stops here, quietly (run_tool)
                raise WorkCancelledError("the call was cancelled") from None

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


# calls that may wait on their clients at once without a lane slot (ModelLane.lend)
CLIENT_WAITS = 8


class WorkerPools:
    def __init__(
        self,
        factory: WorkerFactory,
        threads: int = 8,
        model_threads: int = 2,
        model_queue: int = 32,
        client_waits: int = CLIENT_WAITS,
    ) -> None:
        """`model_threads` model calls run at once, `model_queue` more wait; up to
        `client_waits` calls waiting on their clients hold a thread but no slot."""
        self._factory = factory
        self._local = threading.local()
        self._workers: list[Worker] = []
        self._workers_lock = threading.Lock()
        self._fast = ThreadPoolExecutor(threads, thread_name_prefix="qmd-worker")
        self._slow = ThreadPoolExecutor(
            model_threads + client_waits,
            thread_name_prefix="qmd-model",
            initializer=_lower_priority,
        )
        self._lane = ModelLane(model_threads, client_waits)
        self._model_capacity = model_threads + model_queue
        self._model_pending = 0
        self._count_lock = threading.Lock()

    def _worker(self) -> Worker:
        worker: Worker | None = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._factory()
            self._local.worker = worker
            with self._workers_lock:
                self._workers.append(worker)
        return worker

    def _run(self, job: Job, work: Callable[[Worker], T]) -> T:
        worker = self._worker()
        job.started(worker)
        worker.session.job = job  # the tool's writes and client waits answer to the job
        try:
            # a search's optional stages keep to the deadline; a cancelled job stops its work
            with request_deadline(job.deadline, job.given_up, worker.interrupt):
                return work(worker)
        finally:
            worker.session.job = None
            job.finished()

    def _run_in_lane(self, job: Job, work: Callable[[Worker], T], seat: _Seat, lends: bool) -> T:
        self._lane.take(job, seat)
        if lends:
            job.lender = functools.partial(self._lane.lend, job, seat)
        try:
            return self._run(job, work)
        finally:
            job.lender = None
            self._lane.give(seat)

    def submit(
        self, job: Job, work: Callable[[Worker], T], model: bool = False, lends: bool = False
    ) -> Future[T]:
        """Queue `work` on a worker thread; BusyError when the model lane is full. A job
        cancelled while it waits in the queue leaves it at once (its slot is free again).
        `lends`: its tool is declared to wait on the client, and its model-lane slot is lent
        while it does (`Job.waiting_on_client`)."""
        if not model:
            future = self._fast.submit(self._run, job, work)
        else:
            with self._count_lock:
                if self._model_pending >= self._model_capacity:
                    raise BusyError
                self._model_pending += 1
            seat = _Seat()
            counted = [True]

            def release() -> None:  # once: at the cancel of a job still queued, else at its end
                with self._count_lock:
                    if counted[0]:
                        counted[0] = False
                        self._model_pending -= 1

            def cancelled() -> None:
                if not seat.began:  # its place is free at once, before its thread notices
                    release()

            try:
                future = self._slow.submit(self._run_in_lane, job, work, seat, lends)
            except BaseException:
                release()
                raise
            future.add_done_callback(lambda _done: release())
            forget = job.on_cancel(cancelled)
            future.add_done_callback(lambda _done: forget())

        # by weak reference: the future keeps its done callbacks (and so this function)
        # after it ends, and a cycle through them would keep its result, a whole reply,
        # until the interpreter's rare full collection
        ref = weakref.ref(future)

        def drop() -> None:  # only a job not yet started leaves (a running future refuses)
            queued = ref()
            if queued is not None:
                queued.cancel()

        withdraw = job.on_cancel(drop)
        future.add_done_callback(lambda _done: withdraw())
        return future

    async def run(
        self, job: Job, work: Callable[[Worker], T], model: bool = False, lends: bool = False
    ) -> T:
        future = self.submit(job, work, model, lends)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if future.cancelled():  # the job was cancelled in the queue, not this task
                raise CancelledJobError from None
            raise

    def shutdown(self) -> None:
        """Wait for running jobs, then close every worker's connection."""
        self._fast.shutdown(wait=True, cancel_futures=True)
        self._slow.shutdown(wait=True, cancel_futures=True)
        with self._workers_lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            try:
                worker.close()
            except Exception:  # closing is best effort at exit
                log.exception("closing a worker failed")


MODEL_NICENESS = 10
MAX_NICENESS = 19


def _lower_priority() -> None:
    """Model-lane threads run at a lower CPU priority (Linux niceness is per thread, and the
    compute threads llama.cpp starts from them inherit it), so that on a busy machine the
    cores go to fast requests first and a model call takes whatever is left. The step is
    relative to the process's own niceness: a server started under `nice -n 10` must still
    put its model calls below its fast requests (an absolute 10 would put them level)."""
    try:
        tid = threading.get_native_id()
        target = min(MAX_NICENESS, os.getpriority(os.PRIO_PROCESS, tid) + MODEL_NICENESS)
        os.setpriority(os.PRIO_PROCESS, tid, target)
    except (AttributeError, OSError):  # not Linux, or not permitted: run at normal priority
        log.debug("could not lower the model lane's priority")

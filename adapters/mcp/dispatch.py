"""One connection's requests, answered concurrently (docs/decisions/0033).

The reader hands every decoded line to `Dispatcher.feed` in arrival order. The session admits
it there and then (checks, the connection's era, the handler), so everything that depends on
order stays ordered: the handshake, era judgments, notifications. Protocol methods that only
describe the server (`initialize`, `ping`, `tools/list`, ...) are answered on the reader's
thread at once. Requests that read the index or run a model (`tools/call`, `resources/read`,
`prompts/get`) go to the worker pools (`adapters/mcp/workers.py`): reads in parallel, each
worker over its own SQLite connection, model calls in their bounded lane; so a slow `query`
no longer holds up a `get` behind it. Their replies may come out of order, which JSON-RPC
allows (clients match replies by id).

Every reply goes out through one `write` callable, under one lock, so frames never interleave.
`notifications/cancelled` naming a request still queued or running cancels it: skipped if it
has not started, its SQL statement interrupted if it has; either way no reply is written for
it (the MCP cancellation rule), and a wait on the client ends. A tool that writes and has
committed refuses the cancel: it runs to its end and is answered, so its client learns it was
written. A request that runs past its time limit is cancelled the same way and answered with
a timeout error. Which lane a call takes, its time limit, and whether it lends its model-lane
slot while it waits on the client come from the facts its surface declares for the tool
(`ToolFacts` and `Budgets`, adapters/mcp/tools.py), never from its name.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from adapters.config.service import DEFAULT_SAMPLING_TIMEOUT_S
from adapters.mcp.protocol import Admission, Admitted, CancelNotice, Session
from adapters.mcp.tools import PLAIN_TOOL, Budgets, SurfaceFacts, ToolFacts
from adapters.mcp.workers import BusyError, CancelledJobError, Job, Worker, WorkerPools

log = logging.getLogger("qmd.mcp")

# Methods whose handlers read the index (or run a model): these run on the worker pools.
POOLED = frozenset({"tools/call", "resources/read", "prompts/get"})
BUSY = -32000
TIMED_OUT = -32001

Reply = dict[str, Any]


def id_key(request_id: Any) -> tuple[str, Any]:
    """JSON-RPC ids keep their type: 1 and "1" are different requests."""
    return (type(request_id).__name__, request_id)


def tool_facts(facts: SurfaceFacts, request: Admitted) -> ToolFacts:
    """The declared facts of the tool a request calls (PLAIN_TOOL for any other method)."""
    if request.method != "tools/call" or not isinstance(request.params, dict):
        return PLAIN_TOOL
    return facts.tool(request.params.get("name"))


def may_run_model(facts: SurfaceFacts, request: Admitted) -> bool:
    params = request.params if isinstance(request.params, dict) else {}
    return tool_facts(facts, request).may_run_model(params.get("arguments"))


def log_request(request: Admitted, reply: Reply, began: float) -> None:
    """One line per request on stderr, as the HTTP service writes: time, method (and tool),
    outcome, milliseconds; e.g. `12:00:01.234 stdio tools/call search ok (3ms)`. At DEBUG
    level (`--log-level debug`): MCP lets a stdio client ignore stderr, and one that never
    drains it would stall the server once the pipe's buffer is full of request lines."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    label = request.method
    params = request.params
    if request.method == "tools/call" and isinstance(params, dict):
        label += f" {params.get('name')}"
    outcome = f"error {reply['error'].get('code')}" if "error" in reply else "ok"
    elapsed = round((time.perf_counter() - began) * 1000)
    stamp = datetime.now().strftime("%H:%M:%S.%f")[:-3]
    log.debug("%s stdio %s %s (%dms)", stamp, label, outcome, elapsed)


@dataclass
class _InFlight:
    request: Admitted
    job: Job  # told its time limit when it is made (the request's, from its tool's facts)
    began: float = field(default_factory=time.perf_counter)
    done: bool = False  # answered, cancelled or timed out: nothing more is written for it
    timer: threading.Timer | None = None


class Dispatcher:
    """Runs one connection's admitted requests; `pools=None` runs them one at a time in
    arrival order on one worker thread of its own (the behaviour before 0033, kept for
    tests), so the reader stays free to take a client's answers to our own requests."""

    def __init__(
        self,
        session: Session,
        write: Callable[[Reply], None],
        pools: WorkerPools | None = None,
        timeout_s: float | None = None,
        sampling_timeout_s: float = DEFAULT_SAMPLING_TIMEOUT_S,
        inline: frozenset[str] | None = None,
    ) -> None:
        """`inline`: the methods answered on the connection's own session, every other one
        going to the pools (the legacy SSE transport, whose session has no index of its own);
        None: all but POOLED."""
        self.session = session
        self._inline = inline
        self._write = write
        self._pools = pools
        self._budgets = Budgets(timeout_s, sampling_timeout_s)
        # re-entrant: cancelling a queued job settles it at once, on the cancelling thread
        self._lock = threading.RLock()
        self._in_flight: dict[tuple[str, Any], list[_InFlight]] = {}
        self._idle = threading.Condition(self._lock)
        self._count = 0
        self._writing = 0  # replies decided and being written
        self._serial: queue.Queue[Admitted | None] | None = None
        self._serial_thread: threading.Thread | None = None
        if pools is None:
            self._serial = queue.Queue()
            self._serial_thread = threading.Thread(
                target=self._run_serially, name="qmd-stdio-worker", daemon=True
            )
            self._serial_thread.start()

    # -- the reader's side ------------------------------------------------------------------

    def feed_text(self, text: bytes | str) -> None:
        self.feed(self.session.admit_text(text))

    def feed(self, admission: Admission) -> None:
        if isinstance(admission, CancelNotice):
            self.cancel(admission.request_id)
        elif isinstance(admission, Admitted):
            if self._serial is not None:
                with self._lock:
                    self._count += 1
                self._serial.put(admission)
            elif self._pools is not None and self._pooled(admission.method):
                self._submit(admission, self._pools)
            else:
                self._answer(admission)
        elif admission is not None:
            self._write(admission)

    @property
    def in_flight(self) -> int:
        """Requests admitted and not yet settled."""
        with self._lock:
            return self._count

    def _pooled(self, method: str) -> bool:
        return method in POOLED if self._inline is None else method not in self._inline

    def cancel_all(self) -> None:
        """Cancel every request in flight (the connection ended); as `cancel`, a request
        that has committed a write runs to its end."""
        with self._lock:
            ids = [entries[0].request.id for entries in self._in_flight.values() if entries]
        for request_id in ids:
            self.cancel(request_id)

    def close(self) -> None:
        """Stop the serial worker (after `wait_idle`, or when the client went away)."""
        if self._serial is not None and self._serial_thread is not None:
            self._serial.put(None)
            self._serial_thread.join(timeout=5)

    def _answer(self, request: Admitted) -> None:
        began = time.perf_counter()
        reply = self.session.run(request)
        self._write(reply)
        log_request(request, reply, began)

    def _run_serially(self) -> None:
        assert self._serial is not None
        while (request := self._serial.get()) is not None:
            try:
                self._answer(request)
            finally:
                with self._lock:
                    self._count -= 1
                    self._idle.notify_all()

    def cancel(self, request_id: Any) -> bool:
        """Cancel the queued or running request with this id; False if there is none, or
        if it has committed a write (then it is answered as usual)."""
        cancelled: list[_InFlight] = []
        with self._lock:  # under the lock: no reply slips out between the two steps
            for entry in list(self._in_flight.get(id_key(request_id), [])):
                if entry.done:
                    continue
                if entry.job.cancel():
                    entry.done = True
                    cancelled.append(entry)
                    self._idle.notify_all()
                else:
                    log.info("not cancelling request %r: its write has committed", request_id)
        for entry in cancelled:
            if entry.timer is not None:
                entry.timer.cancel()
        if cancelled:
            log.info("cancelled request %r", request_id)
        return bool(cancelled)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no request is in flight (at the end of the input)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._count == 0, timeout)

    def wait_answered(self, timeout: float | None = None) -> bool:
        """Wait until every request has been answered, cancelled or timed out, though its
        work may still run (a worker stuck past its answer): the end of the input waits for
        this, not for the work (REQ-SPEC-STDIO-003)."""
        with self._idle:
            return self._idle.wait_for(self._all_answered, timeout)

    def _all_answered(self) -> bool:
        if self._serial is not None:
            return self._count == 0
        return self._writing == 0 and all(
            entry.done for entries in self._in_flight.values() for entry in entries
        )

    # -- the workers' side ------------------------------------------------------------------

    def _submit(self, request: Admitted, pools: WorkerPools) -> None:
        connection = self.session
        facts = connection.surface.facts
        limit = self._budgets.time_limit(tool_facts(facts, request), modern=request.modern)
        job = Job(
            deadline=None if limit is None else time.monotonic() + limit,
            progress_every_s=self._budgets.progress_every_s,
        )
        entry = _InFlight(request, job)
        key = id_key(request.id)
        with self._lock:
            self._in_flight.setdefault(key, []).append(entry)
            self._count += 1

        def work(worker: Worker) -> Reply:
            # the worker's session answers for this connection: server-to-client requests
            # and notifications go back the way this request came
            session = worker.session
            saved = session.emit, session.outgoing, session.owner
            if connection.emit is not None:
                session.emit, session.outgoing = connection.emit, connection.outgoing
                session.owner = connection.owner
            try:
                return session.run(request)
            finally:
                session.emit, session.outgoing, session.owner = saved

        try:
            future = pools.submit(
                entry.job,
                work,
                model=may_run_model(facts, request),
                lends=tool_facts(facts, request).waits_on_client,  # REQ-MCP-LANE-001
            )
        except BusyError:
            self._settle(
                entry,
                Session.error(request.id, BUSY, "Server busy: too many model requests queued"),
            )
            return
        if limit is not None:
            entry.timer = threading.Timer(limit, self._expire, (entry, limit))
            entry.timer.daemon = True
            entry.timer.start()
        future.add_done_callback(lambda done: self._finished(entry, done))

    def _finished(self, entry: _InFlight, future: Future[Reply]) -> None:
        if entry.timer is not None:
            entry.timer.cancel()
        try:
            reply: Reply | None = future.result()
        except (CancelledJobError, CancelledError):  # cancelled while running, or queued
            reply = None
        except Exception:  # the session answers handler errors itself; this is a last resort
            log.exception("worker failed on %s", entry.request.method)
            reply = Session.error(entry.request.id, -32603, "Internal error")
        self._settle(entry, reply)

    def _expire(self, entry: _InFlight, limit: float) -> None:
        with self._lock:
            if entry.done:
                return
            entry.done = True  # before the cancel: a queued job is settled (silently) by it
            if not entry.job.cancel():  # its write committed: it is answered when it ends
                entry.done = False
                return
            self._writing += 1
        reply = Session.error(entry.request.id, TIMED_OUT, f"Request timed out after {limit:g} s")
        try:
            self._write(reply)
        finally:
            with self._lock:  # answered now, though its work may still run
                self._writing -= 1
                self._idle.notify_all()
        log_request(entry.request, reply, entry.began)

    def _settle(self, entry: _InFlight, reply: Reply | None) -> None:
        """Write `reply` unless the request was cancelled, timed out or answered already;
        the request leaves the in-flight table here, when its work has ended."""
        with self._lock:
            write = not entry.done and reply is not None
            entry.done = True
            self._writing += write
        if write:
            assert reply is not None
            self._write(reply)
            log_request(entry.request, reply, entry.began)
        with self._lock:
            self._writing -= write
            key = id_key(entry.request.id)
            entries = self._in_flight.get(key, [])
            if entry in entries:
                entries.remove(entry)
                if not entries:
                    del self._in_flight[key]
            self._count -= 1
            self._idle.notify_all()

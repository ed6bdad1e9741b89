"""Logging to stderr that never blocks the server (REQ-HTTP-LIMIT-006).

A server's stderr may be a pipe its parent never reads: once the pipe's buffer is full, a
plain `logging.StreamHandler` blocks the thread that logs, and a server that logs one line per
request stops serving. Here a record is only queued (bounded, by bytes); one background thread
writes the queue to file descriptor 2, waiting until the descriptor can take a piece without
blocking. When the queue is full the line is dropped and counted, and the count is written
once stderr takes lines again (and at exit).
"""

from __future__ import annotations

import logging
import os
import queue
import select
import sys
import threading
import time

# imported with this module, never inside a call: `emit` may run in a signal handler, where
# an import can fail
from adapters.redaction import redact

CAPACITY_BYTES = 1 << 20  # queued and not yet written: beyond it lines are dropped
PIECE_BYTES = 4096  # at most PIPE_BUF per write: a pipe that polls writable takes it whole
EXIT_FLUSH_S = 2.0
NOTICE_EVERY_S = 0.5


class NonBlockingStderrHandler(logging.Handler):
    """`emit` never waits: it is called from the event loop, from worker threads and from
    signal handlers (which may interrupt the main thread inside `emit` itself), so its only
    lock is reentrant and held for a few counter updates; `queue.SimpleQueue` is reentrant."""

    def __init__(self, fd: int = 2, capacity_bytes: int = CAPACITY_BYTES) -> None:
        super().__init__()
        self.fd = fd
        self.capacity_bytes = capacity_bytes
        self._lines: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._counts = threading.RLock()
        self._queued_bytes = 0
        self._dropped = 0
        self._dropped_total = 0
        self._writing = False
        self._thread = threading.Thread(target=self._write_forever, name="qmd-log", daemon=True)
        self._thread.start()

    @property
    def dropped_total(self) -> int:
        return self._dropped_total

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # a record that cannot be formatted is logging's own bug report
            self.handleError(record)
            return
        self.put(text)

    def put(self, text: str, always: bool = False) -> None:
        """Queue one line; dropped (and counted) when the queue is full, unless `always`
        (the start line, which a parent waits for). A driver's or pool's message may quote an
        index URL: it is written without its secrets (REQ-SEC-SECRET-001)."""
        data = (redact(text) + "\n").encode("utf-8", "backslashreplace")
        with self._counts:
            if not always and self._queued_bytes + len(data) > self.capacity_bytes:
                self._dropped += 1
                self._dropped_total += 1
                return
            self._queued_bytes += len(data)
        self._lines.put(data)

    def flush(self) -> None:
        """At exit (logging.shutdown), the queue gets a bounded time to be written."""
        self.drain(EXIT_FLUSH_S)

    def drain(self, timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) until everything queued is written; False if not."""
        deadline = time.monotonic() + timeout_s
        while not self._lines.empty() or self._writing or self._dropped:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def _write_forever(self) -> None:
        while True:
            try:  # a timeout, so that a count of dropped lines is told even if none follow
                first = self._lines.get(timeout=NOTICE_EVERY_S)
            except queue.Empty:
                if not self._dropped:
                    continue
                first = b""
            self._writing = True
            try:
                batch = [first]
                size = len(first)
                while size < 64 * 1024 and not self._lines.empty():
                    line = self._lines.get()
                    batch.append(line)
                    size += len(line)
                with self._counts:
                    self._queued_bytes -= size
                    dropped, self._dropped = self._dropped, 0
                if dropped:
                    notice = f"[qmd: {dropped} log line(s) dropped: stderr could not take them]"
                    batch.insert(0, (notice + "\n").encode())
                self._write_all(b"".join(batch))
            finally:
                self._writing = False

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                select.select([], [self.fd], [])
                written = os.write(self.fd, view[:PIECE_BYTES])
            except InterruptedError:
                continue
            except OSError:
                return  # stderr is gone (closed, EPIPE): nothing more can be said there
            view = view[written:]


_installed: NonBlockingStderrHandler | None = None


def install(level: int = logging.INFO, fmt: str = "%(message)s") -> NonBlockingStderrHandler:
    """Route every log record of the process to stderr through the non-blocking writer
    (once; a second call only sets the level)."""
    global _installed
    root = logging.getLogger()
    root.setLevel(level)
    if _installed is not None:
        return _installed
    handler = NonBlockingStderrHandler()
    handler.setFormatter(logging.Formatter(fmt))
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    _installed = handler  # logging.shutdown, at exit, flushes it (for a bounded time)
    return handler


def ensure(level: int = logging.INFO) -> NonBlockingStderrHandler:
    """Install the writer at `level` unless it is installed already (then its level stays)."""
    return _installed if _installed is not None else install(level)


def say(text: str) -> None:
    """A line for stderr that a parent may wait for (the start line): in order with the log
    when the writer is installed, printed directly otherwise."""
    if _installed is not None:
        _installed.put(text, always=True)
    else:
        print(redact(text), file=sys.stderr, flush=True)


def flush(timeout_s: float = EXIT_FLUSH_S) -> None:
    if _installed is not None:
        _installed.drain(timeout_s)

"""MCP over stdio: newline-delimited JSON-RPC on stdin/stdout (seed 001 transport rules).

Lines are read in bounded chunks: a line longer than the cap is answered (or dropped) as soon
as it crosses the cap and the rest of it is discarded unread into memory, so a hostile client
cannot make the server buffer without bound. Blank lines are skipped. stdout carries nothing
but frames: the real fd 1 is kept for frames and fd 1 itself is pointed at stderr, so stray
prints from native libraries cannot corrupt the stream.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from adapters.config.service import DEFAULT_SAMPLING_TIMEOUT_S
from adapters.fs.deadline import wait_stages_ended
from adapters.mcp.dispatch import Dispatcher
from adapters.mcp.outgoing import Correlator
from adapters.mcp.protocol import (
    INVALID_REQUEST,
    SHUTDOWN,
    Admission,
    Admitted,
    Session,
    encode_frame,
)
from adapters.mcp.workers import WorkerPools

__all__ = ["MAX_LINE_BYTES", "OVERSIZED", "encode_frame", "read_lines", "serve_stdio"]

MAX_LINE_BYTES = 64 * 1024 * 1024
# how long work still running after its request was answered (a backend exchange being
# abandoned, a model load or a decode step in llama.cpp) may take to stop at the end of input
EXIT_GRACE_S = 3.0
_READ_CHUNK = 1 << 16

log = logging.getLogger("qmd.mcp")


class OversizedLine:
    """Marker yielded in place of a line that exceeded the cap."""


OVERSIZED = OversizedLine()


def read_lines(
    stream: BinaryIO, max_bytes: int = MAX_LINE_BYTES
) -> Iterator[bytes | OversizedLine]:
    buffer = bytearray()
    discarding = False
    read = getattr(stream, "read1", stream.read)
    while True:
        chunk = read(_READ_CHUNK)
        if not chunk:
            if buffer and not discarding:
                yield bytes(buffer)
            return
        start = 0
        while start <= len(chunk):
            newline = chunk.find(b"\n", start)
            piece = chunk[start:] if newline < 0 else chunk[start:newline]
            if not discarding:
                buffer += piece
                if len(buffer) > max_bytes:
                    buffer.clear()
                    discarding = True
                    yield OVERSIZED
            if newline < 0:
                break
            if not discarding:
                yield bytes(buffer)
            buffer.clear()
            discarding = False
            start = newline + 1


def reply_for_line(session: Session, line: bytes | OversizedLine) -> dict[str, Any] | None:
    return session.finish(admit_line(session, line))


def admit_line(session: Session, line: bytes | OversizedLine) -> Admission:
    if isinstance(line, OversizedLine):
        return session.malformed(
            INVALID_REQUEST, f"Invalid Request: message exceeds {MAX_LINE_BYTES} bytes"
        )
    return session.admit_text(line)


class _FrameWriter:
    """The one writer of a connection: whole frames, one at a time; a closed pipe is noted
    (the client went away) instead of raised into whichever thread wrote last."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.closed = False

    def __call__(self, reply: dict[str, Any]) -> None:
        frame = encode_frame(reply)
        with self._lock:
            if self.closed:
                return
            try:
                self._stream.write(frame)
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                self.closed = True

    def close(self) -> None:
        """End the connection: the client reads end of output (with `--transport both` the
        process goes on serving HTTP, so the stream is not closed by exiting)."""
        with self._lock:
            self.closed = True
            with contextlib.suppress(OSError):
                self._stream.close()


def serve_stdio(
    session: Session,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    on_close: Callable[[], None] | None = None,
    *,
    pools: WorkerPools | None = None,
    timeout_s: float | None = None,
    sampling_timeout_s: float = DEFAULT_SAMPLING_TIMEOUT_S,
    ended: str = "Shutting down (stdin closed)...",
    on_stuck: Callable[[], None] | None = None,
    exit_grace_s: float = EXIT_GRACE_S,
) -> int:
    """Serve until stdin closes; returns the process exit code. `ended` is logged then and
    says what the process does next (it shuts down, or, beside HTTP, goes on serving that).
    With `pools`, requests that read the index or run a model run concurrently
    (adapters/mcp/dispatch.py); without, one at a time in arrival order on one worker
    thread. Either way this thread only reads: while a tool waits for the client (a
    server-to-client request such as sampling), the client's response is handed to the
    session's correlator as soon as it arrives (docs/decisions/0039). At the end of the
    input, `on_close` runs once every request is answered and its work has ended;
    `on_stuck` instead (when given) if work still runs `exit_grace_s` after its answer,
    which nothing may then close under it."""
    owns_stdout = stdout is None
    if stdout is None:
        stdout = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    source = stdin if stdin is not None else sys.stdin.buffer
    writer = _FrameWriter(stdout)
    outgoing = Correlator("qmd-stdio")
    session.emit, session.outgoing = writer, outgoing
    dispatcher = Dispatcher(session, writer, pools, timeout_s, sampling_timeout_s)
    for line in read_lines(source):
        admission = admit_line(session, line)
        dispatcher.feed(admission)
        if writer.closed:  # the client went away: nothing left to answer
            break
        if isinstance(admission, Admitted) and admission.method == SHUTDOWN:
            break  # seed 001: the session ends as at the end of input (REQ-SPEC-SHUTDOWN-001)
    # nobody is left to answer a request of ours: a tool waiting for one ends now
    outgoing.close("the client closed stdin before answering")
    if writer.closed:  # nobody reads an answer: give the work up (a committed write ends)
        dispatcher.cancel_all()
    # every request in flight is answered, each within its own time limit; work still
    # running past its answer (a stuck backend, a native model call) is given up and has a
    # moment to stop (REQ-SPEC-STDIO-003)
    dispatcher.wait_answered()
    dispatcher.cancel_all()
    end = time.monotonic() + exit_grace_s
    settled = dispatcher.wait_idle(exit_grace_s) and wait_stages_ended(end - time.monotonic())
    dispatcher.close()
    if owns_stdout:
        writer.close()
    log.info(ended)
    if not settled and on_stuck is not None:
        on_stuck()
    elif on_close is not None:
        on_close()
    return 0

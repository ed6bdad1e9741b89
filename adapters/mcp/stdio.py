"""MCP over stdio: newline-delimited JSON-RPC on stdin/stdout (seed 001 transport rules).

Lines are read in bounded chunks: a line longer than the cap is answered (or dropped) as soon
as it crosses the cap and the rest of it is discarded unread into memory, so a hostile client
cannot make the server buffer without bound. Blank lines are skipped. stdout carries nothing
but frames: the real fd 1 is kept for frames and fd 1 itself is pointed at stderr, so stray
prints from native libraries cannot corrupt the stream.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from adapters.mcp.outgoing import Correlator
from adapters.mcp.protocol import INVALID_REQUEST, Session
from adapters.mcp.wire import encode_frame

__all__ = ["MAX_LINE_BYTES", "OVERSIZED", "encode_frame", "read_lines", "serve_stdio"]

MAX_LINE_BYTES = 64 * 1024 * 1024
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
    if isinstance(line, OversizedLine):
        return session.malformed(
            INVALID_REQUEST, f"Invalid Request: message exceeds {MAX_LINE_BYTES} bytes"
        )
    return session.handle_text(line)


class _Writer:
    """Frames to stdout, one at a time (the worker's replies and the messages a tool sends
    to the client while it runs)."""

    def __init__(self, stdout: BinaryIO) -> None:
        self._stdout = stdout
        self._lock = threading.Lock()
        self.broken = False

    def write(self, message: dict[str, Any]) -> None:
        with self._lock:
            if self.broken:
                raise BrokenPipeError("the client went away")
            try:
                self._stdout.write(encode_frame(message))
                self._stdout.flush()
            except BrokenPipeError:  # the client went away: nothing left to answer
                self.broken = True
                raise


def _is_response(line: bytes | OversizedLine) -> bool:
    """Whether a line is a JSON-RPC response (checked only while a request of ours waits)."""
    if isinstance(line, OversizedLine):
        return False
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(message, dict) and "method" not in message and "id" in message


def serve_stdio(
    session: Session,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    on_close: Callable[[], None] | None = None,
) -> int:
    """Serve until stdin closes; returns the process exit code.

    Requests run one at a time, in order, on a worker thread; this thread only reads. While a
    tool waits for the client (a server-to-client request such as sampling), the reader hands
    the client's response to the session's correlator (docs/decisions/0039)."""
    if stdout is None:
        stdout = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    source = stdin if stdin is not None else sys.stdin.buffer
    writer = _Writer(stdout)
    outgoing = Correlator("qmd-stdio")
    session.emit, session.outgoing = writer.write, outgoing
    lines: queue.Queue[bytes | OversizedLine | None] = queue.Queue()

    def work() -> None:
        while (line := lines.get()) is not None:
            reply = reply_for_line(session, line)
            if reply is not None:
                try:
                    writer.write(reply)
                except BrokenPipeError:
                    return

    worker = threading.Thread(target=work, name="qmd-stdio-worker", daemon=True)
    worker.start()
    for line in read_lines(source):
        if writer.broken:
            break
        if outgoing.waiting and _is_response(line):
            reply_for_line(session, line)  # delivered to the waiting request
            continue
        lines.put(line)
    outgoing.close("the client closed stdin before answering")
    lines.put(None)
    worker.join()
    log.info("Shutting down (stdin closed)...")
    if on_close is not None:
        on_close()
    return 0

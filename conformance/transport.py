"""Stdio transport: one server process per connection, newline-delimited JSON-RPC.

The suite only ever talks to a server through this module, so anything that speaks MCP
on stdin/stdout can be tested, whatever language it is written in.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

JsonValue = Any


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _strict_json(line: bytes) -> JsonValue | None:
    """The line as strict JSON (RFC 8259 in UTF-8: no NaN/Infinity, no lone surrogate escapes),
    or None: a server's non-strict line is reported as not JSON (REQ-WIRE-ENCODE-001)."""
    try:
        parsed = json.loads(line.decode("utf-8"), parse_constant=_refuse_constant)
        # A lone surrogate escape decodes to a str that UTF-8 cannot encode.
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):
        return None
    return parsed


class ServerStartError(RuntimeError):
    """The server process could not be started or died before answering."""


@dataclass
class Frame:
    """One line read from the server's stdout."""

    raw: str
    parsed: JsonValue | None  # None when the line was not JSON
    at: float


@dataclass
class StdioServer:
    """A running stdio server. Lines from stdout are queued by a reader thread so that
    waits can time out without blocking on a pipe read."""

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    stderr_path: Path
    _proc: subprocess.Popen[bytes] | None = None
    _lines: queue.Queue[Frame | None] = field(default_factory=queue.Queue)
    _pending: list[Frame] = field(default_factory=list)
    _stderr_file: IO[bytes] | None = None

    def start(self) -> None:
        self._stderr_file = self.stderr_path.open("wb")
        try:
            # A new session lets close() signal the whole group: the original's launcher
            # spawns a second node process that would otherwise be orphaned.
            self._proc = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr_file,
                env=dict(self.env),
                cwd=str(self.cwd),
                start_new_session=True,
            )
        except OSError as exc:
            self._stderr_file.close()
            raise ServerStartError(f"cannot execute {list(self.argv)!r}: {exc}") from exc
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in iter(self._proc.stdout.readline, b""):
            text = line.decode("utf-8", errors="replace").rstrip("\r\n")
            parsed = _strict_json(line)
            self._lines.put(Frame(text, parsed, time.monotonic()))
        self._lines.put(None)  # EOF marker

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def send_line(self, line: str) -> None:
        """Write one raw line (a newline is appended)."""
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(line.encode("utf-8") + b"\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise ServerStartError(f"server stdin closed: {exc}") from exc

    def send(self, message: Mapping[str, JsonValue]) -> str:
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        self.send_line(line)
        return line

    def _next_frame(self, deadline: float) -> Frame | None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        try:
            frame = self._lines.get(timeout=remaining)
        except queue.Empty as exc:
            raise TimeoutError from exc
        if frame is None:
            self._lines.put(None)  # keep reporting EOF to later waits
        return frame

    def wait_for_id(self, request_id: JsonValue, timeout: float) -> Frame:
        """Return the first frame whose JSON-RPC id equals request_id (type included).
        Frames for other ids are kept for later waits."""
        for i, frame in enumerate(self._pending):
            if _id_matches(frame, request_id):
                return self._pending.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            nxt = self._next_frame(deadline)
            if nxt is None:
                raise EOFError("server closed stdout")
            if _id_matches(nxt, request_id):
                return nxt
            self._pending.append(nxt)

    def collect_quiet(self, window: float) -> list[Frame]:
        """Everything the server writes during `window` seconds (used for 'no reply')."""
        got = list(self._pending)
        self._pending.clear()
        deadline = time.monotonic() + window
        while True:
            try:
                frame = self._next_frame(deadline)
            except TimeoutError:
                return got
            if frame is None:
                return got
            got.append(frame)

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            data = self.stderr_path.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", errors="replace")

    def close(self, grace: float = 3.0) -> int | None:
        """Close stdin (the polite shutdown), then escalate to signals on the group."""
        proc = self._proc
        if proc is None:
            return None
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            rc = proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            rc = None
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            if rc is None:
                try:
                    rc = proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    continue
        if self._stderr_file is not None:
            self._stderr_file.close()
        if proc.stdout is not None:
            proc.stdout.close()
        return rc


def _id_matches(frame: Frame, request_id: JsonValue) -> bool:
    msg = frame.parsed
    if not isinstance(msg, dict) or "id" not in msg or "method" in msg:
        return False
    got = msg["id"]
    # JSON-RPC ids keep their type: "1" is not 1, and True is not 1 either.
    return type(got) is type(request_id) and bool(got == request_id)

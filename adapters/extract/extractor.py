"""`WorkerExtractor`: the `DocumentExtractor` port, with every parse in a worker process.

One long-lived worker (`python -m adapters.extract.worker`) takes files one at a time over a
pipe, so the parsers are imported once per `qmd update`, not once per file. Each file gets a
time limit (`timeout_s`, 60 s by default, `QMD_EXTRACT_TIMEOUT` overrides it); past it the
worker is killed and the file recorded as `timeout`. A worker that dies mid-file (a segfault in
a native parser, the memory cap) gives `crashed` for that file; the next file starts a fresh
worker. Either way `qmd update` goes on (REQ-EXTRACT-006).

`digest` runs here, in the calling process: it reads the file once, in blocks, to hash it
behind `EXTRACTION_VERSION` (the cache key) and refuses files over `max_bytes` (64 MiB by
default) before any parser sees them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

# domain.extraction is imported where it is used: the composition root builds this adapter
# for every command, and most never extract a file

if TYPE_CHECKING:
    import subprocess

    from domain.extraction import Extracted, ExtractionFailure, MetadataValue, SourceDigest

MAX_SOURCE_BYTES = 64 * 1024 * 1024
# Part of every cache key: changed whenever the parsers' output for the same bytes changes
# (2: tracked changes, outline-level headings, titles from the document, blank pages; issue
# #26; 3: text boxes, equations, comments, notes, charts, SmartArt, list numbers; #36), so
# `qmd update` re-extracts files an older version cached instead of keeping its text.
EXTRACTION_VERSION = b"qmd-extraction 3\n"
READER_VERSION = EXTRACTION_VERSION.decode("ascii").strip()
DEFAULT_TIMEOUT_S = 60.0
TIMEOUT_ENV = "QMD_EXTRACT_TIMEOUT"
WORKER_MODULE = ("-m", "adapters.extract.worker")
# Linux: the running interpreter itself. Used when `sys.executable` cannot be executed, as
# happens when qmd runs as a user who may not walk the path the interpreter was found by.
SELF_EXE = "/proc/self/exe"


def digest_file(absolute_path: str, max_bytes: int) -> SourceDigest | ExtractionFailure:
    import hashlib

    from domain.extraction import UNREADABLE, ExtractionFailure, SourceDigest

    hasher = hashlib.sha256(EXTRACTION_VERSION)
    size = 0
    try:
        with open(absolute_path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > max_bytes:
                return _too_large(os.fstat(handle.fileno()).st_size, max_bytes)
            while block := handle.read(1 << 20):
                size += len(block)
                if size > max_bytes:
                    return _too_large(size, max_bytes)
                hasher.update(block)
    except OSError as error:
        return ExtractionFailure(UNREADABLE, f"cannot be read: {error.strerror or error}")
    return SourceDigest(hasher.hexdigest(), size)


def _too_large(size: int, limit: int) -> ExtractionFailure:
    from domain.extraction import TOO_LARGE, ExtractionFailure

    return ExtractionFailure(
        TOO_LARGE, f"file too large ({size:,} bytes; the limit is {limit:,} bytes)"
    )


def from_reply(reply: Mapping[str, Any]) -> Extracted | ExtractionFailure:
    from domain.extraction import Extracted, ExtractionFailure

    empty = tuple(int(p) for p in reply.get("empty_pages") or ())
    if reply.get("ok"):
        raw = reply.get("metadata") or {}
        metadata: dict[str, MetadataValue] = {}
        for key, value in raw.items():
            if isinstance(value, list):
                metadata[str(key)] = [str(v) for v in value]
            elif isinstance(value, str | int | float | bool):
                metadata[str(key)] = value
        return Extracted(
            text=str(reply.get("text") or ""),
            metadata=metadata,
            pages=int(reply.get("pages") or 0),
            empty_pages=empty,
        )
    return ExtractionFailure(str(reply.get("reason")), str(reply.get("detail") or ""), empty)


def timeout_from_env(env: Mapping[str, str]) -> float:
    try:
        value = float(env.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


class WorkerExtractor:
    """Parses in a child process with a per-file time limit; see the module text."""

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = MAX_SOURCE_BYTES,
        command: Sequence[str] | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.version = READER_VERSION
        self._command = list(command) if command is not None else None
        self._process: subprocess.Popen[bytes] | None = None
        self.started = 0  # workers started so far (tests read it)

    def digest(self, absolute_path: str) -> SourceDigest | ExtractionFailure:
        return digest_file(absolute_path, self.max_bytes)

    def extract(self, absolute_path: str, file_format: str) -> Extracted | ExtractionFailure:
        from domain.extraction import CRASHED, TIMEOUT, ExtractionFailure

        try:
            process = self._worker()
        except OSError as error:  # no interpreter to run it with, out of processes…
            return ExtractionFailure(CRASHED, f"the parser process could not start: {error}")
        request = json.dumps({"path": absolute_path, "format": file_format}) + "\n"
        try:
            assert process.stdin is not None
            process.stdin.write(request.encode("utf-8"))
            process.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died(process)
        line = self._read_line(process)
        if line is None:
            self._stop()
            return ExtractionFailure(
                TIMEOUT, f"the parser ran past the {self.timeout_s:g} s limit and was stopped"
            )
        if not line:
            return self._died(process)
        try:
            return from_reply(json.loads(line))
        except (ValueError, TypeError):
            self._stop()
            return ExtractionFailure(CRASHED, "the parser process answered garbage")

    def close(self) -> None:
        self._stop()

    # -- the worker -----------------------------------------------------------------------------

    def _worker(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        if self._command is not None:
            self._process = self._spawn(self._command, None)
        else:
            # The worker imports exactly what this process imports (same sys.path).
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
            try:
                self._process = self._spawn([sys.executable, *WORKER_MODULE], env)
            except PermissionError:
                if not os.path.exists(SELF_EXE):
                    raise
                self._process = self._spawn([SELF_EXE, *WORKER_MODULE], env)
        self.started += 1
        return self._process

    @staticmethod
    def _spawn(command: list[str], env: dict[str, str] | None) -> subprocess.Popen[bytes]:
        import subprocess  # the worker process only when a file needs it

        return subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env=env,
        )

    def _read_line(self, process: subprocess.Popen[bytes]) -> bytes | None:
        """One answer line; b'' when the worker died; None past the time limit."""
        assert process.stdout is not None
        fd = process.stdout.fileno()
        deadline = time.monotonic() + self.timeout_s
        chunks: list[bytes] = []
        import selectors

        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return None
                block = os.read(fd, 1 << 20)
                if not block:
                    return b""
                chunks.append(block)
                if block.endswith(b"\n"):
                    return b"".join(chunks)

    def _died(self, process: subprocess.Popen[bytes]) -> ExtractionFailure:
        import subprocess

        from domain.extraction import CRASHED, ExtractionFailure

        try:
            code = process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self._stop()
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        return ExtractionFailure(CRASHED, f"the parser process died ({how})")

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        import subprocess

        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class InProcessExtractor:
    """The same parsers in the calling process, without limits on time or crashes: for the
    benchmark and the contract tests, never for `qmd update`."""

    def __init__(self, max_bytes: int = MAX_SOURCE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.version = READER_VERSION

    def digest(self, absolute_path: str) -> SourceDigest | ExtractionFailure:
        return digest_file(absolute_path, self.max_bytes)

    def extract(self, absolute_path: str, file_format: str) -> Extracted | ExtractionFailure:
        from adapters.extract.formats import extract_file  # the parsers only when used

        return extract_file(absolute_path, file_format)

    def close(self) -> None:
        return None

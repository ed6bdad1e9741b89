"""The non-blocking stderr log (REQ-HTTP-LIMIT-006): a writer that never waits on stderr,
drops and counts what it cannot take, and may be called from a signal handler."""

from __future__ import annotations

import logging
import os
import select
import subprocess
import sys
import threading
import time

import pytest

from adapters.stderr_log import NonBlockingStderrHandler
from tests.mcp_harness import REPO


def test_a_pipe_nobody_reads_never_blocks_the_logger_and_drops_are_counted() -> None:
    read_end, write_end = os.pipe()
    handler = NonBlockingStderrHandler(fd=write_end, capacity_bytes=256 * 1024)
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "x" * 1024, None, None)
    began = time.monotonic()
    for _ in range(2000):  # 2 MiB: the pipe (64 KiB) and the queue (256 KiB) overflow
        handler.emit(record)
    assert time.monotonic() - began < 5  # no emit waited for the pipe
    assert handler.dropped_total > 1000
    received = bytearray()
    stop = threading.Event()

    def read() -> None:  # stderr is read again from now on
        while not stop.is_set():
            if select.select([read_end], [], [], 0.1)[0]:
                received.extend(os.read(read_end, 1 << 16))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert handler.drain(30)  # everything queued gets written once stderr takes it
        deadline = time.monotonic() + 10
        while b"dropped: stderr could not take them]" not in received:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        stop.set()
        reader.join(5)
    notice = bytes(received).split(b"[qmd: ", 1)[1].split(b" ", 1)[0]
    assert 0 < int(notice) <= handler.dropped_total
    os.close(write_end)
    os.close(read_end)


SIGNAL_SCRIPT = """
import logging, signal, sys
from adapters import stderr_log
stderr_log.install(logging.INFO)
log = logging.getLogger("t")
signal.signal(signal.SIGALRM, lambda *_: log.info("from a signal handler"))
signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
for n in range(100000):
    log.info("line %d", n)
signal.setitimer(signal.ITIMER_REAL, 0, 0)
print("done")
"""


@pytest.mark.slow  # waits on real time by design: left out of `make test-fast`
def test_logging_from_a_signal_handler_that_interrupts_logging_does_not_deadlock() -> None:
    """SIGTERM logs `Shutting down`; the signal may land while the main thread is inside
    the handler. A lock that is not reentrant deadlocked there (the server then ignored
    SIGTERM)."""
    done = subprocess.run(
        [sys.executable, "-c", SIGNAL_SCRIPT],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == b"done", done.stderr[-500:]
    assert b"from a signal handler" in done.stderr

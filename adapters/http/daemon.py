"""`qmd mcp --http --daemon` and `qmd mcp stop`: a background server with a PID file and a
log, where the original keeps them (`$XDG_CACHE_HOME/qmd/mcp.pid` and `mcp.log`, or
`mcp-<index>.pid`/`.log` for a named index).

Unlike the original, `start` waits until the server listens (or reports why it did not), and
`stop` says what it actually did.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_QMD_COMMAND = re.compile(r"(?:^|[\s/\\])qmd(?:\.(?:ts|js))?(?:\s|$)|adapters\.cli")
LISTENING = "QMD MCP server listening on "


@dataclass(frozen=True)
class DaemonFiles:
    pid: str
    log: str

    @classmethod
    def under(cls, cache_dir: str, index_name: str | None) -> DaemonFiles:
        stem = "mcp" if not index_name or index_name == "index" else f"mcp-{index_name}"
        return cls(os.path.join(cache_dir, f"{stem}.pid"), os.path.join(cache_dir, f"{stem}.log"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        done = subprocess.run(
            ["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, check=False
        )
        return done.stdout.strip()


def is_qmd_server(pid: int) -> bool:
    return _alive(pid) and bool(_QMD_COMMAND.search(_command_line(pid)))


def read_pid(files: DaemonFiles) -> int | None:
    try:
        with open(files.pid, encoding="utf-8") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def running_pid(files: DaemonFiles) -> int | None:
    pid = read_pid(files)
    return pid if pid is not None and is_qmd_server(pid) else None


def remove_own_pid_file(files: DaemonFiles) -> None:
    """A server leaving removes the PID file only when it names this very process."""
    if read_pid(files) == os.getpid():
        _unlink(files.pid)


def _log_tail(path: str, limit: int = 2000) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", "replace").strip()


def start(
    files: DaemonFiles,
    child_args: Sequence[str],
    env: Mapping[str, str],
    wait_s: float = 60.0,
) -> tuple[int, str]:
    """Start `python -m adapters.cli <child_args>` detached; (exit code, what to print)."""
    pid = running_pid(files)
    if pid is not None:
        return 1, f"Already running (PID {pid}). Run 'qmd mcp stop' first."
    os.makedirs(os.path.dirname(files.pid), exist_ok=True)
    with open(files.log, "wb") as log:  # truncated on each start, as the original does
        child = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", *child_args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=dict(env),
            start_new_session=True,
        )
    with open(files.pid, "w", encoding="utf-8") as handle:
        handle.write(f"{child.pid}\n")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            _unlink(files.pid)
            tail = _log_tail(files.log)
            return 1, f"The server exited with code {child.returncode} while starting.\n{tail}"
        for line in _log_tail(files.log, 20000).splitlines():
            if line.startswith(LISTENING):
                url = line[len(LISTENING) :].strip()
                return 0, f"Started on {url} (PID {child.pid})\nLogs: {files.log}"
        time.sleep(0.1)
    return (
        1,
        f"The server (PID {child.pid}) did not report listening in {wait_s:g} s; see {files.log}",
    )


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def stop(files: DaemonFiles, grace_s: float = 20.0) -> tuple[int, str]:
    """Stop the daemon named by the PID file; (exit code, a truthful account)."""
    pid = read_pid(files)
    if pid is None:
        return 0, "Not running (no PID file)."
    if not _alive(pid):
        _unlink(files.pid)
        return 0, f"Not running: removed a stale PID file (PID {pid} had exited)."
    if not is_qmd_server(pid):
        _unlink(files.pid)
        return 0, f"Not running: PID {pid} is another program; removed the stale PID file."
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _alive(pid) or _zombie(pid):
            _unlink(files.pid)
            return 0, f"Stopped the QMD MCP server (PID {pid})."
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    _unlink(files.pid)
    return 1, f"The QMD MCP server (PID {pid}) ignored SIGTERM for {grace_s:g} s; killed it."


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().split(")")[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False

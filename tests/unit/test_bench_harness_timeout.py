"""benchmarks.harness: a timed-out command leaves no process behind (the original's
launcher runs node as a child; killing the launcher alone left node computing)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from benchmarks.harness import Implementation


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_timeout_kills_the_launchers_children(tmp_path: Path) -> None:
    child_pid = tmp_path / "child.pid"
    launcher = tmp_path / "launch.sh"
    launcher.write_text(f'#!/bin/sh\nsleep 120 &\necho $! > "{child_pid}"\nwait\n')
    launcher.chmod(0o755)
    impl = Implementation("launcher", (str(launcher),), {"PATH": os.defpath}, tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        impl.run(timeout=1)
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the launcher's child outlived the timeout"


def test_a_command_that_finishes_returns_its_output(tmp_path: Path) -> None:
    impl = Implementation("echo", ("/bin/echo",), {"PATH": os.defpath}, tmp_path)
    done, seconds = impl.run("hello")
    assert (done.returncode, done.stdout, done.stderr) == (0, "hello\n", "")
    assert seconds >= 0

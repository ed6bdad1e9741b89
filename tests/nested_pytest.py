"""Runs pytest on a few tests in a child process, as CI would (its flags, xdist workers or
none), for the tests of what a whole run prints at its end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_HEADING = re.compile(r"^=+ (.+?) =+$")
# `-q`'s last line, outside any section: `2 passed in 1.47s`, `1 failed, 1 passed in 3.02s (...)`
_TOTALS = re.compile(r"^\d+ \w+.* in [\d.]+s\b")


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`python -m pytest -q ARGS` from the repository root, its output captured; this checkout
    importable (`tests`) by the xdist workers and by a test folder elsewhere too."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def sections(output: str, title: str) -> list[list[str]]:
    """The lines of every `==== title ====` section of a run's output, one list a section."""
    found: list[list[str]] = []
    inside: list[str] | None = None
    for line in output.splitlines():
        heading = _HEADING.match(line)
        if heading or _TOTALS.match(line):
            inside = None
        if heading and heading.group(1) == title:
            inside = []
            found.append(inside)
        elif inside is not None:
            inside.append(line)
    return found

"""Shared helpers for the conformance-suite tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def run_cli(
    *args: str, timeout: float = 1500, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command line, in a child process, exactly as a user or CI would run it."""
    return subprocess.run(
        [sys.executable, "-m", "conformance", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )

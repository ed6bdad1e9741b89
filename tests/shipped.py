"""The surfaces the real `qmd` registers, for tests that start real server processes.

Asked once of a fresh interpreter: this test process may also hold test-only surfaces
(tests/toy_surface.py, registered when a unit test imports it) that no server ships, so the
in-process registry would hand process-level tests a surface `qmd --surface` cannot serve."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@cache
def shipped_surfaces() -> list[str]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from adapters.mcp.registry import surface_names; "
            "print(json.dumps(surface_names()))",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    names: list[str] = json.loads(done.stdout)
    return names

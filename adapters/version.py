"""Names and versions, in a leaf module every entry point may import (standard library only)."""

from __future__ import annotations

import os
import sys

PROG = "qmd"
IMPLEMENTS = "2.8.3"
DIST_NAME = "qmd-reference"


def package_version() -> str:
    """The installed distribution's version, read straight from its `.dist-info` (fast);
    `importlib.metadata` (slow to import) only as a fallback."""
    prefix = DIST_NAME.replace("-", "_") + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(prefix) and name.endswith(".dist-info"):
                return name[len(prefix) : -len(".dist-info")]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DIST_NAME)
    except PackageNotFoundError:
        return "0.0.0"

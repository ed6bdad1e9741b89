"""The extraction worker: `python -m adapters.extract.worker`, one request per line.

Request (one JSON line on stdin): `{"path": "...", "format": "pdf"}`. Answer (one JSON line on
stdout): `{"ok": true, "text", "metadata", "pages", "empty_pages"}` or
`{"ok": false, "reason", "detail", "empty_pages"}`. The parent (adapters.extract.extractor)
kills this process when a file runs past its time limit, and starts a new one when it dies; its
address space is capped here so a parser that balloons fails with MemoryError instead of
taking the machine's memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

from adapters.extract.formats import extract_file
from domain.extraction import Extracted

MEMORY_LIMIT_ENV = "QMD_EXTRACT_MEMORY_BYTES"
DEFAULT_MEMORY_LIMIT = 2 * 1024 * 1024 * 1024


def _limit_memory() -> None:
    try:
        import resource
    except ImportError:  # not on POSIX: the time limit still applies
        return
    limit = int(os.environ.get(MEMORY_LIMIT_ENV) or DEFAULT_MEMORY_LIMIT)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _die_with_parent() -> None:
    """Linux: end this worker when `qmd` itself is killed mid-parse (a parser stuck in a loop
    would otherwise outlive it; on other systems EOF on stdin ends it between files)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def answer(request: dict[str, Any]) -> dict[str, Any]:
    outcome = extract_file(str(request["path"]), str(request["format"]))
    if isinstance(outcome, Extracted):
        return {
            "ok": True,
            "text": outcome.text,
            "metadata": dict(outcome.metadata),
            "pages": outcome.pages,
            "empty_pages": list(outcome.empty_pages),
        }
    return {
        "ok": False,
        "reason": outcome.reason,
        "detail": outcome.detail,
        "empty_pages": list(outcome.empty_pages),
    }


def main() -> int:
    _limit_memory()
    _die_with_parent()
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = answer(json.loads(line))
        except MemoryError:
            reply = {"ok": False, "reason": "too-large", "detail": "over the memory limit"}
        out.write(json.dumps(reply, ensure_ascii=True) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

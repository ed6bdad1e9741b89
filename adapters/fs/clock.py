"""`SystemClock`: the current time as JS `new Date().toISOString()` writes it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING


class SystemClock:
    def now_iso(self) -> str:
        # the scanning module on first use: a search never asks the time
        from adapters.fs.content_source import iso_from_ns

        now = time.time_ns()
        return iso_from_ns(now - now % 1_000_000)  # Date.now() truncates to ms


if TYPE_CHECKING:  # structural conformance, checked by mypy
    from adapters.fs.content_source import FileSystemSource
    from domain.ports import Clock, ContentSource

    def _conforms(clock: SystemClock, source: FileSystemSource) -> None:
        _clock: Clock = clock
        _source: ContentSource = source

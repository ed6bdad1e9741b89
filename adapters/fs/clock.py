"""`SystemClock`: the current time as JS `new Date().toISOString()` writes it."""

from __future__ import annotations

import time

from adapters.fs.content_source import iso_from_ns


class SystemClock:
    def now_iso(self) -> str:
        now = time.time_ns()
        return iso_from_ns(now - now % 1_000_000)  # Date.now() truncates to ms

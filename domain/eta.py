"""The remaining time of a long run (`qmd embed`) from its measured throughput.

Work is counted in units whose cost is about even (characters of document text for `qmd
embed`: the model's cost follows tokens, not documents), so one large document late in the run
does not look like the average one. The throughput is a time-decayed average: work done and
time spent are each summed with weights that halve every `half_life_s` seconds, and their
ratio is the rate. Recent batches therefore count most (a machine that gets busier, chunks
that get cheaper per character), while a single fast or slow batch moves it little, and a
batch that took no measurable time cannot make it infinite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

DEFAULT_HALF_LIFE_S = 30.0


@dataclass
class ThroughputEta:
    """Feed it `observe(done, elapsed_s)` after each batch; ask `remaining_s()`."""

    total: float
    half_life_s: float = DEFAULT_HALF_LIFE_S
    _done: float = field(default=0.0, init=False)
    _elapsed: float = field(default=0.0, init=False)
    _work: float = field(default=0.0, init=False)  # decayed sum of work done
    _time: float = field(default=0.0, init=False)  # decayed sum of time spent

    def observe(self, done: float, elapsed_s: float) -> None:
        """`done`: work finished so far (never decreases); `elapsed_s`: time since the start
        of the measured work (model loading excluded by the caller)."""
        work, spent = done - self._done, elapsed_s - self._elapsed
        if spent <= 0 and work <= 0:
            return
        decay = 0.5 ** (max(spent, 0.0) / self.half_life_s)
        self._work = self._work * decay + max(work, 0.0)
        self._time = self._time * decay + max(spent, 0.0)
        self._done, self._elapsed = max(done, self._done), max(elapsed_s, self._elapsed)

    def rate(self) -> float | None:
        """Work per second, or None before any work was measured."""
        if self._work <= 0 or self._time <= 0:
            return None
        return self._work / self._time

    def remaining_s(self) -> float | None:
        """Seconds left at the current rate; None while unknown."""
        rate = self.rate()
        if rate is None:
            return None
        return max(0.0, self.total - self._done) / rate


def format_eta(seconds: float | None) -> str:
    """`m:ss` (`h:mm:ss` from an hour on), `?` when unknown."""
    if seconds is None or math.isnan(seconds):
        return "?"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"

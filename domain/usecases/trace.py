"""What one search did: the stages it ran, how long each took, and the ones it had to skip.

A surface passes a `SearchTrace` in its `SearchRequest`; the searcher reports into it. The
command line shows the stages live on a terminal and says each skipped stage once on stderr;
the default MCP surface puts the skipped stages in its result (REQ-SPEC-QUERY-008). Timing
comes from the caller's clock, so the domain reads no clock itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# Stage names, as shown to users.
EXPANDING = "expanding"
SEARCHING = "searching"
EMBEDDING = "embedding"
RERANKING = "reranking"

# What a skipped stage means for the results, by stage.
SKIPPED_MEANS = {
    "expansion": "the query was not expanded",
    "vectors": "keyword (BM25) results only",
    "rerank": "results are in fused order, not reranked",
}


@dataclass(frozen=True)
class Degradation:
    """A stage the search skipped: `stage` is expansion, vectors or rerank."""

    stage: str
    reason: str

    @property
    def note(self) -> str:
        return f"{self.stage} skipped ({SKIPPED_MEANS.get(self.stage, 'skipped')}): {self.reason}"


@dataclass
class StepTally:
    """One hybrid-pipeline step: its time and its counts in and out."""

    seconds: float = 0.0
    count_in: int = 0
    count_out: int = 0
    ran: bool = False  # counted: the step did its work (a timed model call may have failed)


StageListener = Callable[[str, float | None], None]  # (stage, None at start | seconds at end)


class SearchTrace:
    def __init__(
        self,
        clock: Callable[[], float] | None = None,
        listener: StageListener | None = None,
    ) -> None:
        self._clock = clock
        self._listener = listener
        self.stages: list[tuple[str, float]] = []
        self.degradations: list[Degradation] = []
        # hybrid query only: whether the BM25 probe was a strong signal, and the expansions
        # it searched with as (type, query) (the projmem surface's deep-search report)
        self.strong_signal: bool | None = None
        self.expansions: list[tuple[str, str]] = []
        # hybrid query only: every pipeline step's time and how many items went in and came
        # out, by step name (the deep-search report's stages; not shown live by the CLI)
        self.steps: dict[str, StepTally] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self._listener is not None:
            self._listener(name, None)
        started = self._clock() if self._clock is not None else 0.0
        try:
            yield
        finally:
            elapsed = (self._clock() - started) if self._clock is not None else 0.0
            self.stages.append((name, elapsed))
            if self._listener is not None:
                self._listener(name, elapsed)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time one pipeline step (added to what the step took before in this search)."""
        started = self._clock() if self._clock is not None else 0.0
        try:
            yield
        finally:
            elapsed = (self._clock() - started) if self._clock is not None else 0.0
            tally = self.steps.setdefault(name, StepTally())
            tally.seconds += elapsed

    def tally(self, name: str, count_in: int, count_out: int) -> None:
        """Count what went into a pipeline step and what came out (added up per search)."""
        tally = self.steps.setdefault(name, StepTally())
        tally.count_in += count_in
        tally.count_out += count_out
        tally.ran = True

    def degraded(self, stage: str, reason: str) -> None:
        """Record a skipped stage once (a stage skipped for several sub-queries is one note)."""
        if all(d.stage != stage for d in self.degradations):
            self.degradations.append(Degradation(stage, reason))


@contextmanager
def stepped(trace: SearchTrace | None, name: str) -> Iterator[None]:
    """`trace.step(name)`, or nothing without a trace."""
    if trace is None:
        yield
        return
    with trace.step(name):
        yield


def tallied(trace: SearchTrace | None, name: str, count_in: int, count_out: int) -> None:
    if trace is not None:
        trace.tally(name, count_in, count_out)


@contextmanager
def traced(trace: SearchTrace | None, name: str) -> Iterator[None]:
    """`trace.stage(name)`, or nothing without a trace."""
    if trace is None:
        yield
        return
    with trace.stage(name):
        yield

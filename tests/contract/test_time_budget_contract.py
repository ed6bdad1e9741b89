"""TimeBudget contract (REQ-SEARCH-DEGRADE-001, REQ-SEARCH-CANCEL-LDIMSCANCEL-001) for
RequestTimeBudget, its one implementation (the tests run it under deadlines set as the
transports set them): no limit outside a request, the time left inside one, a stage bounded,
a stage's own error passed on, a request given up seen by `check`, in its bounded stages too."""

from __future__ import annotations

import threading
import time

import pytest

from adapters.fs.deadline import RequestTimeBudget, request_deadline
from domain.ports import OverBudgetError, TimeBudget, WorkCancelledError


@pytest.fixture
def budget() -> TimeBudget:
    return RequestTimeBudget()


def test_no_limit_outside_a_request(budget: TimeBudget) -> None:
    assert budget.seconds_left() is None


def test_the_time_left_inside_a_request(budget: TimeBudget) -> None:
    with request_deadline(time.monotonic() + 60):
        left = budget.seconds_left()
        assert left is not None and 59 < left <= 60
        with request_deadline(time.monotonic() - 5):  # past: nothing left, never below 0
            assert budget.seconds_left() == 0.0
    assert budget.seconds_left() is None


def test_each_thread_sees_its_own_request(budget: TimeBudget) -> None:
    seen: list[float | None] = []
    with request_deadline(time.monotonic() + 60):
        other = threading.Thread(target=lambda: seen.append(budget.seconds_left()))
        other.start()
        other.join(5)
    assert seen == [None]


def test_a_stage_within_its_bound_gives_its_result(budget: TimeBudget) -> None:
    assert budget.run_within(5, lambda: 7) == 7


def test_a_stage_past_its_bound_is_left_behind(budget: TimeBudget) -> None:
    gate = threading.Event()
    began = time.monotonic()
    with pytest.raises(OverBudgetError):
        budget.run_within(0.2, lambda: gate.wait(10))
    assert time.monotonic() - began < 2
    gate.set()


def test_a_stage_error_is_raised_as_it_is(budget: TimeBudget) -> None:
    def fails() -> int:
        raise ValueError("the stage's own error")

    with pytest.raises(ValueError, match="own error"):
        budget.run_within(5, fails)


def test_check_passes_until_the_request_is_given_up(budget: TimeBudget) -> None:
    budget.check()  # outside a request: never given up
    given_up = threading.Event()
    with request_deadline(time.monotonic() - 5, given_up):
        budget.check()  # past its deadline but not given up: the search degrades, goes on
        given_up.set()
        with pytest.raises(WorkCancelledError):
            budget.check()
        with request_deadline(None), pytest.raises(WorkCancelledError):
            budget.check()  # a part of a request given up is given up too
    budget.check()


def test_a_stage_left_behind_is_told_to_stop(budget: TimeBudget) -> None:
    """The stage runs in the request (it sees its deadline); past its bound it is given up,
    so its next check stops it instead of its running on unseen."""
    gate = threading.Event()
    seen: list[object] = []

    def stage() -> None:
        seen.append(budget.seconds_left())
        gate.wait(10)
        try:
            budget.check()
            seen.append("went on")
        except WorkCancelledError:
            seen.append("stopped")

    with request_deadline(time.monotonic() + 60), pytest.raises(OverBudgetError):
        budget.run_within(0.2, stage)
    gate.set()
    deadline = time.monotonic() + 5
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    left = seen[0]
    assert isinstance(left, float) and left <= 0.2
    assert seen[1:] == ["stopped"]


def test_a_request_given_up_stops_its_bounded_stage(budget: TimeBudget) -> None:
    given_up = threading.Event()
    checked = threading.Event()
    outcome: list[str] = []

    def stage() -> None:
        given_up.wait(10)
        try:
            budget.check()
            outcome.append("went on")
        except WorkCancelledError:
            outcome.append("stopped")
        checked.set()

    with request_deadline(None, given_up):
        threading.Timer(0.05, given_up.set).start()  # the transport gives the request up
        budget.run_within(5, stage)
    assert checked.is_set() and outcome == ["stopped"]

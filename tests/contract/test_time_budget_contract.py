"""TimeBudget contract (REQ-SEARCH-DEGRADE-001) for RequestTimeBudget, its one implementation
(the tests run it under deadlines set as the transports set them): no limit outside a
request, the time left inside one, a stage bounded, a stage's own error passed on."""

from __future__ import annotations

import threading
import time

import pytest

from adapters.fs.deadline import RequestTimeBudget, request_deadline
from domain.ports import OverBudgetError, TimeBudget


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

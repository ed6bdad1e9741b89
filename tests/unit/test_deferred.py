"""`adapters/deferred.py`: an adapter built on its first use, once (issue 35: a cold
`qmd search` imports none of the ports it never uses)."""

from __future__ import annotations

import threading

import pytest

from adapters.deferred import deferred


class Counter:
    def __init__(self) -> None:
        self.value = 0

    def bump(self, by: int = 1) -> int:
        self.value += by
        return self.value


def test_nothing_is_built_until_first_use_and_then_once() -> None:
    built: list[Counter] = []

    def make() -> Counter:
        built.append(Counter())
        return built[-1]

    counter = deferred(make)
    assert built == []
    assert "not built" in repr(counter)
    assert counter.bump() == 1
    assert counter.bump(2) == 3
    assert counter.value == 3  # attributes and properties read through
    assert len(built) == 1


def test_a_failed_build_is_tried_again_on_the_next_use() -> None:
    attempts: list[int] = []

    def make() -> Counter:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("not yet")
        return Counter()

    counter = deferred(make)
    with pytest.raises(OSError, match="not yet"):
        counter.bump()
    assert counter.bump() == 1
    assert len(attempts) == 2


def test_threads_using_it_first_at_once_share_one_object() -> None:
    built: list[Counter] = []
    gate = threading.Barrier(8)

    def make() -> Counter:
        built.append(Counter())
        return built[-1]

    counter = deferred(make)

    def use() -> None:
        gate.wait()
        counter.bump()

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1

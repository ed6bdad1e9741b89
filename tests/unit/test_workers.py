"""The model lane's lower priority is relative to the process's own niceness."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from adapters.mcp.workers import MAX_NICENESS, MODEL_NICENESS, _lower_priority


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread niceness is Linux's")
@pytest.mark.parametrize("start", [0, 5, 15])
def test_model_threads_sit_below_a_niced_server(start: int) -> None:
    seen: list[int] = []

    def lane_thread() -> None:
        tid = threading.get_native_id()
        # the server runs under `nice -n start` (never below the test's own niceness, which
        # only root may lower)
        niceness = max(start, os.getpriority(os.PRIO_PROCESS, tid))
        os.setpriority(os.PRIO_PROCESS, tid, niceness)
        _lower_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, tid) - niceness)

    thread = threading.Thread(target=lane_thread)
    thread.start()
    thread.join()
    niceness = max(start, os.getpriority(os.PRIO_PROCESS, 0))
    assert seen == [min(MAX_NICENESS, niceness + MODEL_NICENESS) - niceness]


def test_a_finished_job_keeps_no_reference_to_its_result() -> None:
    """A reply must be freed as soon as nobody needs it: a cycle between a finished future
    and its done callbacks kept it (a whole reply, megabytes) until a full collection, which
    a quiet server may not run for a long time (issue 33, finding 3)."""
    import gc
    import weakref

    from adapters.mcp.workers import Job
    from tests.guarantees import Rig

    class Reply:
        pass

    pools = Rig("spec").pools()
    submitted = threading.Event()

    def work(_worker: object) -> Reply:
        submitted.wait(10)  # still running when submit() has registered its callbacks
        return Reply()

    gc.disable()
    try:
        future = pools.submit(Job(), work)
        submitted.set()
        reply = weakref.ref(future.result(timeout=10))
        del future
        assert reply() is None
    finally:
        gc.enable()
        pools.shutdown()

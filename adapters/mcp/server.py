"""Entry point for `qmd mcp`: pick a surface from the registry, open a session, serve stdio."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

from adapters.config.service import DEFAULT_SAMPLING_TIMEOUT_S
from adapters.mcp.protocol import Session
from adapters.mcp.registry import SurfaceContext, create_surface
from adapters.mcp.stdio import serve_stdio
from adapters.mcp.workers import WorkerPools
from domain.usecases.services import Services

log = logging.getLogger("qmd.mcp")


def exit_now(code: int = 0) -> None:
    """End the process at once, its output flushed, without finalizing the interpreter.

    Used when work still runs after the end of the input was served (a worker inside a
    native model load or decode, a thread of a left-behind search): closing the index under
    it is unsafe, the thread pools' exit hook would wait for it forever, and tearing the
    interpreter and llama.cpp's globals down under a native call crashed the process with
    SIGSEGV (REQ-SPEC-STDIO-003). Every answer has been written by then."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more to say
            pass
    os._exit(code)


def run_stdio_server(
    services: Services,
    surface: str,
    context: SurfaceContext,
    on_close: Callable[[], None] | None = None,
    pools: WorkerPools | None = None,
    timeout_s: float | None = None,
    sampling_timeout_s: float = DEFAULT_SAMPLING_TIMEOUT_S,
    on_stuck: Callable[[], None] = exit_now,
) -> int:
    """`pools`: run index reads and model calls concurrently (docs/decisions/0033);
    `timeout_s` and `sampling_timeout_s`: the time limits (`Budgets`, adapters/mcp/tools.py);
    `on_stuck`: what ends the process when work still runs after the end of the input
    (exit_now, unless a test serves in its own process)."""
    session = Session(create_surface(surface, services, context))

    def close() -> None:
        if pools is not None:
            pools.shutdown()
        if on_close is not None:
            on_close()

    def stuck() -> None:
        log.warning("work still running at the end of input; exiting without waiting for it")
        on_stuck()

    return serve_stdio(
        session,
        on_close=close,
        pools=pools,
        timeout_s=timeout_s,
        sampling_timeout_s=sampling_timeout_s,
        on_stuck=stuck,
    )

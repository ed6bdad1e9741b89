"""Entry point for `qmd mcp`: pick a surface from the registry, open a session, serve stdio."""

from __future__ import annotations

from collections.abc import Callable

from adapters.mcp.budgets import DEFAULT_SAMPLING_TIMEOUT_S
from adapters.mcp.protocol import Session
from adapters.mcp.registry import SurfaceContext, create_surface
from adapters.mcp.stdio import serve_stdio
from adapters.mcp.workers import WorkerPools
from domain.usecases.services import Services


def run_stdio_server(
    services: Services,
    surface: str,
    context: SurfaceContext,
    on_close: Callable[[], None] | None = None,
    pools: WorkerPools | None = None,
    timeout_s: float | None = None,
    sampling_timeout_s: float = DEFAULT_SAMPLING_TIMEOUT_S,
) -> int:
    """`pools`: run index reads and model calls concurrently (docs/decisions/0033);
    `timeout_s` and `sampling_timeout_s`: the time limits (adapters/mcp/budgets.py)."""
    session = Session(create_surface(surface, services, context))

    def close() -> None:
        if pools is not None:
            pools.shutdown()
        if on_close is not None:
            on_close()

    return serve_stdio(
        session,
        on_close=close,
        pools=pools,
        timeout_s=timeout_s,
        sampling_timeout_s=sampling_timeout_s,
    )

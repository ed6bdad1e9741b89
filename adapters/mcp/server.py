"""Entry point for `qmd mcp`: pick a surface from the registry, open a session, serve stdio."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from adapters.mcp.protocol import Session
from adapters.mcp.registry import SurfaceContext, create_surface
from adapters.mcp.stdio import serve_stdio
from domain.usecases.services import Services


def run_stdio_server(
    services: Services,
    surface: str,
    context: SurfaceContext,
    on_close: Callable[[], None] | None = None,
) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    session = Session(create_surface(surface, services, context))
    return serve_stdio(session, on_close=on_close)

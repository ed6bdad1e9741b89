"""Entry point for `qmd mcp`: pick the surface, open a session, serve stdio."""

from __future__ import annotations

import logging
import sys

from adapters.bootstrap import App
from adapters.mcp.compat import COMPAT_VERSION, CompatSurface
from adapters.mcp.protocol import Session, Surface
from adapters.mcp.root_guard import RootGuard
from adapters.mcp.spec import SpecSurface
from adapters.mcp.stdio import serve_stdio

SURFACES = ("spec", COMPAT_VERSION)


def make_surface(app: App, compat: str | None, version: str, force_root: str | None) -> Surface:
    """`compat=None` gives the seed-000 spec surface; `"2.8.3"` the original's.

    `force_root` must be the root the app was built with (`build_app(force_root=…)`), which
    scopes what every surface can see; the spec surface also refuses outside request paths.
    """
    if compat is None:
        return SpecSurface(app.services(), version, RootGuard(force_root, app.home))
    if compat == COMPAT_VERSION:
        return CompatSurface(app.services())
    raise ValueError(f"Unknown compat surface {compat!r}; supported: {COMPAT_VERSION}")


def run_stdio_server(
    app: App, compat: str | None, version: str, force_root: str | None = None
) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    session = Session(make_surface(app, compat, version, force_root))
    return serve_stdio(session, on_close=app.close)

"""`qmd mcp` and `qmd server`: serving a surface over MCP."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable, positive_int
from adapters.version import IMPLEMENTS, package_version

if TYPE_CHECKING:
    pass


def mcp(args: argparse.Namespace) -> int:
    if args.http or args.daemon:
        raise CommandError(
            "qmd mcp --http: the HTTP transport is not implemented yet; use stdio (qmd mcp).",
            code=2,
        )
    return _serve_stdio(args)


def server(args: argparse.Namespace) -> int:
    transport = str(args.transport).lower()
    if transport not in ("mcp", "stdio"):
        raise CommandError(
            f"qmd server --transport {args.transport}: not implemented yet "
            "(available: mcp over stdio).",
            code=2,
        )
    return _serve_stdio(args)


def _serve_stdio(args: argparse.Namespace) -> int:
    import contextlib

    from adapters.bootstrap import build_app
    from adapters.mcp.registry import SurfaceContext, canonical_surface
    from adapters.mcp.server import run_stdio_server
    from domain.errors import QmdError

    force_root = os.path.realpath(args.force_root) if args.force_root else None
    if force_root is not None and not os.path.isdir(force_root):
        raise CommandError(f"--force-root: not a directory: {args.force_root}", code=2)
    # `--compat 2.8.3` is the original's spelling of `--surface 2.8.3`.
    surface = args.surface or args.compat or "spec"
    try:
        if args.compat and canonical_surface(surface) != canonical_surface(args.compat):
            raise CommandError("--compat and --surface name different surfaces", code=2)
        canonical_surface(surface)
    except QmdError as error:
        raise CommandError(error.message, code=2) from error
    # stdout belongs to JSON-RPC frames: anything an adapter prints while the app is being
    # assembled goes to stderr instead.
    with contextlib.redirect_stdout(sys.stderr):
        app = build_app(
            args.index,
            with_models=True,
            force_cpu=bool(args.no_gpu),
            force_root=force_root,
            compat=canonical_surface(surface) == canonical_surface(IMPLEMENTS),
        )
    context = SurfaceContext(package_version(), force_root, app.home)
    return run_stdio_server(app.services(), surface, context, on_close=app.close)


def register(table: CommandTable) -> None:
    stdio = table.command("mcp", mcp, "serve MCP over stdio")
    stdio.add_argument("--compat", choices=(IMPLEMENTS,), help="serve the original's surface")
    stdio.add_argument(
        "--surface",
        metavar="NAME",
        help="the MCP surface to serve (default: spec; 2.8.3 = --compat)",
    )
    stdio.add_argument("--force-root", metavar="DIR", help="confine documents to DIR")
    stdio.add_argument("--http", action="store_true", help="HTTP transport (not implemented)")
    stdio.add_argument("--port", type=positive_int, help=argparse.SUPPRESS)
    stdio.add_argument("--host", help=argparse.SUPPRESS)
    stdio.add_argument("--daemon", action="store_true", help=argparse.SUPPRESS)
    seed = table.command("server", server, "serve over a transport (seed spelling)")
    seed.add_argument("--transport", default="mcp", metavar="KIND", help="mcp (stdio)")
    seed.add_argument("--compat", choices=(IMPLEMENTS,))
    seed.add_argument("--surface", metavar="NAME")
    seed.add_argument("--force-root", metavar="DIR")

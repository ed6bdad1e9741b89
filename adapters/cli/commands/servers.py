"""`qmd mcp` and `qmd server`: serving a surface over MCP, on stdio or HTTP (or both)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable, positive_int
from adapters.version import IMPLEMENTS, package_version

T = TypeVar("T")
DEFAULT_PORT = 8181
TRANSPORTS = ("mcp", "stdio", "http", "both")


def mcp(args: argparse.Namespace) -> int:
    if args.action == "stop":
        return _stop(args)
    if args.action is not None:
        raise CommandError(f"qmd mcp: unknown action {args.action!r} (available: stop)", code=2)
    if args.daemon and not args.http:
        raise CommandError("qmd mcp --daemon needs --http", code=2)
    return _serve(args, "http" if args.http else "stdio")


def server(args: argparse.Namespace) -> int:
    transport = str(args.transport).lower()
    if transport not in TRANSPORTS:
        raise CommandError(
            f"qmd server --transport {args.transport}: unknown transport "
            "(available: mcp or stdio, http, both)",
            code=2,
        )
    if args.daemon and transport not in ("http",):
        raise CommandError("--daemon needs --transport http", code=2)
    return _serve(args, "stdio" if transport in ("mcp", "stdio") else transport)


def _daemon_files(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Any:
    from adapters.config.yaml_config import cache_dir
    from adapters.http.daemon import DaemonFiles

    return DaemonFiles.under(cache_dir(os.environ if env is None else env), args.index)


def _stop(args: argparse.Namespace) -> int:
    from adapters.http.daemon import stop

    code, text = stop(_daemon_files(args))
    print(text)
    return code


def _surface_name(args: argparse.Namespace) -> str:
    from adapters.mcp.registry import DEFAULT_SURFACE, canonical_surface, original_surface
    from domain.errors import QmdError

    # `--compat VERSION` (the original's flag) serves the surface that answers as that release.
    original = original_surface(args.compat) if args.compat else None
    if args.compat and original is None:
        raise CommandError(f"--compat {args.compat}: no surface answers as that release", code=2)
    surface: str = args.surface or original or DEFAULT_SURFACE
    try:
        if original is not None and canonical_surface(surface) != original:
            raise CommandError("--compat and --surface name different surfaces", code=2)
        canonical_surface(surface)
    except QmdError as error:
        raise CommandError(error.message, code=2) from error
    return surface


def _settings(args: argparse.Namespace, surface: str) -> Any:
    """Flags, then the environment, then `--env-file`, then the defaults (0032). A surface
    configured through `.env` (seed 003) reads the working folder's when no file is named,
    through the approval gate (REQ-SEC-ENV-001..003): what it may not set is named here."""
    from adapters.config.service import resolve_settings
    from adapters.mcp.registry import reads_working_env_file
    from domain.errors import QmdError

    flags = {
        "request_timeout": args.request_timeout,
        "sampling_timeout": args.sampling_timeout,
        "log_level": args.log_level,
        "max_results": args.max_results,
        "models_idle_unload": args.models_idle_unload,
        "watch": True if args.watch else None,
    }
    working_folder = os.getcwd() if reads_working_env_file(surface) else None
    try:
        settings = resolve_settings(flags, os.environ, args.env_file, working_folder)
    except QmdError as error:
        raise CommandError(f"qmd: {error.code}: {error.message}", code=2) from error
    notice = settings.refusal_notice()
    if notice is not None:
        print(notice, file=sys.stderr, flush=True)
    return settings


def _http_options(args: argparse.Namespace, settings: Any) -> Any:
    from adapters.http.options import TOKEN_ENV, HttpOptions

    env = settings.env
    options = HttpOptions(
        host=args.host or env.get("QMD_HOST") or "localhost",
        port=DEFAULT_PORT if args.port is None else args.port,
        allow_origins=tuple(args.allow_origin or ()),
        allow_hosts=tuple(args.allow_host or ()),
        token=args.token or env.get(TOKEN_ENV) or None,
        timeout_s=settings.request_timeout_s,
        sampling_timeout_s=settings.sampling_timeout_s,
        env=dict(env),
        daemon_files=_daemon_files(args, env),
    )
    if args.max_body_bytes:
        options = _replace(options, max_body_bytes=args.max_body_bytes)
    return options


def _replace(options: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(options, **changes)


def _daemon_child_args(argv: list[str]) -> list[str]:
    return [arg for arg in argv if arg != "--daemon"]


def startup_settings(args: argparse.Namespace) -> tuple[str, Any, Any]:
    """(surface, service settings, HTTP options): everything a server takes from its command
    line, its environment and a `.env` before it builds anything; the guarantee that a
    folder's files cannot change them reads them here (tests/guarantees.py, REQ-SEC-ENV-004)."""
    surface = _surface_name(args)
    settings = _settings(args, surface)
    return surface, settings, _http_options(args, settings)


def _serve(args: argparse.Namespace, transport: str) -> int:
    from adapters import stderr_log
    from adapters.bootstrap import (
        build_app,
        document_backend,
        keep_models_warm,
        watch_collections,
    )
    from adapters.mcp.registry import SurfaceContext, surface_facts
    from domain.errors import QmdError

    force_root = os.path.realpath(args.force_root) if args.force_root else None
    if force_root is not None and not os.path.isdir(force_root):
        raise CommandError(f"--force-root: not a directory: {args.force_root}", code=2)
    surface, settings, options = startup_settings(args)
    # the file's variables reach every part of the process that reads the environment (an
    # unapproved working-folder file's refused ones are not among them: REQ-SEC-ENV-002)
    os.environ.update({k: v for k, v in settings.env.items() if k not in os.environ})
    if args.daemon:
        from adapters.http.daemon import start

        code, text = start(options.daemon_files, _daemon_child_args(sys.argv[1:]), os.environ)
        print(text, file=sys.stdout if code == 0 else sys.stderr)
        return code
    # never blocks on a stderr nobody reads (REQ-HTTP-LIMIT-006), on every transport
    stderr_log.install(settings.log_level)
    # stdout belongs to JSON-RPC frames on stdio: anything an adapter prints while the app is
    # being assembled goes to stderr instead.
    with contextlib.redirect_stdout(sys.stderr):
        app = build_app(
            args.index,
            settings.env,
            with_models=True,
            force_cpu=bool(args.no_gpu),
            force_root=force_root,
            compat=surface_facts(surface).original is not None,
        )
    try:
        backend = document_backend(settings.env, settings.request_timeout_s)
    except QmdError as error:
        app.close()
        raise CommandError(f"qmd: {error.code}: {error.message}", code=2) from error
    unloader = keep_models_warm(app.models, settings.models_idle_unload_s)
    app.on_close(unloader.stop)
    if settings.watch:
        watch_collections(app, settings.env)
    context = SurfaceContext(
        package_version(),
        app.scope,
        memory=_memory_opener(app),
        max_results=settings.max_results,
        request_timeout_s=settings.request_timeout_s,
        document_backend=backend,
    )
    _preflight(app, surface, context)
    # each tool's own budget is the transports' business (ToolFacts.time_limit)
    timeout_s = settings.request_timeout_s
    options = _replace(options, timeout_s=timeout_s)
    if transport == "stdio":
        from adapters.http.options import worker_pools
        from adapters.mcp.server import run_stdio_server

        pools = worker_pools(app, surface, context, options)
        return run_stdio_server(
            app.services(),
            surface,
            context,
            on_close=app.close,
            pools=pools,
            timeout_s=timeout_s,
            sampling_timeout_s=settings.sampling_timeout_s,
        )
    return _serve_http(app, surface, context, options, with_stdio=transport == "both")


def _preflight(app: Any, surface: str, context: Any) -> None:
    """Build the surface once before any transport starts, so one that cannot serve here (a
    folder it writes outside --force-root, REQ-SEC-SCOPE-003) refuses to start on every
    transport alike (HTTP builds its sessions only when requests come)."""
    from adapters.mcp.registry import create_surface
    from domain.errors import QmdError

    try:
        create_surface(surface, app.services(), context)
    except QmdError as error:
        app.close()
        raise CommandError(f"qmd: {error.code}: {error.message}", code=1) from error


def _memory_opener(app: Any) -> Any:
    """Seed 004's memory for the memorize surface: opened on first use, once per process
    (every HTTP worker's surface shares it)."""
    import threading

    from adapters.memory_wiring import open_memory

    opened: list[Any] = []
    lock = threading.Lock()

    def memory() -> Any:
        with lock:
            if not opened:
                opened.append(open_memory(app))
            return opened[0]

    return memory


def _serve_http(app: Any, surface: str, context: Any, options: Any, with_stdio: bool) -> int:
    from adapters.http.main import HttpStartError, run_http_server
    from adapters.http.serve import PortInUseError

    try:
        return run_http_server(app, surface, context, options, with_stdio=with_stdio)
    except HttpStartError as error:
        app.close()
        raise CommandError(str(error), code=2) from error
    except PortInUseError as error:
        app.close()
        raise CommandError(
            f"Port {options.port} already in use. Try a different port with --port.", code=1
        ) from error


def _surface_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compat", choices=(IMPLEMENTS,), help="serve the original's surface")
    parser.add_argument(
        "--surface",
        metavar="NAME",
        help="the MCP surface to serve (default: spec; 2.8.3 = --compat)",
    )
    parser.add_argument("--force-root", metavar="DIR", help="confine documents to DIR")


def _service_flags(parser: argparse.ArgumentParser) -> None:
    """What every transport reads (flags > environment > --env-file > defaults)."""
    parser.add_argument(
        "--watch",
        action="store_true",
        help="re-index a collection soon after its files change (env QMD_WATCH)",
    )
    parser.add_argument(
        "--models-idle-unload",
        type=_idle_seconds,
        metavar="S",
        help="unload models unused for S seconds, reload on demand (default 0 = keep "
        "loaded; env QMD_MODELS_IDLE_UNLOAD)",
    )
    parser.add_argument(
        "--request-timeout",
        type=_seconds,
        metavar="S",
        help="answer a request that runs longer with a timeout error (default 30; "
        "env QMD_REQUEST_TIMEOUT)",
    )
    parser.add_argument(
        "--sampling-timeout",
        type=_seconds,
        metavar="S",
        help="time limit of a call that waits on the client's LLM (MCP sampling) instead "
        "(default 300; env QMD_SAMPLING_TIMEOUT)",
    )
    parser.add_argument(
        "--max-results",
        type=positive_int,
        metavar="N",
        help="hard limit on search results (default surface; env QMD_MAX_RESULTS)",
    )
    parser.add_argument(
        "--log-level",
        type=_log_level,
        metavar="LEVEL",
        help="DEBUG, INFO (default), WARN or ERROR (env QMD_LOG_LEVEL)",
    )
    parser.add_argument(
        "--env-file",
        metavar="PATH",
        help="read settings from this .env file, below the environment (env QMD_ENV_FILE); "
        "--surface ldims reads ./.env when no file is named, only its seed settings until "
        "'qmd trust ./.env' approves it",
    )


def _http_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port", type=_port, help=f"HTTP port (default {DEFAULT_PORT}; 0 = any free port)"
    )
    parser.add_argument("--host", help="address to listen on (default: QMD_HOST or localhost)")
    parser.add_argument(
        "--daemon", action="store_true", help="run the HTTP server in the background"
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="also accept this browser Origin (repeatable; env QMD_ALLOWED_ORIGINS)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        metavar="HOST",
        help="also accept this Host header (repeatable; env QMD_ALLOWED_HOSTS)",
    )
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        help="require 'Authorization: Bearer TOKEN' (env QMD_HTTP_TOKEN)",
    )
    parser.add_argument(
        "--max-body-bytes", type=positive_int, metavar="N", help="request body limit (16 MiB)"
    )


def _port(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {text!r}")
    return value


def _seconds(text: str) -> float:
    from adapters.config.service import positive_seconds

    return _checked(positive_seconds, text)


def _idle_seconds(text: str) -> float:
    from adapters.config.service import idle_seconds

    return _checked(idle_seconds, text)


def _log_level(text: str) -> int:
    from adapters.config.service import log_level

    return _checked(log_level, text)


def _checked(parse: Callable[[str], T], text: str) -> T:
    try:
        return parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def register(table: CommandTable) -> None:
    mcp_command = table.command("mcp", mcp, "serve MCP over stdio, or HTTP with --http")
    mcp_command.add_argument(
        "action",
        nargs="?",
        choices=("stop",),
        metavar="stop",
        help="stop the background HTTP server (qmd mcp stop)",
    )
    _surface_options(mcp_command)
    mcp_command.add_argument("--http", action="store_true", help="serve Streamable HTTP")
    _http_flags(mcp_command)
    _service_flags(mcp_command)
    seed = table.command("server", server, "serve over a transport (seed spelling)")
    seed.add_argument(
        "--transport", default="mcp", metavar="KIND", help="mcp (stdio) | http | both"
    )
    _surface_options(seed)
    _http_flags(seed)
    _service_flags(seed)

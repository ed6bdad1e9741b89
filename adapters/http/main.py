"""Entry point for `qmd mcp --http` and `qmd server --transport http|both`: one index, one
surface from the registry, served over HTTP (and stdio beside it for `both`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from adapters import stderr_log
from adapters.bootstrap import App, open_reader
from adapters.http.app import (
    HttpSettings,
    OriginPolicy,
    QmdHttpApp,
    bind_refusal,
)
from adapters.http.daemon import remove_own_pid_file
from adapters.http.legacy_sse import LegacySseTransport
from adapters.http.limits import HttpLimits, LimitsError
from adapters.http.options import HttpOptions, worker_pools
from adapters.http.serve import bind_socket, serve
from adapters.mcp.outgoing import Correlator
from adapters.mcp.protocol import Session, Surface
from adapters.mcp.registry import SurfaceContext, create_surface, surface_facts
from adapters.mcp.stdio import serve_stdio
from domain.profiles import ORIGINAL_2_8_3, SEED_000

log = logging.getLogger("qmd.http")


class HttpStartError(Exception):
    """The server cannot start as configured (a message for the user, exit code 2)."""


def build_http_app(
    app: App,
    surface: str,
    context: SurfaceContext,
    options: HttpOptions,
    limits: HttpLimits | None = None,
) -> QmdHttpApp:
    policy = OriginPolicy.build(
        options.host, options.env, options.allow_origins, options.allow_hosts
    )
    refusal = bind_refusal(options.host, policy, options.token)
    if refusal is not None:
        raise HttpStartError(refusal)
    limits = limits or HttpLimits()
    facts = surface_facts(surface)
    original = facts.original is not None  # the REST route answers as the original does
    # 2025-era clients POST their answers to our sampling requests on requests of their own,
    # which any worker may take: one correlator for the whole server.
    outgoing = Correlator("qmd-http") if facts.talks_back else None
    pools = worker_pools(app, surface, context, options, outgoing)
    settings = HttpSettings(
        policy=policy,
        profile=ORIGINAL_2_8_3 if original else SEED_000,
        strict_original=original,
        token=options.token,
        timeout_s=options.timeout_s,
        max_body_bytes=options.max_body_bytes,
        sampling_timeout_s=options.sampling_timeout_s,
        max_queued_bytes=limits.max_queued_bytes,
    )

    def front_surface() -> Surface:
        # the legacy SSE sessions admit messages and subscribe on one surface of their own;
        # their requests run on the workers (its reader serves nothing but that surface)
        return create_surface(surface, open_reader(app, options.env).services, context)

    # open event streams never take more than half the connections (REQ-MCP-SSE-003)
    streams = max(1, limits.connection_cap() // 2)
    legacy = LegacySseTransport(
        pools,
        front_surface,
        options.timeout_s,
        streams,
        options.sampling_timeout_s,
        limits.max_queued_bytes,
    )
    return QmdHttpApp(pools, settings, outgoing, facts, legacy)


def run_http_server(
    app: App,
    surface: str,
    context: SurfaceContext,
    options: HttpOptions,
    with_stdio: bool = False,
) -> int:
    stderr_log.ensure(logging.INFO)
    try:
        limits = HttpLimits.from_env(options.env)
    except LimitsError as error:
        raise HttpStartError(str(error)) from error
    http_app = build_http_app(app, surface, context, options, limits)
    if http_app.settings.policy.disabled:
        log.warning("DNS-rebinding protection is off (an allowed origin is '*').")
    elif not http_app.settings.policy.enforce_host:
        log.warning(
            "Host validation is off and the index is readable by anyone who can reach this port."
        )
    sock = bind_socket(options.host, options.port)
    endpoint = f"http://{options.host}:{sock.getsockname()[1]}/mcp"
    beside: Callable[[Callable[[], None]], None] | None = None
    if with_stdio:
        session = Session(create_surface(surface, app.services(), context))

        def beside(_stop: Callable[[], None]) -> None:
            # The end of stdin ends the stdio session only (a server under nohup or a
            # supervisor has none); HTTP serves until SIGTERM (REQ-HTTP-BOTH-001).
            serve_stdio(
                session,
                pools=http_app.pools,
                timeout_s=options.timeout_s,
                sampling_timeout_s=options.sampling_timeout_s,
                ended=f"The stdio session ended (stdin closed); HTTP keeps serving on {endpoint} "
                "until SIGTERM or SIGINT.",
            )

    def forget_pid_file() -> None:
        if options.daemon_files is not None:
            remove_own_pid_file(options.daemon_files)

    try:
        return serve(http_app, sock, options.host, beside, limits, forget_pid_file)
    finally:
        forget_pid_file()
        app.close()

"""What a server takes from its command line, and the worker pools stdio and HTTP both run
on (docs/decisions/0033). Apart from adapters/http/app.py so that `qmd mcp` on stdio imports
none of the HTTP stack (h11, uvicorn, the routes): every start paid about 0.1 s of CPU for it,
and the conformance suite starts a server per case."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from adapters.bootstrap import App, open_reader
from adapters.config.service import DEFAULT_SAMPLING_TIMEOUT_S
from adapters.http.daemon import DaemonFiles
from adapters.mcp.outgoing import Correlator
from adapters.mcp.protocol import Session
from adapters.mcp.registry import SurfaceContext, create_surface
from adapters.mcp.workers import Worker, WorkerPools

TOKEN_ENV = "QMD_HTTP_TOKEN"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class HttpOptions:
    host: str = "localhost"
    port: int = 8181
    allow_origins: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    token: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    sampling_timeout_s: float = DEFAULT_SAMPLING_TIMEOUT_S
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    threads: int = 8
    model_threads: int = 2
    env: Mapping[str, str] = field(default_factory=dict)
    daemon_files: DaemonFiles | None = None


def worker_pools(
    app: App,
    surface: str,
    context: SurfaceContext,
    options: HttpOptions,
    outgoing: Correlator | None = None,
) -> WorkerPools:
    """Worker threads, each with a session over its own connection to `app`'s index (HTTP,
    and the concurrent stdio transport: docs/decisions/0033). `outgoing` matches clients'
    answers to the server's own requests (sampling) across all workers."""

    def open_worker() -> Worker:
        reader = open_reader(app, options.env)
        session = Session(
            create_surface(surface, reader.services, context), stateless=True, outgoing=outgoing
        )
        return Worker(session, reader.services, reader.interrupt, reader.close)

    return WorkerPools(open_worker, options.threads, options.model_threads)

"""Running the ASGI app under uvicorn: binding, the start line, the connection limits
(adapters/http/limits.py), graceful shutdown.

SIGTERM and SIGINT stop accepting connections, close idle ones and those still sending a
request, let requests in flight finish for at most the shutdown grace period
(REQ-HTTP-LIMIT-005), then close the worker connections and exit 0. The socket is bound here,
before uvicorn starts, so a port in use gets the original's message and exit code 1, and port
0 (any free port) reports the port it got.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from types import FrameType

import uvicorn

from adapters import stderr_log
from adapters.http.app import QmdHttpApp
from adapters.http.limits import (
    ACCEPT_BURST,
    MAX_HEAD_BYTES,
    HttpLimits,
    limited_protocol,
    quiet_descriptor_exhaustion,
)

log = logging.getLogger("qmd.http")
LISTEN_BACKLOG = 2048


class PortInUseError(Exception):
    pass


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on `host` (a name resolves to its first address, IPv4 first)."""
    bind_host = "0.0.0.0" if host in ("", "*") else host.strip("[]")
    infos = socket.getaddrinfo(bind_host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise PortInUseError(port) from error
        raise
    sock.listen(LISTEN_BACKLOG)
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    stop_requested_at: float | None = None
    before_shutdown: Callable[[], None] | None = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.before_shutdown is not None:  # event streams begin to end (REQ-MCP-SSE-003)
            self.before_shutdown()
        await super().shutdown(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # asyncio accepts up to `backlog` connections per wake-up before any of them is
        # seen by the protocol (which enforces the connection cap), so uvicorn's backlog is
        # kept small (ACCEPT_BURST); the kernel's queue of pending connections stays long.
        for sock in sockets or []:
            sock.listen(LISTEN_BACKLOG)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            self.stop_requested_at = time.monotonic()
            log.info("Shutting down (%s)...", signal.Signals(sig).name)
        super().handle_exit(sig, frame)
        # uvicorn re-raises a captured signal once it has shut down, which would end the
        # process with -SIGTERM; a graceful stop is a success (exit 0), as in the original.
        self._captured_signals.clear()


class HttpServer:
    """One uvicorn server over a bound socket; `stop()` may be called from any thread."""

    def __init__(
        self,
        app: QmdHttpApp,
        sock: socket.socket,
        limits: HttpLimits | None = None,
        before_forced_exit: Callable[[], None] | None = None,
    ) -> None:
        self.app = app
        self.sock = sock
        self.limits = limits or HttpLimits()
        self.before_forced_exit = before_forced_exit
        config = uvicorn.Config(
            app,
            http=limited_protocol(self.limits),
            lifespan="off",
            access_log=False,
            log_level="warning",
            log_config=None,  # uvicorn's records go to the process's (non-blocking) log
            server_header=False,
            timeout_keep_alive=self.limits.idle_timeout_s,  # type: ignore[arg-type]
            timeout_graceful_shutdown=self.limits.shutdown_grace_s,  # type: ignore[arg-type]
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            backlog=ACCEPT_BURST,
        )
        self._server = _Server(config)
        grace = self.limits.shutdown_grace_s
        self._server.before_shutdown = lambda: app.begin_shutdown(grace)
        quiet_descriptor_exhaustion()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def stop(self) -> None:
        if self._server.stop_requested_at is None:
            self._server.stop_requested_at = time.monotonic()
        self._server.should_exit = True

    def run(self) -> int:
        try:
            self._server.run(sockets=[self.sock])
        finally:
            self._shut_pools_down()
            self.sock.close()
        return 0

    def _shut_pools_down(self) -> None:
        """Wait for the worker threads within what is left of the grace period; a job still
        running past it (a model call cannot be interrupted) must not keep the process
        alive (nor may the models be freed under it), so the process then exits at once."""
        began = self._server.stop_requested_at or time.monotonic()
        left = max(1.0, self.limits.shutdown_grace_s - (time.monotonic() - began))
        closer = threading.Thread(target=self.app.pools.shutdown, daemon=True)
        closer.start()
        closer.join(left)
        if closer.is_alive():
            log.warning(
                "Requests still running %g s after the stop signal; exiting without them.",
                self.limits.shutdown_grace_s,
            )
            if self.before_forced_exit is not None:
                self.before_forced_exit()
            stderr_log.flush()
            os._exit(0)


def serve(
    app: QmdHttpApp,
    sock: socket.socket,
    display_host: str,
    beside: Callable[[Callable[[], None]], None] | None = None,
    limits: HttpLimits | None = None,
    before_forced_exit: Callable[[], None] | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT. `beside(stop)` runs in a thread next to the server (the
    stdio transport of `--transport both`, which leaves `stop` alone when its client leaves:
    HTTP serves on, REQ-HTTP-BOTH-001).
    `before_forced_exit` runs when requests outlive the shutdown grace period, just before
    the process exits without them."""
    server = HttpServer(app, sock, limits, before_forced_exit)
    stderr_log.say(f"QMD MCP server listening on http://{display_host}:{server.port}/mcp")
    if beside is not None:
        threading.Thread(target=beside, args=(server.stop,), daemon=True).start()
    return server.run()

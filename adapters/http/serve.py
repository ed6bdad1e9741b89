"""Running the ASGI app under uvicorn: binding, the start line, graceful shutdown.

SIGTERM and SIGINT stop accepting connections, let requests in flight finish, then close the
worker connections and exit 0. The socket is bound here, before uvicorn starts, so a port in
use gets the original's message and exit code 1, and port 0 (any free port) reports the port
it got.
"""

from __future__ import annotations

import errno
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType

import uvicorn

from adapters.http.app import QmdHttpApp

log = logging.getLogger("qmd.http")


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
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            log.info("Shutting down (%s)...", signal.Signals(sig).name)
        super().handle_exit(sig, frame)
        # uvicorn re-raises a captured signal once it has shut down, which would end the
        # process with -SIGTERM; a graceful stop is a success (exit 0), as in the original.
        self._captured_signals.clear()


class HttpServer:
    """One uvicorn server over a bound socket; `stop()` may be called from any thread."""

    def __init__(self, app: QmdHttpApp, sock: socket.socket) -> None:
        self.app = app
        self.sock = sock
        config = uvicorn.Config(
            app,
            lifespan="off",
            access_log=False,
            log_level="warning",
            server_header=False,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=None,
        )
        self._server = _Server(config)

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def stop(self) -> None:
        self._server.should_exit = True

    def run(self) -> int:
        try:
            self._server.run(sockets=[self.sock])
        finally:
            self.app.pools.shutdown()
            self.sock.close()
        return 0


def serve(
    app: QmdHttpApp,
    sock: socket.socket,
    display_host: str,
    beside: Callable[[Callable[[], None]], None] | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT. `beside(stop)` runs in a thread next to the server (the
    stdio transport of `--transport both`); it calls `stop` when its client leaves."""
    server = HttpServer(app, sock)
    print(
        f"QMD MCP server listening on http://{display_host}:{server.port}/mcp",
        file=sys.stderr,
        flush=True,
    )
    if beside is not None:
        threading.Thread(target=beside, args=(server.stop,), daemon=True).start()
    return server.run()

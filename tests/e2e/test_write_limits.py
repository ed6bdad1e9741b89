"""The write side of a real HTTP server (REQ-HTTP-LIMIT-007, -008) and the head cap on an
assembled head (REQ-HTTP-LIMIT-001), issue 33 findings 3 and 8.

Clients that ask for large replies (`multi_get` over a corpus of 150 documents of 64 KB, about
10 MB a reply) and never read them, on every transport that carries replies
(tests/guarantees.py `REPLY_TRANSPORTS`: Streamable HTTP in both eras, the legacy SSE stream):
the server's memory stays within its byte budgets while they sit there, goes back near where
it was once the write timeout has dropped them, and a stalled connection is dropped. Before,
a legacy session held up to 256 unread replies and a non-reading connection its reply for as
long as the client kept the socket open.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_http_limits import SLACK_S, connect, read_until_closed
from tests.guarantees import REPLY_TRANSPORTS, ReplyTransport, reply_request
from tests.http_harness import HttpServer
from tests.mcp_harness import fixture_env

DOCUMENTS = 150
DOCUMENT_BYTES = 64 * 1024
WRITE_TIMEOUT_S = 2.0
BUDGET = 16 * 1024 * 1024
CLIENT_BUFFER = 8192  # the non-readers' receive buffer: the kernel soaks up little
MULTI_GET = {"pattern": "*.md", "maxBytes": 100_000}
MB = 1024 * 1024
OPEN_STREAM = b"GET /sse HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n"


def _endpoint_seen(data: bytes) -> bool:
    """Whether the stream's first event, naming the session's endpoint, has arrived whole."""
    return b"session_id=" in data and b"\n\n" in data.split(b"session_id=", 1)[1]


# the compat surface answers multi_get without a reply cap of its own, as the original does: a
# reply of about 10 MB, more than the kernel's socket buffers take for a client that does not read
SURFACE = "compat-2.8.3"
REPLY = 11 * MB
BUILDING = 300 * MB
SETTLED = 100 * MB  # what the 8 workers keep of their last replies, and slack


def _write_corpus(folder: Path) -> None:
    folder.mkdir(parents=True)
    words = ["latency", "budget", "replica", "shard", "cursor", "ledger", "quorum", "beacon"]
    for n in range(DOCUMENTS):
        lines = [f"# Document {n}", ""]
        size = 0
        row = 0
        while size < DOCUMENT_BYTES:
            line = " ".join(words[(row + k + n) % len(words)] for k in range(12)) + f" {row}."
            lines.append(line)
            size += len(line) + 1
            row += 1
        (folder / f"doc{n:03d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def index_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("writes")
    _write_corpus(root / "big")
    env = fixture_env(root)
    from adapters.bootstrap import build_app

    app = build_app(env=env, with_models=False)
    try:
        app.collections.add(str(root / "big"), "big", "**/*.md")
    finally:
        app.close()
    return env


@pytest.fixture
def server(index_env: dict[str, str]) -> Iterator[HttpServer]:
    env = {
        **index_env,
        "QMD_HTTP_WRITE_TIMEOUT": str(WRITE_TIMEOUT_S),
        "QMD_HTTP_MAX_QUEUED_BYTES": str(BUDGET),
    }
    started = HttpServer(["mcp", "--http", "--port", "0", "--surface", SURFACE], env).start()
    try:
        yield started
    finally:
        started.stop()


def rss(server: HttpServer) -> int:
    assert server.process is not None
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


class RssSampler:
    """The server's peak resident memory, sampled every 50 ms while it runs."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.peak = rss(server)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(OSError, StopIteration):
                self.peak = max(self.peak, rss(self.server))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.peak


def small_buffer_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_BUFFER)
    sock.settimeout(10 + SLACK_S)
    sock.connect(("127.0.0.1", port))
    return sock


class NonReader:
    """A client of one transport that asks for replies and reads none of them."""

    def __init__(self, transport: ReplyTransport, port: int) -> None:
        self.transport = transport
        self.port = port
        self.sockets: list[socket.socket] = []
        self.endpoint = ""
        self.next_id = 0
        if transport.stream:
            stream = small_buffer_socket(port)
            stream.sendall(
                b"GET /sse HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n"
            )
            seen = b""
            while not _endpoint_seen(seen):
                chunk = stream.recv(4096)
                assert chunk, seen
                seen += chunk
            self.endpoint = seen.split(b"data: ", 1)[1].split(b"\n", 1)[0].decode()
            self.sockets.append(stream)
            self.post(self._message("initialize"))

    def _message(self, method: str) -> bytes:
        self.next_id += 1
        if method == "initialize":
            params = {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {}}
            message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
            return json.dumps(message).encode()
        return reply_request(self.transport, self.next_id, "multi_get", MULTI_GET)

    def post(self, body: bytes) -> int:
        """Send one request; a stream transport's POST answers at once (its status)."""
        if self.transport.stream:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                headers = {"Content-Type": "application/json"}
                connection.request("POST", self.endpoint, body=body, headers=headers)
                return connection.getresponse().status
            finally:
                connection.close()
        sock = small_buffer_socket(self.port)
        sock.sendall(self.transport.head(len(body), body) + body)
        self.sockets.append(sock)
        return 0

    def ask(self) -> int:
        return self.post(self._message("tools/call"))

    def close(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()


def served_normally(server: HttpServer) -> None:
    """One ordinary client's multi_get, read whole."""
    message = json.loads(reply_request(REPLY_TRANSPORTS[0], 1, "multi_get", MULTI_GET))
    reply = server.mcp(message)
    assert reply.status == 200
    result = reply.events()[0]["result"]
    assert not result.get("isError") and len(result["content"]) == DOCUMENTS


def warm_up(server: HttpServer) -> int:
    """Serve enough normal replies that every worker has its connection and caches; then
    the resident memory the server settles at."""
    threads = [threading.Thread(target=served_normally, args=(server,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    time.sleep(2.0)  # the freed memory is handed back within a second
    return rss(server)


def settle(server: HttpServer, below: int, within: float) -> int:
    deadline = time.monotonic() + within
    while True:
        now = rss(server)
        if now < below or time.monotonic() > deadline:
            return now
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.parametrize("transport", REPLY_TRANSPORTS, ids=lambda t: t.name)
def test_unread_replies_stay_within_the_budget_and_are_freed(
    server: HttpServer, transport: ReplyTransport
) -> None:
    """Finding 3: 100 replies of about 10 MB on one legacy session (its byte budget, 16 MiB,
    bounds what it holds: before, all of them, 1 GB), or 24 connections with one each (each
    reply within the connection's budget), none of them read. Once the write timeout (2 s)
    has dropped the non-readers, the memory goes back near where it was while their sockets
    are still open; before, nothing let it go."""
    baseline = warm_up(server)
    sampler = RssSampler(server)
    client = NonReader(transport, server.port)
    try:
        if transport.stream:
            statuses = [client.ask() for _ in range(100)]
            # 202, or once the stream is dropped for taking nothing, 404 (no such session)
            assert set(statuses) <= {202, 404, 503}, statuses
            # the budget, and the replies the 8 workers are building (a few copies of each)
            allowed = BUDGET + BUILDING
            # known limit (docs/reliability.md): an ended session's workers keep some of
            # the replies they built live for a while; before, the session held all 100
            settled = 2 * SETTLED
        else:
            for _ in range(24):
                client.ask()
            allowed = 24 * REPLY + 2 * BUILDING  # one reply per connection, being built
            settled = SETTLED
        time.sleep(WRITE_TIMEOUT_S + 1)
        served_normally(server)  # others are served meanwhile
        released = settle(server, baseline + settled, WRITE_TIMEOUT_S * 2 + SLACK_S + 10)
        peak = sampler.stop()
        print(
            f"{transport.name}: baseline {baseline / MB:.0f} MB, peak {peak / MB:.0f} MB, "
            f"with the non-readers still connected {released / MB:.0f} MB"
        )
        assert peak - baseline < allowed, (peak - baseline) / MB
        assert released < baseline + settled, (released - baseline) / MB
    finally:
        sampler.stop()
        client.close()
    served_normally(server)


@pytest.mark.parametrize("transport", REPLY_TRANSPORTS, ids=lambda t: t.name)
def test_a_connection_that_reads_nothing_is_dropped_at_the_write_timeout(
    server: HttpServer, transport: ReplyTransport
) -> None:
    """REQ-HTTP-LIMIT-008: a client that takes none of its reply for the write timeout is
    hung up on; what it reads afterwards is a cut-off reply, not the whole one (before, the
    server kept the reply for it as long as it liked)."""
    client = NonReader(transport, server.port)
    try:
        client.ask()
        time.sleep(WRITE_TIMEOUT_S + SLACK_S + 1)
        sock = client.sockets[-1]
        sock.settimeout(5)
        data = b""
        ended = False
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    ended = True
                    break
                data += chunk
        except ConnectionResetError:
            ended = True
        except TimeoutError:
            pass  # still open: the server did not drop it
        assert ended, f"the connection is still open after {len(data)} bytes"
        if not transport.stream:  # the reply never arrived whole
            head, _, body = data.partition(b"\r\n\r\n")
            lengths = [
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ]
            assert not lengths or len(body) < lengths[0], (len(body), lengths)
    finally:
        client.close()
    served_normally(server)


def test_a_large_head_in_one_write_gets_431(server: HttpServer) -> None:
    """Finding 8: a 60 KB header line sent in one write passed the 16 KiB cap (200)."""
    sock = connect(server.port)
    sock.sendall(
        b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 60_000 + b"\r\n\r\n"
    )
    data, _ = read_until_closed(sock)
    sock.close()
    assert data.startswith(b"HTTP/1.1 431 "), data[:100]
    assert b"the request head is larger than 16384 bytes" in data


def test_a_large_head_in_pieces_gets_431_and_a_large_body_in_one_write_passes(
    server: HttpServer,
) -> None:
    sock = connect(server.port)
    for _ in range(6):
        sock.sendall(b"X-Piece: " + b"b" * 5000 + b"\r\n" if _ else b"GET /health HTTP/1.1\r\n")
        time.sleep(0.05)
    with contextlib.suppress(OSError):
        sock.sendall(b"X-Piece: " + b"b" * 5000 + b"\r\n\r\n")
    data, _ = read_until_closed(sock)
    sock.close()
    assert data.startswith(b"HTTP/1.1 431 "), data[:100]
    # a small head with a 60 KB body, all in one write, is a request like any other
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "p" * 60_000})
    reply = server.mcp(json.loads(body))
    assert reply.status == 200 and reply.events()[0]["result"] == {}


@pytest.mark.slow
def test_a_legacy_reply_past_the_session_budget_is_answered_with_an_error(
    index_env: dict[str, str],
) -> None:
    """REQ-HTTP-LIMIT-007 on a legacy session: three replies of about 10 MB against a 16 MiB
    budget, read only once all were built. At most one waits within the budget beside the
    one being written, so at least one does not fit: its caller gets -32000 `Reply dropped`
    for its id instead, and every request is answered (before, all three were held)."""
    env = {**index_env, "QMD_HTTP_WRITE_TIMEOUT": "60", "QMD_HTTP_MAX_QUEUED_BYTES": str(BUDGET)}
    args = ["mcp", "--http", "--port", "0", "--surface", SURFACE]
    server = HttpServer(args, env).start()
    client = NonReader(REPLY_TRANSPORTS[-1], server.port)
    try:
        assert client.transport.stream
        assert [client.ask() for _ in range(3)] == [202, 202, 202]
        time.sleep(8)  # all three built (the client reads nothing meanwhile)
        stream = client.sockets[0]
        data = b""
        replies: dict[int, dict[str, object]] = {}
        deadline = time.monotonic() + 60
        while len(replies) < 4 and time.monotonic() < deadline:
            chunk = stream.recv(1 << 20)
            assert chunk, replies.keys()
            data += chunk
            *lines, data = data.split(b"\n")
            for line in lines:
                if line.startswith(b"data: {"):
                    message = json.loads(line[len(b"data: ") :])
                    replies[message["id"]] = message
        results = [n for n in (2, 3, 4) if "result" in replies[n]]
        dropped = [replies[n]["error"] for n in (2, 3, 4) if "error" in replies[n]]
        assert results and dropped and len(results) + len(dropped) == 3
        for error in dropped:
            assert isinstance(error, dict) and error["code"] == -32000
            assert str(error["message"]).startswith("Reply dropped: this session's stream has ")
    finally:
        client.close()
        server.stop()

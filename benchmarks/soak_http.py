"""Soak: does a real `qmd mcp --http` server keep its memory bounded and its normal clients
served while other clients misbehave on the write side (issue 33, REQ-HTTP-LIMIT-007/008)?

One server (this checkout's `qmd`, loopback only) serves a generated corpus on the compat
surface, whose `multi_get` has no reply cap of its own (`--docs` documents of `--doc-kb` KB:
one "large" reply is about docs x doc-kb, 5 MB by default). For `--minutes` (30), threads run:

* normal clients: `multi_get` of a few documents and `tools/list` on `/mcp` (2025 era and
  2026-07-28), and the same `multi_get` on a legacy SSE session, each read whole; their
  count, failures and p50/p95 latency are reported;
* non-readers: `/mcp` connections (at most 16 open) and legacy SSE sessions (at most 2, with
  40 requests each) that ask for large replies and never read them;
* drippers: connections that read their large reply 1 KiB every 0.5 s for up to 60 s;
* disconnecters: clients that ask for a large reply and hang up at once or half-way, and
  legacy SSE sessions closed with requests in flight.

The server's resident memory (VmRSS) is sampled every second. Printed: baseline, peak and
final RSS (final: 10 s after the clients stopped), and the normal clients' figures. Exit 1 if
a normal request failed or the peak passed `--max-rss-mb`; 2 if the server could not start.

    python -m benchmarks.soak_http                      # 30 minutes
    python -m benchmarks.soak_http --minutes 2          # a quick check
    python -m benchmarks.soak_http --write-timeout 5     # the server's write timeout, seconds

Every loop is bounded in time (the run's deadline) and in count (MAX_ROUNDS per thread), and
every socket has a timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import BenchError, ours

HOST = "127.0.0.1"
MAX_ROUNDS = 1_000_000  # per thread: a bound beside the deadline
SMALL_BUFFER = 8192  # a non-reader's receive buffer: the kernel soaks up little
MODERN = "2026-07-28"
WORDS = ["latency", "budget", "replica", "shard", "cursor", "ledger", "quorum", "beacon"]
MB = 1024 * 1024
OPEN_STREAM = b"GET /sse HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n"


def _endpoint_seen(data: bytes) -> bool:
    """Whether the stream's first event, naming the session's endpoint, has arrived whole."""
    return b"session_id=" in data and b"\n\n" in data.split(b"session_id=", 1)[1]


@dataclass
class Figures:
    """What the normal clients saw, shared by their threads."""

    latencies_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ok(self, began: float) -> None:
        with self.lock:
            self.latencies_ms.append((time.monotonic() - began) * 1000)

    def failed(self, why: str) -> None:
        with self.lock:
            self.failures.append(why)


def write_corpus(folder: Path, docs: int, doc_kb: int) -> None:
    folder.mkdir(parents=True)
    for n in range(docs):
        lines, size, row = [f"# Document {n}", ""], 0, 0
        while size < doc_kb * 1024:
            line = " ".join(WORDS[(row + k + n) % len(WORDS)] for k in range(12)) + f" {row}."
            lines.append(line)
            size, row = size + len(line) + 1, row + 1
        (folder / f"doc{n:03d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def call(request_id: int, arguments: dict[str, Any], name: str = "multi_get") -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


LARGE = {"pattern": "*.md", "maxBytes": 1_000_000}
SMALL = {"pattern": "doc00*.md", "maxBytes": 1_000_000}


def post_bytes(message: dict[str, Any], modern: bool = False) -> bytes:
    body = json.dumps(message).encode()
    headers = ["Host: localhost", "Content-Type: application/json"]
    if modern:
        message["params"]["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = json.dumps(message).encode()
        headers += [f"MCP-Protocol-Version: {MODERN}", "Mcp-Method: tools/call"]
        headers.append(f"Mcp-Name: {message['params']['name']}")
    else:
        headers.append("Accept: application/json, text/event-stream")
    headers.append(f"Content-Length: {len(body)}")
    return ("POST /mcp HTTP/1.1\r\n" + "\r\n".join(headers) + "\r\n\r\n").encode() + body


def raw_socket(port: int, small: bool = False, timeout: float = 30.0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if small:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    sock.settimeout(timeout)
    sock.connect((HOST, port))
    return sock


class Soak:
    def __init__(self, port: int, deadline: float, figures: Figures) -> None:
        self.port = port
        self.deadline = deadline
        self.figures = figures

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    def rounds(self) -> range:
        return range(MAX_ROUNDS)

    # -- normal clients ------------------------------------------------------------------

    def normal_mcp(self) -> None:
        for n in self.rounds():
            if not self.running():
                return
            modern = n % 2 == 1
            name, arguments = ("tools/list", None) if n % 5 == 4 else ("multi_get", SMALL)
            began = time.monotonic()
            connection = http.client.HTTPConnection(HOST, self.port, timeout=60)
            try:
                if name == "tools/list":
                    message: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": "tools/list"}
                    headers = {"Accept": "application/json, text/event-stream"}
                    body = json.dumps(message).encode()
                else:
                    raw = post_bytes(call(n, arguments or {}), modern)
                    head, body = raw.split(b"\r\n\r\n", 1)
                    lines = head.decode().split("\r\n")[1:]
                    headers = dict(line.split(": ", 1) for line in lines)
                    headers.pop("Host"), headers.pop("Content-Length")
                headers["Content-Type"] = "application/json"
                connection.request("POST", "/mcp", body=body, headers=headers)
                response = connection.getresponse()
                data = response.read()
                if response.status != 200 or b'"error"' in data[:200] or b'"isError":true' in data:
                    self.figures.failed(f"/mcp {name}: {response.status} {data[:200]!r}")
                else:
                    self.figures.ok(began)
            except OSError as error:
                self.figures.failed(f"/mcp {name}: {error}")
            finally:
                connection.close()

    def normal_sse(self) -> None:
        session: SseClient | None = None
        for n in self.rounds():
            if not self.running():
                break
            began = time.monotonic()
            try:
                if session is None:
                    session = SseClient(self.port)
                    session.request(
                        {
                            "jsonrpc": "2.0",
                            "id": 0,
                            "method": "initialize",
                            "params": {
                                "protocolVersion": "2024-11-05",
                                "capabilities": {},
                                "clientInfo": {},
                            },
                        }
                    )
                    session.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
                reply = session.request(call(n + 1, SMALL))
                if "result" not in reply or reply["result"].get("isError"):
                    self.figures.failed(f"sse multi_get: {str(reply)[:200]}")
                else:
                    self.figures.ok(began)
            except (OSError, ValueError, TimeoutError) as error:
                self.figures.failed(f"sse: {error}")
                if session is not None:
                    session.close()
                session = None
        if session is not None:
            session.close()

    # -- misbehaving clients -------------------------------------------------------------

    def non_reader_mcp(self) -> None:
        held: list[socket.socket] = []
        for n in self.rounds():
            if not self.running():
                break
            with contextlib.suppress(OSError):
                sock = raw_socket(self.port, small=True)
                sock.sendall(post_bytes(call(n, LARGE), modern=n % 2 == 1))
                held.append(sock)
            while len(held) > 16:
                held.pop(0).close()
            time.sleep(1.0)
        for sock in held:
            sock.close()

    def non_reader_sse(self) -> None:
        held: list[SseClient] = []
        for _ in self.rounds():
            if not self.running():
                break
            with contextlib.suppress(OSError, ValueError, TimeoutError):
                client = SseClient(self.port, small=True)
                held.append(client)
                for n in range(40):
                    if not self.running():
                        break
                    client.post(call(n + 1, LARGE))
            while len(held) > 2:
                held.pop(0).close()
            time.sleep(5.0)
        for client in held:
            client.close()

    def dripper(self) -> None:
        for n in self.rounds():
            if not self.running():
                return
            with contextlib.suppress(OSError):
                sock = raw_socket(self.port, small=True, timeout=5)
                try:
                    sock.sendall(post_bytes(call(n, LARGE)))
                    stop = min(self.deadline, time.monotonic() + 60)
                    while time.monotonic() < stop and sock.recv(1024):
                        time.sleep(0.5)
                finally:
                    sock.close()

    def disconnecter(self) -> None:
        for n in self.rounds():
            if not self.running():
                return
            with contextlib.suppress(OSError, ValueError, TimeoutError):
                kind = n % 3
                if kind == 2:
                    client = SseClient(self.port)
                    for k in range(5):
                        client.post(call(k + 1, LARGE))
                    client.close()
                else:
                    sock = raw_socket(self.port, timeout=10)
                    sock.sendall(post_bytes(call(n, LARGE)))
                    if kind == 1:
                        sock.recv(65536)  # half-way, then gone
                    sock.close()
            time.sleep(0.5)


class SseClient:
    """A legacy SSE session over raw sockets: the stream, and POSTs to its endpoint."""

    def __init__(self, port: int, small: bool = False) -> None:
        self.port = port
        self.sock = raw_socket(port, small=small, timeout=60)
        self.sock.sendall(
            b"GET /sse HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n"
        )
        self.buffer = b""
        while (
            b"session_id=" not in self.buffer or b"\n\n" not in self.buffer.split(b"session_id=")[1]
        ):
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ValueError("the stream closed before its endpoint event")
            self.buffer += chunk
        after = self.buffer.split(b"data: ", 1)[1]
        self.endpoint = after.split(b"\n", 1)[0].decode()
        self.buffer = after.split(b"\n\n", 1)[1]

    def post(self, message: dict[str, Any]) -> None:
        connection = http.client.HTTPConnection(HOST, self.port, timeout=30)
        try:
            body = json.dumps(message).encode()
            headers = {"Content-Type": "application/json"}
            connection.request("POST", self.endpoint, body=body, headers=headers)
            status = connection.getresponse().status
        finally:
            connection.close()
        if status != 202:
            raise ValueError(f"POST {self.endpoint}: {status}")

    def request(self, message: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        """Send a request and read the stream (chunked) until its reply comes."""
        self.post(message)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            *lines, self.buffer = self.buffer.split(b"\n")
            # an event is one chunk of the chunked stream: its data line arrives whole, and
            # the chunk-size lines never start with "data: "
            for line in lines:
                if line.startswith(b"data: {"):
                    found: dict[str, Any] = json.loads(line[6:])
                    if found.get("id") == message["id"] and "method" not in found:
                        return found
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ValueError("the stream ended")
            self.buffer += chunk
        raise TimeoutError("no reply on the stream")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_server(home: Path, corpus: Path, write_timeout: float | None) -> tuple[Any, int]:
    impl = ours(home / "state")
    done, _ = impl.run("collection", "add", str(corpus), "--name", "soak", "--mask", "**/*.md")
    if done.returncode != 0:
        raise BenchError(f"collection add failed: {done.stderr[-1000:]}")
    env = dict(impl.env)
    if write_timeout is not None:
        env["QMD_HTTP_WRITE_TIMEOUT"] = str(write_timeout)
    process = subprocess.Popen(
        [
            *impl.command,
            "mcp",
            "--http",
            "--host",
            "localhost",
            "--port",
            "0",
            "--surface",
            "compat-2.8.3",
        ],
        env=env,
        cwd=home,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stderr.readline().decode(errors="replace")
        if not line:
            break
        if "listening on http://" in line:
            port = int(line.rsplit(":", 1)[1].split("/")[0])
            # keep reading stderr so the server never waits on it
            threading.Thread(target=lambda: process.stderr.read(), daemon=True).start()  # type: ignore[union-attr]
            return process, port
    process.kill()
    raise BenchError("the server did not start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--max-rss-mb", type=float, default=1024.0)
    parser.add_argument("--docs", type=int, default=80)
    parser.add_argument("--doc-kb", type=int, default=64)
    parser.add_argument(
        "--write-timeout",
        type=float,
        default=None,
        help="the server's QMD_HTTP_WRITE_TIMEOUT (default: its own, 30 s)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="qmd-soak-"))
    process = None
    try:
        write_corpus(home / "corpus", args.docs, args.doc_kb)
        try:
            process, port = start_server(home, home / "corpus", args.write_timeout)
        except BenchError as error:
            print(f"soak: {error}", file=sys.stderr)
            return 2
        time.sleep(1.0)
        baseline = rss_mb(process.pid)
        figures = Figures()
        soak = Soak(port, time.monotonic() + args.minutes * 60, figures)
        kinds = [
            soak.normal_mcp,
            soak.normal_mcp,
            soak.normal_sse,
            soak.non_reader_mcp,
            soak.non_reader_sse,
            soak.dripper,
            soak.dripper,
            soak.disconnecter,
        ]
        threads = [threading.Thread(target=kind, daemon=True) for kind in kinds]
        for thread in threads:
            thread.start()
        peak = baseline
        while soak.running() and process.poll() is None:
            peak = max(peak, rss_mb(process.pid))
            time.sleep(1.0)
        for thread in threads:
            thread.join(120)
        for _ in range(10):
            if process.poll() is not None:
                break
            peak = max(peak, rss_mb(process.pid))
            time.sleep(1.0)
        alive = process.poll() is None
        final = rss_mb(process.pid) if alive else 0.0
        latencies = sorted(figures.latencies_ms)
        count = len(latencies) + len(figures.failures)
        p50 = statistics.median(latencies) if latencies else 0.0
        p95 = latencies[int(0.95 * (len(latencies) - 1))] if latencies else 0.0
        print(
            f"soak: {args.minutes:g} min, server RSS baseline {baseline:.0f} MB, "
            f"peak {peak:.0f} MB, final {final:.0f} MB (bound {args.max_rss_mb:.0f} MB)"
        )
        print(
            f"normal clients: {count} requests, {len(figures.failures)} failed, "
            f"p50 {p50:.0f} ms, p95 {p95:.0f} ms"
        )
        for failure in figures.failures[:10]:
            print(f"  failed: {failure}")
        if not alive:
            print("the server exited during the soak")
            return 1
        return 1 if figures.failures or peak > args.max_rss_mb else 0
    finally:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Drive a real `qmd mcp --http` server with fuzzed requests over keep-alive connections and
judge every answer by the HTTP oracle (tests/fuzz/http_oracle.py).

One request at a time on one connection (HTTP/1.1 has no pipelining worth the name): an answer
later than `hang_seconds` is a hang, a server process that exits is a crash (the request is
saved and the server restarted), a connection the server drops without an answer is an oracle
violation. RSS is sampled every few hundred requests.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.fuzz import driver, http_frames, http_oracle, oracle
from tests.fuzz import frames as gen
from tests.fuzz.driver import REPO, Profile, Report

LISTENING = "QMD MCP server listening on "
IDLE_RETRY_SECONDS = 3.0  # a keep-alive connection idle this long may be closed by the server


class HttpFuzzServer:
    """`qmd mcp --http --port 0 [--compat 2.8.3]`; the port is read from its start line."""

    def __init__(
        self,
        env: dict[str, str],
        compat: bool,
        root: Path = REPO,
        surface_args: tuple[str, ...] | None = None,
    ) -> None:
        if surface_args is None:
            surface_args = ("--compat", "2.8.3") if compat else ()
        args = ["mcp", "--http", "--port", "0", *surface_args]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=dict(env, PYTHONPATH=str(root)),
            cwd=root,
        )
        self.port = 0
        self.log: collections.deque[str] = collections.deque(maxlen=40)
        ready = threading.Event()

        def read() -> None:
            assert self.process.stderr is not None
            for raw in iter(self.process.stderr.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.log.append(line)
                if not self.port and line.startswith(LISTENING):
                    self.port = int(line.rsplit(":", 1)[1].split("/")[0])
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(90) or not self.port:
            self.stop()
            raise RuntimeError("server did not start:\n" + "\n".join(self.log))

    def alive(self) -> bool:
        return self.process.poll() is None

    def healthy(self) -> bool:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("GET", "/health")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def rss_mb(self) -> float:
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return 0.0
        for row in status.splitlines():
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()


class Client:
    """One keep-alive connection; `send` writes exactly the request's headers and body."""

    def __init__(self, port: int, timeout: float) -> None:
        self.port, self.timeout = port, timeout
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.last_used = 0.0

    def reset(self) -> None:
        self.connection.close()
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)

    def send(self, request: http_frames.HttpRequest) -> tuple[int, dict[str, str], bytes]:
        idle = time.monotonic() - self.last_used
        try:
            return self._send(request)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            if idle < IDLE_RETRY_SECONDS:
                raise
            self.reset()  # the server closed an idle keep-alive connection: not a finding
            return self._send(request)

    def _send(self, request: http_frames.HttpRequest) -> tuple[int, dict[str, str], bytes]:
        connection = self.connection
        connection.putrequest(
            request.method, request.target, skip_host=True, skip_accept_encoding=True
        )
        host = request.host[0] if request.host else f"127.0.0.1:{self.port}"
        connection.putheader("Host", host)
        if request.origin is not None:
            connection.putheader("Origin", request.origin[0])
        for name, value in request.headers.items():
            connection.putheader(name, value)
        body = request.body
        if body is not None and request.chunked:
            connection.putheader("Transfer-Encoding", "chunked")
        elif body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders()
        if body is not None:
            # the server may answer (413) before reading all of it: read the answer anyway
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._write_body(body, request.chunked)
        response = connection.getresponse()
        if response.getheader("content-type") == "text/event-stream":
            payload = self._read_events(response)
        else:
            payload = response.read()
        self.last_used = time.monotonic()
        if response.will_close:
            self.reset()
        headers = {k.lower(): v for k, v in response.getheaders()}
        return response.status, headers, payload

    def _read_events(self, response: http.client.HTTPResponse) -> bytes:
        """An event stream read as it comes: a request the server sends the client while a
        tool runs (sampling) is declined at once on a connection of its own, as a client
        without sampling does, and left out of the answer (it is not a reply)."""
        kept = b""
        event = b""
        while True:
            line = response.readline()
            if not line:  # read() marks a Content-Length body done (readline does not)
                return kept + event + response.read()
            event += line
            if line not in (b"\n", b"\r\n"):
                continue
            data = [row[6:] for row in event.splitlines() if row.startswith(b"data: ")]
            refusal = driver.client_refusal(data[0]) if len(data) == 1 else None
            if refusal is None:
                kept += event
            else:
                self._post_answer(refusal)
            event = b""

    def _post_answer(self, answer: bytes) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            connection.request(
                "POST",
                "/mcp",
                body=answer,
                headers={"Content-Type": "application/json", "Accept": http_frames.ACCEPT_BOTH},
            )
            connection.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass  # the tool's wait ends by its own time limit then
        finally:
            connection.close()

    def _write_body(self, body: bytes, chunked: bool) -> None:
        if not chunked:
            self.connection.send(body)
            return
        step = 1 << 20
        for start in range(0, len(body), step):
            piece = body[start : start + step]
            self.connection.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self.connection.send(b"0\r\n\r\n")


def tools(client: Client) -> list[dict[str, Any]]:
    request = http_frames.HttpRequest(
        "POST",
        "/mcp",
        {"Content-Type": "application/json", "Accept": http_frames.ACCEPT_BOTH},
        http_frames.tools_list_body(),
    )
    _status, _headers, body = client.send(request)
    events = http_oracle.sse_events(body)
    assert events, f"tools/list over HTTP answered {body[:200]!r}"
    found: list[dict[str, Any]] = json.loads(events[0])["result"]["tools"]
    return found


class Session:
    """A server, a connection to it, and the tally."""

    def __init__(
        self,
        env: dict[str, str],
        compat: bool,
        hang_seconds: float = 10.0,
        root: Path = REPO,
        profile: Profile | None = None,
    ) -> None:
        self.profile = profile or Profile.legacy(compat)
        compat = self.profile.compat
        self.env, self.compat, self.hang_seconds, self.root = env, compat, hang_seconds, root
        self.report = Report(self.profile.name + " over HTTP")
        self.server = HttpFuzzServer(env, compat, root, self.profile.args)
        self.client = Client(self.server.port, hang_seconds)
        self.tools = tools(self.client)

    def restart(self) -> None:
        self.server.stop()
        self.server = HttpFuzzServer(self.env, self.compat, self.root, self.profile.args)
        self.client = Client(self.server.port, self.hang_seconds)

    def close(self) -> None:
        self.client.connection.close()
        self.server.stop()

    def send(self, request: http_frames.HttpRequest, crash_dir: Path | None = None) -> bool:
        """One request judged; False when it crashed or hung the server (it was restarted)."""
        report = self.report
        expectation = http_oracle.expect(request, self.compat)
        report.frames += 1
        began = time.monotonic()
        try:
            status, headers, body = self.client.send(request)
        except TimeoutError:
            report.hangs += 1
            report.note(f"no answer within {self.hang_seconds} s: {request.describe()}")
            self._recover(request, crash_dir)
            return False
        except (OSError, http.client.HTTPException) as failure:
            self.client.reset()
            if not self.server.alive():
                report.crashes += 1
                report.note(f"server exited ({failure!r}) on {request.describe()}")
                self._save(request, crash_dir)
                self.restart()
                return False
            report.violations += 1
            report.note(f"connection dropped ({failure!r}) on {request.describe()}")
            return True
        elapsed = time.monotonic() - began
        if elapsed > report.max_frame_seconds:
            report.max_frame_seconds = elapsed
            report.slowest = request.describe().encode()[:300]
        problems, non_strict = http_oracle.judge(
            expectation, status, headers, body, self.compat, self.profile.tool_codes
        )
        report.replies += 1
        if non_strict:
            report.non_strict += 1
        if problems:
            report.violations += 1
            report.note(f"{problems} for {request.describe()} -> {status} {body[:300]!r}")
        elif _internal(body):
            report.internal_errors += 1
            report.note(f"internal error for {request.describe()} -> {body[:200]!r}")
        if report.frames % 200 == 0:
            report.max_rss_mb = max(report.max_rss_mb, self.server.rss_mb())
        return True

    def _recover(self, request: http_frames.HttpRequest, crash_dir: Path | None) -> None:
        self.client.reset()
        if not self.server.alive() or not self.server.healthy():
            self._save(request, crash_dir)
            self.restart()

    def _save(self, request: http_frames.HttpRequest, crash_dir: Path | None) -> None:
        if crash_dir is None:
            return
        crash_dir.mkdir(parents=True, exist_ok=True)
        name = f"{self.report.surface.replace(' ', '-')}-{self.report.frames}.json"
        record = {
            "method": request.method,
            "target": request.target,
            "headers": {
                k: v if isinstance(v, str) else v.decode("latin-1")
                for k, v in request.headers.items()
            },
            "origin": request.origin[0] if request.origin else None,
            "host": request.host[0] if request.host else None,
            "body": (request.body or b"").decode("latin-1"),
        }
        (crash_dir / name).write_text(json.dumps(record))


def _internal(body: bytes) -> bool:
    """Whether an answer reports an internal failure (tests/fuzz/oracle.py's rule)."""
    if b"-32603" not in body and b"internal-error" not in body:
        return False
    events = http_oracle.sse_events(body)
    for raw in events if events is not None else [body]:
        try:
            if oracle.internal_error(json.loads(raw)):
                return True
        except ValueError:
            continue
    return False


def run(
    env: dict[str, str],
    compat: bool,
    frame_count: int,
    seed: int = 0,
    hang_seconds: float = 10.0,
    crash_dir: Path | None = None,
    server_root: Path = REPO,
    progress_every: int = 0,
    profile: Profile | None = None,
    era: str | None = None,
) -> Report:
    """Send `frame_count` fuzzed requests to one surface over HTTP (/mcp requests of `era`,
    else of both); returns the tally."""
    source = gen.RandomSource(seed)
    session = Session(env, compat, hang_seconds, server_root, profile)
    if era is not None:
        session.report.surface += f" {era}"
    started = time.monotonic()
    try:
        for counter in range(frame_count):
            session.send(http_frames.request(source, session.tools, counter, era), crash_dir)
            if progress_every and (counter + 1) % progress_every == 0:
                session.report.seconds = time.monotonic() - started
                print("   ", session.report.summary(), flush=True)
    finally:
        session.report.seconds = time.monotonic() - started
        session.report.max_rss_mb = max(session.report.max_rss_mb, session.server.rss_mb())
        session.close()
    return session.report

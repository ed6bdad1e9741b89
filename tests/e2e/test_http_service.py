"""`qmd mcp --http` end to end: real server processes, the official MCP client over
Streamable HTTP in both eras, the raw wire rules, REST, the guard, the token and shutdown."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from tests.guarantees import tool_examples
from tests.http_harness import REPO, HttpServer, Reply
from tests.mcp_harness import build_fixture_index

# Each tool is called with the example arguments declared with it (`Tool.example`): they
# work without models over the fixture index.
SPEC_CALLS = tool_examples("spec")
COMPAT_CALLS = tool_examples("compat-2.8.3")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("http")
    _corpora, env = build_fixture_index(root)
    return root, env


@pytest.fixture(scope="module")
def spec_server(index: tuple[Path, dict[str, str]]) -> Iterator[HttpServer]:
    server = HttpServer(["mcp", "--http", "--port", "0"], index[1]).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def compat_server(index: tuple[Path, dict[str, str]]) -> Iterator[HttpServer]:
    server = HttpServer(["mcp", "--http", "--compat", "2.8.3", "--port", "0"], index[1]).start()
    yield server
    server.stop()


# -- the official client ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("surface", ["spec", "compat"])
async def test_official_client_lists_and_calls_every_tool(
    spec_server: HttpServer, compat_server: HttpServer, surface: str, mode: str
) -> None:
    server, calls = (
        (spec_server, SPEC_CALLS) if surface == "spec" else (compat_server, COMPAT_CALLS)
    )
    async with Client(server.url, mode=mode) as client:
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == list(calls)
        for name in sorted(calls):
            result = await client.call_tool(name, calls[name])
            assert result.content, name
            if name in ("search", "query"):
                assert result.is_error is not True, (name, result)
                assert result.structured_content is not None
                files = [r["file"] for r in result.structured_content["results"]]
                assert "handbook/engineering/api/pagination.md" in files
        document = await client.read_resource("qmd://handbook/engineering/api/pagination.md")
        assert "Pagination" in document.contents[0].text  # type: ignore[union-attr]


# -- the wire, as the original answers it ----------------------------------------------------


def test_legacy_replies_are_server_sent_events(compat_server: HttpServer) -> None:
    reply = compat_server.mcp({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/event-stream"
    assert reply.body == b'event: message\ndata: {"result":{},"jsonrpc":"2.0","id":1}\n\n'
    batch = compat_server.mcp(
        [
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            {"jsonrpc": "2.0", "id": "b", "method": "ping"},
        ]
    )
    assert [e["id"] for e in batch.events()] == [2, "b"]
    note = compat_server.mcp({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (note.status, note.body) == (202, b"")


def test_modern_era_is_plain_json_with_its_header_rules(compat_server: HttpServer) -> None:
    listed = compat_server.modern("tools/list", {})
    assert listed.status == 200 and listed.headers["content-type"] == "application/json"
    result = listed.json()["result"]
    assert result["resultType"] == "complete" and result["ttlMs"] == 60000
    called = compat_server.modern("tools/call", {"name": "status", "arguments": {}}, "status")
    assert called.json()["result"]["structuredContent"]["totalDocuments"] > 0
    wrong = compat_server.modern("tools/call", {"name": "status", "arguments": {}}, "get")
    assert wrong.status == 400 and wrong.json()["error"]["code"] == -32020
    unnamed = compat_server.modern("tools/call", {"name": "status", "arguments": {}})
    assert unnamed.status == 400 and "Mcp-Name header is absent" in unnamed.text
    gone = compat_server.modern("ping", {})
    assert gone.status == 404 and gone.json()["error"]["code"] == -32601


def test_transport_errors(spec_server: HttpServer) -> None:
    bad = spec_server.mcp(b"{not json")
    assert bad.status == 400
    assert bad.json() == {
        "jsonrpc": "2.0",
        "error": {"code": -32700, "message": "Parse error: Invalid JSON"},
        "id": None,
    }
    get = spec_server.request("GET", "/mcp")
    assert get.status == 405 and get.json()["error"]["message"] == "Method not allowed."
    missing = spec_server.request("GET", "/nowhere")
    assert (missing.status, missing.body) == (404, b"Not Found")
    assert "content-type" not in missing.headers
    health = spec_server.request("GET", "/health?probe=1")
    assert health.status == 200 and health.json()["status"] == "ok"
    assert isinstance(health.json()["uptime"], int)


def test_rest_query_and_search(compat_server: HttpServer) -> None:
    body = {"searches": [{"type": "lex", "query": "pagination"}], "limit": 2, "rerank": False}
    for path in ("/query", "/search"):
        reply = compat_server.request("POST", path, body)
        assert reply.status == 200
        results = reply.json()["results"]
        assert len(results) == 2
        top = results[0]
        assert top["file"] == "qmd://handbook/engineering/api/pagination.md"
        assert set(top) == {"docid", "file", "title", "score", "context", "line", "snippet"}
    missing = compat_server.request("POST", "/query", {"limit": 2})
    assert missing.status == 400
    assert missing.json() == {"error": "Missing required field: searches (array)"}


def test_rest_numbers_are_written_as_javascript_writes_them(compat_server: HttpServer) -> None:
    """The original answers with `JSON.stringify`: a top score of 1.0 is `"score":1`, never
    `"score":1.0` (JavaScript has one number type), as the stdio surface writes it too."""
    body = {"searches": [{"type": "lex", "query": "pagination"}], "limit": 3, "rerank": False}
    for path in ("/query", "/search"):
        reply = compat_server.request("POST", path, body)
        assert reply.status == 200
        top = reply.json()["results"][0]
        assert top["score"] == 1 and isinstance(top["line"], int)
        assert b'"score":1,' in reply.body, reply.body[:300]
        assert b'"score":1.0' not in reply.body


def test_foreign_origin_and_host_are_refused_everywhere(compat_server: HttpServer) -> None:
    evil = {"Origin": "http://evil.example"}
    for method, path in (("POST", "/query"), ("POST", "/mcp"), ("GET", "/health")):
        reply = compat_server.request(method, path, {"searches": []}, evil)
        assert reply.status == 403
        assert reply.json() == {
            "jsonrpc": "2.0",
            "error": {
                "code": -32003,
                "message": "Forbidden: Origin not allowed: http://evil.example",
            },
            "id": None,
        }
    rebound = compat_server.request("GET", "/health", headers={"Host": "evil.example:80"})
    assert rebound.status == 403 and "Host not allowed: evil.example:80" in rebound.text
    local = compat_server.request("GET", "/health", headers={"Origin": "http://localhost:3000"})
    assert local.status == 200


# -- options ---------------------------------------------------------------------------------


def test_token_and_allow_list(index: tuple[Path, dict[str, str]]) -> None:
    env = {**index[1], "QMD_HTTP_TOKEN": "s3cret"}
    server = HttpServer(
        ["mcp", "--http", "--port", "0", "--allow-origin", "https://app.example"], env
    ).start()
    try:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        refused = server.mcp(ping)
        assert refused.status == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["error"]["code"] == -32001
        assert server.mcp(ping, {"Authorization": "Bearer wrong"}).status == 401
        ok = server.mcp(ping, {"Authorization": "Bearer s3cret", "Origin": "https://app.example"})
        assert ok.status == 200 and ok.events() == [{"result": {}, "jsonrpc": "2.0", "id": 1}]
        assert server.request("GET", "/health").status == 200  # probes need no token
    finally:
        assert server.stop() == 0


def test_network_bind_without_allow_list_or_token_is_refused(
    index: tuple[Path, dict[str, str]],
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "mcp", "--http", "--host", "0.0.0.0", "--port", "0"],
        env=index[1],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Refusing to listen on '0.0.0.0'" in done.stderr


def test_port_in_use_is_reported(
    spec_server: HttpServer, index: tuple[Path, dict[str, str]]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "mcp", "--http", "--port", str(spec_server.port)],
        env=index[1],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"Port {spec_server.port} already in use" in done.stderr


def test_one_log_line_per_request(spec_server: HttpServer) -> None:
    spec_server.mcp(
        {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "status"}}
    )
    spec_server.request("GET", "/health")
    lines = [line for line in spec_server.log if " POST /mcp tools/call status 200 (" in line]
    assert lines, spec_server.log[-5:]


# -- shutdown --------------------------------------------------------------------------------


def test_sigterm_under_load_answers_every_accepted_request(
    index: tuple[Path, dict[str, str]],
) -> None:
    server = HttpServer(["mcp", "--http", "--port", "0"], index[1]).start()
    replies: list[Reply | Exception] = []
    lock = threading.Lock()
    started = threading.Barrier(9)

    def client() -> None:
        import http.client

        from tests.http_harness import send

        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        started.wait()
        for i in range(200):
            message = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "pagination"}},
            }
            try:
                reply: Reply | Exception = send(
                    connection,
                    "POST",
                    "/mcp",
                    message,
                    {
                        "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream",
                    },
                )
            except Exception as error:  # refused after shutdown began: never accepted
                reply = error
            with lock:
                replies.append(reply)
            if isinstance(reply, Exception):
                return

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    started.wait()
    import time

    time.sleep(0.5)
    code = server.stop(signal.SIGTERM)
    for thread in threads:
        thread.join(30)
    answered = [r for r in replies if isinstance(r, Reply)]
    assert code == 0
    assert answered and all(r.status == 200 and r.events() for r in answered)
    assert any("Shutting down (SIGTERM)" in line for line in server.log)


# -- the daemon ------------------------------------------------------------------------------


def _qmd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_daemon_start_already_running_and_stop(index: tuple[Path, dict[str, str]]) -> None:
    import re
    import urllib.request

    env = index[1]
    cache = Path(env["XDG_CACHE_HOME"]) / "qmd"
    started = _qmd(env, "mcp", "--http", "--daemon", "--port", "0")
    assert started.returncode == 0, started.stderr
    match = re.match(r"Started on (http://localhost:(\d+)/mcp) \(PID (\d+)\)\n", started.stdout)
    assert match is not None, started.stdout
    assert f"Logs: {cache / 'mcp.log'}" in started.stdout
    pid = int(match.group(3))
    try:
        assert (cache / "mcp.pid").read_text().strip() == str(pid)
        with urllib.request.urlopen(f"http://127.0.0.1:{match.group(2)}/health") as response:
            assert response.status == 200
        again = _qmd(env, "mcp", "--http", "--daemon", "--port", "0")
        assert again.returncode == 1
        assert f"Already running (PID {pid}). Run 'qmd mcp stop' first." in again.stderr
    finally:
        stopped = _qmd(env, "mcp", "stop")
    assert stopped.returncode == 0
    assert stopped.stdout.strip() == f"Stopped the QMD MCP server (PID {pid})."
    assert not (cache / "mcp.pid").exists()
    assert _qmd(env, "mcp", "stop").stdout.strip() == "Not running (no PID file)."
    (cache / "mcp.pid").write_text("999999\n")
    stale = _qmd(env, "mcp", "stop").stdout.strip()
    assert stale == "Not running: removed a stale PID file (PID 999999 had exited)."

"""The service under concurrent load: reads beside `qmd update`, and both transports at once."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.http_harness import ACCEPT_BOTH, REPO, HttpServer, Reply, send
from tests.mcp_harness import build_fixture_index

HEADERS = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}
READS: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": "pagination"}),
    ("get", {"file": "handbook/engineering/api/pagination.md"}),
    ("status", {}),
    ("multi_get", {"pattern": "handbook/engineering/api/*.md"}),
]


def _call(connection: http.client.HTTPConnection, i: int, tool: str, args: Any) -> Reply:
    message = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args},
    }
    return send(connection, "POST", "/mcp", message, HEADERS)


def test_a_thousand_reads_beside_qmd_update(tmp_path: Path) -> None:
    corpora, env = build_fixture_index(tmp_path)
    server = HttpServer(["mcp", "--http", "--port", "0"], env).start()
    errors: list[str] = []
    done = 0
    lock = threading.Lock()
    stop_updates = threading.Event()
    updates: list[subprocess.CompletedProcess[str]] = []

    def reader(worker: int) -> None:
        nonlocal done
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        for n in range(63):
            tool, args = READS[(worker + n) % len(READS)]
            try:
                reply = _call(connection, n, tool, args)
                events = reply.events()
                ok = reply.status == 200 and len(events) == 1 and "result" in events[0]
                ok = ok and not events[0]["result"].get("isError")
                problem = None if ok else f"{tool}: {reply.status} {reply.text[:200]}"
            except Exception as error:
                problem = f"{tool}: {error!r}"
            with lock:
                done += 1
                if problem:
                    errors.append(problem)
        connection.close()

    def updater() -> None:
        round_ = 0
        while not stop_updates.is_set() and round_ < 20:
            note = corpora / "handbook" / "notes" / f"fresh-{round_}.md"
            note.write_text(f"# Fresh {round_}\n\nzebracorn{round_} arrived during load.\n")
            updates.append(
                subprocess.run(
                    [sys.executable, "-m", "adapters.cli", "update"],
                    env=env,
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
            )
            round_ += 1

    try:
        writer = threading.Thread(target=updater)
        writer.start()
        readers = [threading.Thread(target=reader, args=(w,)) for w in range(16)]
        for thread in readers:
            thread.start()
        for thread in readers:
            thread.join(300)
        stop_updates.set()
        writer.join(300)
        assert done == 1008
        assert errors == []
        assert len(updates) >= 2 and all(u.returncode == 0 for u in updates), [
            u.stderr for u in updates
        ]
        assert not any("locked" in u.stderr for u in updates)
        last = len(updates) - 1
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        found = _call(connection, 1, "search", {"query": f"zebracorn{last}"}).events()[0]
        files = [r["file"] for r in found["result"]["structuredContent"]["results"]]
        assert files == [f"handbook/notes/fresh-{last}.md"]
        assert not any("database is locked" in line for line in server.log)
    finally:
        assert server.stop() == 0


def test_both_transports_share_one_process(tmp_path: Path) -> None:
    _corpora, env = build_fixture_index(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", "server", "--transport", "both", "--port", "0"],
        env=env,
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    line = process.stderr.readline().decode()
    assert line.startswith("QMD MCP server listening on http://localhost:"), line
    port = int(line.rsplit(":", 1)[1].split("/")[0])
    process.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    process.stdin.flush()
    assert json.loads(process.stdout.readline()) == {"result": {}, "jsonrpc": "2.0", "id": 1}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    reply = _call(connection, 2, "status", {})
    assert reply.status == 200 and reply.events()[0]["id"] == 2
    connection.close()
    # REQ-HTTP-BOTH-001: the stdio client leaves (as under nohup or a supervisor); HTTP stays
    process.stdin.close()
    assert process.stdout.read() == b""  # the stdio session has ended
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(2)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    reply = _call(connection, 3, "status", {})
    assert reply.status == 200 and reply.events()[0]["id"] == 3
    connection.close()
    process.send_signal(signal.SIGTERM)  # until SIGTERM
    assert process.wait(30) == 0
    # REQ-HTTP-BOTH-002: what the log said when stdin closed was true: HTTP served on
    log = process.stderr.read().decode()
    ended = (
        f"The stdio session ended (stdin closed); HTTP keeps serving on "
        f"http://localhost:{port}/mcp until SIGTERM or SIGINT.\n"
    )
    assert ended in log, log
    assert "stdin closed)..." not in log, log
    assert log.index(ended) < log.index("Shutting down (SIGTERM)"), log

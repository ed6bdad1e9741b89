"""What one warm HTTP `tools/call search` costs inside the server: the project files whose code
runs and the SQL statements it executes (issue 35, "a straight request path").

The server is built as `qmd mcp --http` builds it (`build_http_app` over `build_app`) and called
in this process through its ASGI interface, so a profiler sees every frame on every thread.
SQL is counted as benchmarks/bench_cli_start.py counts it: the driver's `QMD_SQL_TRACE` file,
without the statements FTS5 prepares for its own shadow tables (marked `-- `).

Run `python -m tests.request_path` to print the figures; tests/e2e/test_request_path.py holds
them to a budget."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HANDBOOK = REPO / "fixtures" / "corpora" / "handbook"
_OWN = ("adapters", "domain")


@dataclass(frozen=True)
class RequestCost:
    files: tuple[str, ...]  # project files (repo-relative) whose code ran
    statements: tuple[str, ...]  # SQL the request executed
    reply: dict[str, Any]
    calls: dict[str, int]  # "file:qualified function name" -> how often the request called it


def _qmd_env(root: Path, trace: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_"))}
    env.update(
        HOME=str(root / "home"),
        XDG_CACHE_HOME=str(root / "home" / ".cache"),
        XDG_CONFIG_HOME=str(root / "home" / ".config"),
        INDEX_PATH=str(root / "index.sqlite"),
        QMD_CONFIG_DIR=str(root / "config"),
        QMD_SQL_TRACE=str(trace),
        NO_COLOR="1",
    )
    return env


def _index(root: Path, env: dict[str, str]) -> None:
    (root / "home").mkdir(parents=True)
    corpus = root / "handbook"
    shutil.copytree(HANDBOOK, corpus)
    quiet = dict(env, QMD_SQL_TRACE="")
    command = [sys.executable, "-m", "adapters.cli.main", "collection", "add", str(corpus)]
    subprocess.run(
        [*command, "--name", "handbook"],
        env=quiet,
        cwd=root,
        capture_output=True,
        check=True,
        timeout=120,
    )


def _add_global_context(root: Path, env: dict[str, str], text: str) -> None:
    command = [sys.executable, "-m", "adapters.cli.main", "context", "add", "/", text]
    quiet = dict(env, QMD_SQL_TRACE="")
    subprocess.run(command, env=quiet, cwd=root, capture_output=True, check=True, timeout=120)


async def _post(app: Any, body: dict[str, Any]) -> dict[str, Any]:
    pending = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [
        (b"host", b"localhost:8181"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
    ]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    await app(scope, receive, send)
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert status == 200, (status, body)
    if body.startswith((b"event:", b"data:")):  # one SSE event carries the answer
        body = next(line[5:] for line in body.splitlines() if line.startswith(b"data:"))
    reply: dict[str, Any] = json.loads(body)
    return reply


class _FilesRun:
    """Records the project files whose functions are called while `on`; installed before the
    server starts so that its worker threads inherit it (3.11 has no all-threads hook)."""

    def __init__(self) -> None:
        self.on = False
        self.files: set[str] = set()
        self.calls: dict[str, int] = {}
        self._prefixes = tuple(str(REPO / part) + os.sep for part in _OWN)

    def __call__(self, frame: FrameType, event: str, _arg: object) -> None:
        if self.on and event == "call":
            name = frame.f_code.co_filename
            if name.startswith(self._prefixes):
                where = os.path.relpath(name, REPO)
                self.files.add(where)
                key = f"{where}:{frame.f_code.co_qualname}"
                self.calls[key] = self.calls.get(key, 0) + 1


@contextmanager
def _profiled(profile: _FilesRun) -> Iterator[None]:
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def measure(
    query: str = "authentication",
    surface: str = "spec",
    metadata_filter: dict[str, Any] | None = None,
    global_context: str | None = None,
) -> RequestCost:
    """Index the handbook, serve it, make two warm-up searches and measure the third
    (`metadata_filter`: the search's `filter` argument, if any; `global_context`: set by
    another process, `qmd context add /`, between the warm-ups and the measured search)."""
    from adapters.bootstrap import build_app
    from adapters.http.main import HttpOptions, build_http_app
    from adapters.mcp.registry import SurfaceContext

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        trace = root / "sql-trace.txt"
        env = _qmd_env(root, trace)
        _index(root, env)
        app = build_app(env=env, with_models=False)
        options = HttpOptions(env=env, threads=1, model_threads=1)
        http_app = build_http_app(app, surface, SurfaceContext(version="0"), options)
        arguments: dict[str, Any] = {"query": query, "limit": 5}
        if metadata_filter is not None:
            arguments["filter"] = metadata_filter
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search", "arguments": arguments},
        }

        profile = _FilesRun()

        async def twice() -> tuple[dict[str, Any], list[str]]:
            # warm-up: the worker opens its connection, and its second ranking loads the rank
            # function (adapters/sqlite/driver.py): the third request is the steady state
            for _ in range(2):
                await _post(http_app, call)
            if global_context is not None:
                _add_global_context(root, env, global_context)
            trace.unlink(missing_ok=True)
            profile.on = True
            reply = await _post(http_app, {**call, "id": 2})
            profile.on = False
            lines = trace.read_text().splitlines() if trace.exists() else []
            return reply, [line for line in lines if not line.startswith("-- ")]

        try:
            with _profiled(profile):
                reply, statements = asyncio.run(twice())
        finally:
            http_app.pools.shutdown()
            app.close()
        return RequestCost(
            tuple(sorted(profile.files)), tuple(statements), reply, dict(profile.calls)
        )


def main() -> int:
    cost = measure()
    print(f"project files run: {len(cost.files)}")
    for name in cost.files:
        print(f"  {name}")
    print(f"SQL statements: {len(cost.statements)}")
    for statement in cost.statements:
        print(f"  {statement[:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Helpers shared by the MCP end-to-end tests: build a fixture index, drive a real server."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def initialize_params(version: str = "2025-06-18") -> dict[str, Any]:
    """The `params` of the tests' MCP `initialize` request."""
    return {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"},
    }


def initialize_request(request_id: int = 1) -> dict[str, Any]:
    """A whole `initialize` request, for tests that write it on the wire themselves."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": initialize_params(),
    }


def fixture_env(root: Path) -> dict[str, str]:
    """An environment that keeps every qmd file under `root`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_"))}
    env.update(
        HOME=str(root / "home"),
        XDG_CACHE_HOME=str(root / "home" / ".cache"),
        XDG_CONFIG_HOME=str(root / "home" / ".config"),
        INDEX_PATH=str(root / "index.sqlite"),
        QMD_CONFIG_DIR=str(root / "config"),
        NO_COLOR="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def build_fixture_index(root: Path) -> tuple[Path, dict[str, str]]:
    """Copy the fixture corpora under `root` and index them as fixtures/setup.json says."""
    setup = json.loads((FIXTURES / "setup.json").read_text(encoding="utf-8"))
    corpora = root / "corpora"
    shutil.copytree(FIXTURES / "corpora", corpora)
    env = fixture_env(root)
    from adapters.bootstrap import build_app

    app = build_app(env=env, with_models=False)
    try:
        for collection in setup["collections"]:
            folder = root / collection["path"]
            app.collections.add(str(folder), collection["name"], collection["mask"])
        for context in setup["contexts"]:
            app.collections.add_context(context["target"], context["text"])
        for name in setup["exclude"]:
            app.collections.set_included(name, False)
    finally:
        app.close()
    return corpora, env


class StdioServer:
    """A real `qmd mcp` process spoken to line by line."""

    def __init__(
        self,
        env: dict[str, str],
        *extra_args: str,
        cwd: Path = REPO,
        argv: list[str] | None = None,
    ) -> None:
        self.process = subprocess.Popen(
            argv or [sys.executable, "-m", "adapters.cli.main", "mcp", *extra_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 1000

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)

    def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def receive(self, timeout: float = 10.0) -> dict[str, Any]:
        line = self._lines.get(timeout=timeout)
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def silent_for(self, seconds: float) -> bool:
        try:
            self._lines.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        modern: bool = False,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None or modern:
            message["params"] = dict(params or {})
            if modern:
                message["params"]["_meta"] = MODERN_META
        self.send(message)
        reply = self.receive(timeout)
        assert reply.get("id") == self._next_id, reply
        return reply

    def call(
        self, tool: str, arguments: dict[str, Any], modern: bool = False, timeout: float = 10.0
    ) -> dict[str, Any]:
        reply = self.request("tools/call", {"name": tool, "arguments": arguments}, modern, timeout)
        result: dict[str, Any] = reply["result"]
        return result

    def initialize(self, version: str = "2025-06-18") -> dict[str, Any]:
        reply = self.request("initialize", initialize_params(version))
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def close(self, timeout: float = 10.0) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        start = time.monotonic()
        code = self.process.wait(timeout=timeout)
        self.elapsed_on_close = time.monotonic() - start
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

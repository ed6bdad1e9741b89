"""Adding an MCP surface: a test-only module registers one (tests/toy_surface.py) and the real
`qmd mcp` entry point serves it over stdio, with Session and the other surfaces untouched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.mcp_harness import REPO, StdioServer, build_fixture_index

TOY_MAIN = (
    "import sys, tests.toy_surface; from adapters.cli.main import main; "
    "sys.exit(main(sys.argv[1:]))"
)


class ToyServer:
    """`qmd mcp` started by a Python that imported the toy surface first."""

    @staticmethod
    def command(*args: str) -> list[str]:
        return [sys.executable, "-c", TOY_MAIN, "mcp", *args]


def test_a_registered_surface_is_served_over_stdio(tmp_path: Path) -> None:
    _corpora, env = build_fixture_index(tmp_path)
    # "plaything" is the toy surface's alias
    toy = StdioServer(env, argv=ToyServer.command("--surface", "plaything"))
    try:
        hello = toy.initialize()
        assert hello["result"]["serverInfo"] == {"name": "qmd", "version": "0.0.1-toy"}
        assert hello["result"]["instructions"] == "A toy surface."
        listed = toy.request("tools/list", {})["result"]["tools"]
        assert [tool["name"] for tool in listed] == ["count_documents"]
        total = toy.call("count_documents", {})
        assert int(total["content"][0]["text"]) > 0
        handbook = toy.call("count_documents", {"collection": "handbook"})
        assert 0 < int(handbook["content"][0]["text"]) <= int(total["content"][0]["text"])
        assert toy.call("count_documents", {"collection": "nope"})["content"][0]["text"] == (
            "toy: not-found"
        )
        bad = toy.call("count_documents", {"collection": 7})
        assert bad["isError"] is True and bad["content"][0]["text"].startswith("toy: bad")
        missing_name = toy.request("tools/call", {"arguments": {}})
        assert missing_name["error"]["code"] == -32602
        assert missing_name["error"]["message"].startswith("Invalid params: params.name")
    finally:
        toy.kill()
    # A connection whose first request is a 2026-07-28 one stays in that era (REQ-MCP-ERA-001).
    modern_toy = StdioServer(env, argv=ToyServer.command("--surface", "toy"))
    try:
        modern = modern_toy.request("tools/list", {}, modern=True)["result"]
        assert modern["tools"] == listed and modern["resultType"] == "complete"
    finally:
        modern_toy.kill()


def test_an_unknown_surface_is_a_usage_error(tmp_path: Path) -> None:
    _corpora, env = build_fixture_index(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", "mcp", "--surface", "nonesuch"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert (
        "Unknown MCP surface 'nonesuch'; available: compat-2.8.3, ldims, memorize, projmem, spec"
        in done.stderr
    )

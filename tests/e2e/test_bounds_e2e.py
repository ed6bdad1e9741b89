"""Bounded replies and bounded work over real `qmd mcp` processes, on both surfaces
(REQ-BOUND-*): a 3 MB document comes back as a bounded slice with a continuation, and
hostile arguments are refused naming their bound instead of keeping the server busy."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.mcp_harness import StdioServer, fixture_env

LINE = "0123456789 abcdefghijklmnopqrstuvwxyz"  # 37 characters
HUGE_LINES = 80_000  # about 3 MB


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bounds")
    docs = root / "docs"
    docs.mkdir()
    (docs / "huge.md").write_text(
        "\n".join(f"{n} {LINE}" for n in range(1, HUGE_LINES + 1)), encoding="utf-8"
    )
    for n in range(5):  # 5 x 240 KB: each fits maxBytes, together over the 1 MiB budget
        (docs / f"part{n}.md").write_text(("p" * 99 + "\n") * 2400, encoding="utf-8")
    env = fixture_env(root)
    from adapters.bootstrap import build_app

    app = build_app(env=env, with_models=False)
    try:
        app.collections.add(str(docs), "docs", "**/*.md")
    finally:
        app.close()
    return env


@pytest.fixture
def spec(env: dict[str, str]) -> Iterator[StdioServer]:
    server = StdioServer(env)
    server.initialize()
    yield server
    server.kill()


@pytest.fixture
def compat(env: dict[str, str]) -> Iterator[StdioServer]:
    server = StdioServer(env, "--compat", "2.8.3")
    server.initialize()
    yield server
    server.kill()


def _continuation(text: str) -> int:
    found = re.search(r"continue with fromLine: (\d+)\]$", text)
    assert found, text[-300:]
    return int(found.group(1))


def test_spec_get_of_a_huge_document_is_a_bounded_slice_that_can_be_continued(
    spec: StdioServer,
) -> None:
    text = spec.call("get", {"file": "docs/huge.md"})["content"][0]["resource"]["text"]
    assert len(text) <= 262_144 + 200
    following = _continuation(text)
    assert text.split("\n")[following - 2] == f"{following - 1} {LINE}"
    more = spec.call("get", {"file": "docs/huge.md", "fromLine": following})
    rest = more["content"][0]["resource"]["text"]
    assert rest.startswith(f"{following} {LINE}\n")
    assert _continuation(rest) > following


def test_spec_resource_read_of_a_huge_document_is_bounded(spec: StdioServer) -> None:
    reply = spec.request("resources/read", {"uri": "qmd://docs/huge.md"})
    text = reply["result"]["contents"][0]["text"]
    assert len(text) <= 262_144 + 200
    assert text.startswith(f"1: 1 {LINE}\n")
    assert _continuation(text) > 1000


def test_spec_multi_get_keeps_the_whole_reply_within_its_budget(spec: StdioServer) -> None:
    result = spec.call("multi_get", {"pattern": "docs/part*.md", "maxBytes": 262_144})
    resources = [c for c in result["content"] if c["type"] == "resource"]
    notices = [c["text"] for c in result["content"] if c["type"] == "text"]
    assert len(resources) == 4
    assert result["structuredContent"]["documents"] == 4
    assert result["structuredContent"]["skipped"] == 1
    assert sum(len(r["resource"]["text"]) for r in resources) <= 1_048_576
    assert notices == [
        "[SKIPPED: docs/part4.md - reply budget of 1048576 characters reached. "
        "Use 'qmd get' with file=\"docs/part4.md\" to retrieve.]"
    ]
    refused = spec.call("multi_get", {"pattern": "docs/*.md", "maxBytes": 10**9})
    assert refused["structuredContent"]["error"]["code"] == "invalid-argument"


def test_compat_get_and_multi_get_cut_at_one_mebibyte(compat: StdioServer) -> None:
    text = compat.call("get", {"file": "docs/huge.md"})["content"][0]["resource"]["text"]
    assert 1_000_000 < len(text) <= 1_048_576 + 200
    assert text.startswith(f"1: 1 {LINE}\n")
    _continuation(text)
    result = compat.call("multi_get", {"pattern": "docs/huge.md", "maxBytes": 10**9})
    assert len(result["content"][0]["resource"]["text"]) <= 1_048_576 + 200


@pytest.mark.parametrize("surface", ["spec", "compat"])
def test_hostile_arguments_are_refused_naming_the_bound(
    surface: str, request: pytest.FixtureRequest
) -> None:
    server: StdioServer = request.getfixturevalue(surface)
    search = "search" if surface == "spec" else "query"
    arguments = (
        {"query": "a b " * 3000}
        if surface == "spec"
        else {"searches": [{"type": "lex", "query": "a b " * 1000}], "rerank": False}
    )
    refusals = [
        server.call(search, arguments, timeout=5),
        server.call("multi_get", {"pattern": "x" * 700_000}, timeout=5),
        server.call("get", {"file": "y" * 700_000}, timeout=5),
    ]
    texts = [r["content"][0]["text"] for r in refusals]
    assert all(r.get("isError") for r in refusals), texts
    assert "(at most 4000)" in texts[0] or "(at most 128)" in texts[0]
    assert "pattern is too long: 700000 characters (at most 4096)" in texts[1]
    assert "document reference is too long: 700000 characters (at most 4096)" in texts[2]
    # a glob that backtracked for 29 s (issue 11) answers at once, and the server goes on
    name = "*a" * 30 + "*b"
    nothing = server.call("multi_get", {"pattern": name}, timeout=5)
    assert "No files matched pattern" in nothing["content"][0]["text"]
    assert server.request("tools/list")["result"]["tools"]

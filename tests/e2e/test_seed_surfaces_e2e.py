"""Seeds 000-003 as their users meet them, on real `qmd mcp` processes: a list the hard limit
cuts says so, `shutdown` ends the stdio session, every surface but compat names qmd's own
version, unknown arguments are refused, and projmem counts documents by `source_kind`
(issue 23; REQ-SPEC-BOUND-001, REQ-SPEC-SHUTDOWN-001, REQ-SPEC-VERSION-001,
REQ-SPEC-ARGS-001, REQ-PROJMEM-STATUS-001)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.bootstrap import build_app
from adapters.version import IMPLEMENTS, package_version
from tests.mcp_harness import StdioServer, build_fixture_index, fixture_env


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    _corpora, environment = build_fixture_index(tmp_path_factory.mktemp("seeds"))
    return environment


@pytest.fixture
def spawn(env: dict[str, str]) -> Iterator[Any]:
    started: list[StdioServer] = []

    def start(*args: str, environment: dict[str, str] | None = None) -> StdioServer:
        server = StdioServer(environment or env, *args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()


def test_a_list_the_hard_limit_cuts_says_truncated_and_remaining(spawn: Any) -> None:
    server = spawn("--max-results", "3")
    server.initialize()
    every = spawn()
    every.initialize()
    matched = len(
        every.call("search", {"query": "the", "limit": 20})["structuredContent"]["results"]
    )
    assert matched > 3  # the fixture has more than the limit to cut
    result = server.call("search", {"query": "the", "limit": 20})
    structured = result["structuredContent"]
    assert len(structured["results"]) == 3
    assert structured["truncated"] is True
    assert structured["remaining"] == matched - 3
    assert result["content"][0]["text"].endswith(
        f"[TRUNCATED: {matched - 3} more results; the server returns at most 3]"
    )
    within = server.call("search", {"query": "the", "limit": 2})["structuredContent"]
    assert within["truncated"] is False and "remaining" not in within


def test_shutdown_is_acknowledged_and_ends_the_stdio_session(spawn: Any) -> None:
    server = spawn()
    server.initialize()
    assert server.request("shutdown") == {"jsonrpc": "2.0", "id": server._next_id, "result": {}}
    # the process ends without its stdin being closed
    assert server.process.wait(timeout=30) == 0
    compat = spawn("--compat", IMPLEMENTS)
    compat.initialize()
    assert compat.request("shutdown")["error"]["code"] == -32601  # as the original answers


def _projmem_env(root: Path) -> dict[str, str]:
    """A folder with a note that names its `source_kind` and one that does not."""
    corpus = root / "corpus"
    (corpus / "code-notes").mkdir(parents=True)
    (corpus / "code-notes" / "auth.md").write_text(
        "---\ntitle: Auth\nsource_kind: code_note\n---\n# Auth\n\nTokens rotate.\n",
        encoding="utf-8",
    )
    (corpus / "plain.md").write_text("# Plain\n\nNo front matter here.\n", encoding="utf-8")
    environment = fixture_env(root)
    environment["QMD_SESSIONS_DIR"] = str(root / "claude")
    environment["QMD_SESSIONS_VAULT"] = str(root / "vault")
    (root / "claude").mkdir()
    app = build_app(env=environment, with_models=False)
    try:
        app.collections.add(str(corpus), "notes")
    finally:
        app.close()
    return environment


def test_every_surface_but_compat_names_qmds_own_version(spawn: Any, tmp_path: Path) -> None:
    own = package_version()
    for args in (("--surface", "spec"), ("--surface", "ldims")):
        hello = spawn(*args).initialize()["result"]
        assert hello["serverInfo"] == {"name": "qmd", "version": own}, args
    projmem = spawn("--surface", "projmem", environment=_projmem_env(tmp_path))
    assert projmem.initialize()["result"]["serverInfo"]["version"] == own
    compat = spawn("--compat", IMPLEMENTS).initialize()["result"]
    assert compat["serverInfo"]["version"] == IMPLEMENTS


def test_projmem_status_counts_documents_by_source_kind(spawn: Any, tmp_path: Path) -> None:
    server = spawn("--surface", "projmem", environment=_projmem_env(tmp_path))
    server.initialize()
    result = server.call("projmem_status", {})
    assert result["structuredContent"]["documentsByKind"] == {"code_note": 1, "note": 1}
    assert "Documents by source_kind:\n  code_note: 1\n  note: 1\n" in result["content"][0]["text"]


def test_unknown_arguments_are_refused_on_closed_schemas_only(spawn: Any, tmp_path: Path) -> None:
    ldims = spawn("--surface", "ldims")
    ldims.initialize()
    refused = json.loads(
        ldims.call("searchDocuments", {"query": "rate limits", "limit": 1})["content"][0]["text"]
    )
    assert refused["errorCode"] == "INVALID_INPUT"
    assert refused["errorDetails"]["field"] == "limit"
    projmem = spawn("--surface", "projmem", environment=_projmem_env(tmp_path))
    projmem.initialize()
    result = projmem.call("projmem_search", {"query": "tokens", "topk": 1})
    assert result["isError"] is True
    assert "topk: Unknown argument" in result["content"][0]["text"]
    compat = spawn("--compat", IMPLEMENTS)
    compat.initialize()
    ignored = compat.call("get", {"file": "handbook/journal/2026-01.md", "bogus": True})
    assert "isError" not in ignored  # the original ignores them (REQ-TOOL-CALL-004)


def test_shutdown_answers_requests_in_flight_first(spawn: Any) -> None:
    server = spawn()
    server.initialize()
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "status", "arguments": {}},
        }
    )
    server.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    replies = {server.receive(30)["id"], server.receive(30)["id"]}
    assert replies == {1, 2}
    assert server.process.wait(timeout=30) == 0

"""Seed 004's memory end to end (REQ-MEM-*): a real `qmd mcp --surface memorize` process, the
real MiniLM embedding model, and the official MCP client answering `sampling/createMessage`
through its sampling callback. Over stdio and over HTTP, in the 2025 era (the server sends the
sampling request) and the 2026-07-28 era (`input_required` and a retry), the whole loop: store
similar pairs, a fusion suggestion, merge, a knowledge record, `query_qa` without the merged
pairs, `knowledge://` with the fused text, and all of it still there after a restart."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.http_harness import HttpServer
from tests.mcp_harness import REPO, fixture_env

pytestmark = pytest.mark.models

EMBED_MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"
FUSED = "FUSED: install a package with `pip install NAME`; add --user for a per-user install."
TOPIC = "python packaging"
PAIRS = [
    ("How do I install a Python package with pip?", "Run pip install NAME.", TOPIC),
    (
        "How can I install a Python package using pip?",
        "Use pip install NAME, with --user for a per-user install.",
        "Python packaging",
    ),
    ("How long should I boil an egg?", "Nine minutes for a hard-boiled egg.", "cooking eggs"),
]


def memory_env(root: Path) -> dict[str, str]:
    if not EMBED_MODEL.is_file():
        pytest.fail(
            f"test model missing ({EMBED_MODEL.name}); run: python scripts/prepare_models.py"
        )
    (root / "home").mkdir(parents=True, exist_ok=True)
    env = fixture_env(root)
    env.update(QMD_EMBED_MODEL=str(EMBED_MODEL), QMD_MEMORY_DIR=str(root / "memory"))
    return env


class Sampler:
    """The client's LLM: answers every fusion request with FUSED and counts them."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def __call__(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        assert isinstance(content, types.TextContent)
        self.prompts.append(content.text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=FUSED),
            model="test-llm",
            stop_reason="endTurn",
        )


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error is not True, result
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def first_run(client: Client, sampler: Sampler) -> dict[str, Any]:
    stored = [
        structured(await client.call_tool("store_qa", {"question": q, "answer": a, "topic": t}))
        for q, a, t in PAIRS
    ]
    assert [s["created"] for s in stored] == [True, True, True]
    assert stored[1]["topic"]["name"] == TOPIC and stored[1]["topic"]["reused"] is True
    assert stored[2]["topic"]["name"] == "cooking eggs" and stored[2]["topic"]["reused"] is False
    assert stored[1]["thresholds"]["topic"] > 0
    suggestion = stored[1]["suggestion"]
    assert suggestion["mergeable"] is True
    assert [r["id"] for r in suggestion["records"]] == [stored[0]["id"]]
    again = structured(
        await client.call_tool(
            "store_qa", dict(zip(("question", "answer", "topic"), PAIRS[0], strict=True))
        )
    )
    assert again["created"] is False and again["id"] == stored[0]["id"]

    before = structured(
        await client.call_tool("query_qa", {"question": "install with pip", "context": TOPIC})
    )
    assert {a["id"] for a in before["answers"]} == {stored[0]["id"], stored[1]["id"]}

    merged = structured(await client.call_tool("merge_knowledge", {"topic": TOPIC}))
    assert len(sampler.prompts) == 1 and PAIRS[0][0] in sampler.prompts[0]
    assert len(merged["merged"]) == 1 and merged["skipped"] == []
    knowledge = merged["merged"][0]
    assert sorted(knowledge["sources"]) == sorted([stored[0]["id"], stored[1]["id"]])
    assert knowledge["text"] == FUSED
    return {"qa": [s["id"] for s in stored], "knowledge": knowledge}


async def check_state(client: Client, ids: dict[str, Any]) -> None:
    after = structured(
        await client.call_tool("query_qa", {"question": "install with pip", "context": TOPIC})
    )
    assert after["topic"] == TOPIC and after["answers"] == []  # the merged pairs are not searched
    eggs = structured(
        await client.call_tool("query_qa", {"question": "boil an egg", "context": "cooking eggs"})
    )
    assert [a["id"] for a in eggs["answers"]] == [ids["qa"][2]]
    nothing = structured(
        await client.call_tool(
            "query_qa", {"question": "x", "context": "quantum chromodynamics lattice QCD"}
        )
    )
    assert nothing["topic"] is None and nothing["answers"] == [] and "message" in nothing
    resource = await client.read_resource("knowledge://python%20packaging/pip%20install")
    text = resource.contents[0].text  # type: ignore[union-attr]
    assert FUSED in text and ids["knowledge"]["id"] in text


def files_of(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root / "memory").as_posix(): p.read_text(encoding="utf-8")
        for p in (root / "memory").rglob("*.md")
    }


def check_files(root: Path, ids: dict[str, Any]) -> None:
    files = files_of(root)
    knowledge = [t for p, t in files.items() if p.startswith("knowledge/")]
    assert len(knowledge) == 1 and FUSED in knowledge[0]
    assert f'"{ids["qa"][0]}"' in knowledge[0]
    merged = [t for p, t in files.items() if p.startswith("qa/") and "merged: true" in t]
    assert len(merged) == 2


def stdio_params(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "adapters.cli.main", "mcp", "--surface", "memorize"],
        env=env,
        cwd=str(REPO),
    )


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_memory_loop_over_stdio(tmp_path: Path, mode: str) -> None:
    env = memory_env(tmp_path)
    sampler = Sampler()
    async with Client(stdio_params(env), mode=mode, sampling_callback=sampler) as client:
        ids = await first_run(client, sampler)
        await check_state(client, ids)
    check_files(tmp_path, ids)
    async with Client(stdio_params(env), mode=mode, sampling_callback=sampler) as client:
        await check_state(client, ids)  # a new process: everything is still there
    check_files(tmp_path, ids)


@pytest.mark.postgres
async def test_memory_loop_with_the_index_in_postgresql(tmp_path: Path) -> None:
    """The same loop with the index (and the memory's rows) in PostgreSQL: the rows in the
    database, the files in the memory folder, both still there for a new process."""
    from tests.postgres_server import drop_schema, fresh_schema_url

    url, schema = fresh_schema_url()
    env = {**memory_env(tmp_path), "INDEX_PATH": url}
    sampler = Sampler()
    try:
        async with Client(stdio_params(env), sampling_callback=sampler) as client:
            ids = await first_run(client, sampler)
            await check_state(client, ids)
        check_files(tmp_path, ids)
        async with Client(stdio_params(env), sampling_callback=sampler) as client:
            await check_state(client, ids)
        assert not (tmp_path / "index.sqlite").exists()
        from adapters.postgres.store import PostgresIndex

        pg = PostgresIndex.open(url)
        try:  # three pairs and the knowledge record; two topics (the second pair reuses one)
            assert len(pg.memory_files()) == 4 and len(pg.memory_topics()) == 2
        finally:
            pg.close()
    finally:
        drop_schema(schema)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_memory_loop_over_http(tmp_path: Path, mode: str) -> None:
    env = memory_env(tmp_path)
    sampler = Sampler()
    args = ["mcp", "--http", "--port", "0", "--surface", "memorize"]
    server = HttpServer(args, env).start()
    try:
        async with Client(server.url, mode=mode, sampling_callback=sampler) as client:
            ids = await first_run(client, sampler)
            await check_state(client, ids)
    finally:
        server.stop()
    check_files(tmp_path, ids)
    server = HttpServer(args, env).start()
    try:
        async with Client(server.url, mode=mode, sampling_callback=sampler) as client:
            await check_state(client, ids)
    finally:
        server.stop()


def test_a_missing_embedding_model_is_model_unavailable_at_once(tmp_path: Path) -> None:
    """REQ-MEM-INPUT-002: no model file, every tool fails at once and nothing is written."""
    import time

    from tests.mcp_harness import StdioServer

    env = memory_env(tmp_path)
    env["QMD_EMBED_MODEL"] = str(tmp_path / "missing.gguf")
    server = StdioServer(env, "--surface", "memorize")
    try:
        server.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"sampling": {}},
                "clientInfo": {"name": "e2e", "version": "1"},
            },
        )
        began = time.monotonic()
        for tool, arguments in (
            ("store_qa", {"question": "q?", "answer": "a", "topic": "t"}),
            ("query_qa", {"question": "q?", "context": "t"}),
            ("merge_knowledge", {}),
        ):
            result = server.call(tool, arguments, timeout=60)
            assert result["isError"] is True
            assert result["structuredContent"]["error"]["code"] == "model-unavailable", result
        assert time.monotonic() - began < 10
    finally:
        server.close()
    assert files_of(tmp_path) == {}


@pytest.mark.original
def test_records_are_a_collection_hand_edits_reembed_and_the_original_opens_the_index(
    tmp_path: Path,
) -> None:
    """The memory folder is a QMD collection (our search finds records at once), `qmd update`
    re-embeds a record edited by hand, and the original QMD still opens the index and sees
    the records (REQ-MEM-STORE-001/004/006)."""
    import sqlite3
    import subprocess

    from tests.mcp_harness import StdioServer
    from tests.original import original_qmd

    original = original_qmd(tmp_path / "home")
    env = memory_env(tmp_path)
    env.update(
        HOME=str(original.home),
        INDEX_PATH=str(original.db_path),
        QMD_CONFIG_DIR=str(original.config_path.parent),
    )
    server = StdioServer(env, "--surface", "memorize")
    server.initialize()
    for question, answer, topic in PAIRS[1:]:
        result = server.call(
            "store_qa", {"question": question, "answer": answer, "topic": topic}, timeout=120
        )
        assert result.get("isError") is not True, result
    server.close()

    def ours(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "adapters.cli.main", *args],
            env=env,
            cwd=str(REPO),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "memory/qa/cooking-eggs/" in ours("search", "boiled", "--json")
    (egg,) = [p for p in (tmp_path / "memory").rglob("*.md") if "cooking-eggs" in p.as_posix()]
    with sqlite3.connect(original.db_path) as db:
        before = db.execute(
            "SELECT vector FROM memory_records WHERE path LIKE 'qa/cooking%'"
        ).fetchone()
    egg.write_text(
        egg.read_text(encoding="utf-8").replace(
            "How long should I boil an egg?", "How long do I poach an egg?"
        ),
        encoding="utf-8",
    )
    assert "Memory: 1 record(s) repaired or re-embedded." in ours("update")
    with sqlite3.connect(original.db_path) as db:
        after, record = db.execute(
            "SELECT vector, record FROM memory_records WHERE path LIKE 'qa/cooking%'"
        ).fetchone()
    assert after != before and "poach" in record
    status = original.run("status")
    assert "memory" in status, status
    found = original.run("search", "poach", "--json")
    assert "cooking-eggs" in found, found


def test_subscribers_hear_when_a_topic_gets_knowledge(tmp_path: Path) -> None:
    """REQ-MEM-RES-003 over 2025-era stdio, spoken line by line: the sampling request goes out
    on stdout, our answer comes back on stdin, and the subscriber of the topic's knowledge://
    URI is told it changed before the tool's result arrives; another topic's subscriber is not."""
    from tests.mcp_harness import StdioServer

    server = StdioServer(memory_env(tmp_path), "--surface", "memorize")
    try:
        server.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"sampling": {}},
                "clientInfo": {"name": "e2e", "version": "1"},
            },
        )
        watched = "knowledge://Python%20packaging/pip"
        assert server.request("resources/subscribe", {"uri": watched})["result"] == {}
        assert server.request("resources/subscribe", {"uri": "knowledge://cooking%20eggs/x"})
        for question, answer, topic in PAIRS:
            server.call(
                "store_qa", {"question": question, "answer": answer, "topic": topic}, timeout=120
            )
        server.send(
            {
                "jsonrpc": "2.0",
                "id": "merge",
                "method": "tools/call",
                "params": {"name": "merge_knowledge", "arguments": {"topic": TOPIC}},
            }
        )
        asked = server.receive(timeout=120)
        assert asked["method"] == "sampling/createMessage" and isinstance(asked["id"], str)
        assert asked["params"]["maxTokens"] == 1024
        server.send(
            {
                "jsonrpc": "2.0",
                "id": asked["id"],
                "result": {
                    "role": "assistant",
                    "content": {"type": "text", "text": FUSED},
                    "model": "m",
                },
            }
        )
        told = server.receive(timeout=60)
        assert told == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": watched},
        }
        reply = server.receive(timeout=60)
        assert reply["id"] == "merge" and len(reply["result"]["structuredContent"]["merged"]) == 1
        assert server.silent_for(0.5)
    finally:
        server.close()


async def test_a_2025_http_client_without_sampling_gets_a_clear_error(tmp_path: Path) -> None:
    """REQ-MEM-MERGE-004 on stateless 2025-era HTTP, where initialize's capabilities are not
    known: the official client without a sampling callback refuses the request, the tool says
    so with `unavailable`, and no file changes."""
    env = memory_env(tmp_path)
    server = HttpServer(["mcp", "--http", "--port", "0", "--surface", "memorize"], env).start()
    try:
        async with Client(server.url, mode="legacy") as client:
            for q, a, t in PAIRS[:2]:
                structured(
                    await client.call_tool("store_qa", {"question": q, "answer": a, "topic": t})
                )
            before = files_of(tmp_path)
            result = await client.call_tool("merge_knowledge", {"topic": TOPIC})
            assert result.is_error is True and result.structured_content is not None
            assert result.structured_content["error"]["code"] == "unavailable"
            assert files_of(tmp_path) == before
    finally:
        server.stop()

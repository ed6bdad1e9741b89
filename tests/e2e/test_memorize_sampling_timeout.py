"""A slow client LLM, end to end (REQ-MEM-SAMPLING-001/002): a real `qmd mcp --surface
memorize` process with the real embedding model and a 1 s request time limit, and the official
MCP client whose sampling callback takes 4 s, as a CPU model does (one took 92 s against the
default 30 s limit). `merge_knowledge` waits under the sampling time limit instead, merges the
group, and the client hears progress with its token while its LLM works. Over stdio and over
Streamable HTTP, in the 2025 era (the one where the server waits on the client)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.e2e.test_memorize_e2e import PAIRS, TOPIC, memory_env
from tests.http_harness import HttpServer
from tests.mcp_harness import REPO

pytestmark = pytest.mark.models

LIMITS = ["--request-timeout", "1", "--sampling-timeout", "60"]
THINKS_S = 4.0
FUSED = "FUSED slowly: pip install NAME, --user for a per-user install."


class SlowSampler:
    """The client's LLM: answers every fusion request after THINKS_S seconds."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked += 1
        await asyncio.sleep(THINKS_S)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=FUSED),
            model="slow-llm",
            stop_reason="endTurn",
        )


async def store_pairs(client: Client) -> None:
    """Under the default limits: the first call loads the embedding model."""
    for question, answer, topic in PAIRS[:2]:
        stored = await client.call_tool(
            "store_qa", {"question": question, "answer": answer, "topic": topic}
        )
        assert stored.is_error is not True, stored


async def merge_slowly(client: Client, sampler: SlowSampler) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def heard(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    began = time.monotonic()
    merged = await client.call_tool("merge_knowledge", {"topic": TOPIC}, progress_callback=heard)
    took = time.monotonic() - began
    assert merged.is_error is not True, merged
    content = merged.structured_content
    assert content is not None and content["skipped"] == [], content
    assert [k["text"] for k in content["merged"]] == [FUSED]
    assert sampler.asked == 1 and took >= THINKS_S
    # every half request limit (0.5 s) while the LLM works: about 8; at least a few
    assert len(progress) >= 4, progress
    values = [value for value, _total, _message in progress]
    assert values == sorted(set(values))
    assert all(total is None for _value, total, _message in progress)
    assert all("sampling/createMessage" in (message or "") for *_rest, message in progress)


def stdio_server(env: dict[str, str], *limits: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "adapters.cli.main", "mcp", "--surface", "memorize", *limits],
        env=env,
        cwd=str(REPO),
    )


async def test_a_slow_llm_merges_over_stdio_with_progress(tmp_path: Path) -> None:
    env = memory_env(tmp_path)
    async with Client(stdio_server(env), mode="legacy") as client:
        await store_pairs(client)
    sampler = SlowSampler()  # a new process, with the short request limit
    async with Client(stdio_server(env, *LIMITS), mode="legacy", sampling_callback=sampler) as c:
        await merge_slowly(c, sampler)


async def test_a_slow_llm_merges_over_http_with_progress(tmp_path: Path) -> None:
    env = memory_env(tmp_path)
    async with Client(stdio_server(env), mode="legacy") as client:
        await store_pairs(client)
    args = ["mcp", "--http", "--port", "0", "--surface", "memorize", *LIMITS]
    server = HttpServer(args, env).start()
    sampler = SlowSampler()
    try:
        async with Client(server.url, mode="legacy", sampling_callback=sampler) as client:
            await merge_slowly(client, sampler)
    finally:
        assert server.stop() == 0

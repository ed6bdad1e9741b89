"""Query expansion that cannot hurt, on a real `qmd mcp` process: a generator that repeats
itself is searched once per distinct expansion (REQ-SEARCH-EXPAND-DISTINCT-001), and one
slower than the request's time limit allows is skipped, the answer coming in time from the
caller's query (REQ-SEARCH-EXPAND-TIME-001).

The models are a fake OpenAI-compatible server on loopback (the project's remote-model
adapters talk to it as to any other): word-hash embeddings (tests/model_fakes.py) and a chat
endpoint that answers a scripted expansion, at once or after a delay."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.e2e.test_projmem_stdio import projmem_env
from tests.fake_openai import FakeOpenAI, serve
from tests.mcp_harness import REPO, StdioServer

QUERY = "zebra migration habits"  # no keyword of the corpus: no strong signal, so it expands
SLOW_QUERY = "zebra grazing lands"  # another query: QUERY's expansion is in the cache by then
REPEATED = [
    *[{"type": "vec", "query": "why zebras migrate across the plains"}] * 65,
    {"type": "vec", "query": "Why zebras migrate across the plains?"},
    {"type": "hyde", "query": "WHY ZEBRAS MIGRATE ACROSS THE PLAINS"},
    {"type": "lex", "query": "Zebra, migration habits"},  # the caller's query itself
    {"type": "lex", "query": "zebra herds"},
    {"type": "lex", "query": "ZEBRA HERDS"},
]


@pytest.fixture(scope="module")
def models() -> Iterator[type[FakeOpenAI]]:
    server, handler = serve(models=("hashed", "expander"), expansion=REPEATED)
    yield handler
    server.shutdown()


@pytest.fixture(scope="module")
def index_env(tmp_path_factory: pytest.TempPathFactory, models: type[FakeOpenAI]) -> dict[str, str]:
    """The projmem corpus and sessions, embedded with the fake server's vectors."""
    env = projmem_env(tmp_path_factory.mktemp("expansion"))
    url = models.url
    env["QMD_EMBED_MODEL"] = f"openai:hashed@{url}"
    env["QMD_GENERATE_MODEL"] = f"openai:expander@{url}?retries=1"
    embedded = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", "embed"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert embedded.returncode == 0, embedded.stderr
    return env


def test_a_repeating_generator_is_searched_once_per_distinct_expansion(
    index_env: dict[str, str], models: type[FakeOpenAI]
) -> None:
    models.expansion, models.chat_delay_s = REPEATED, 0.0
    server = StdioServer(index_env, "--surface", "projmem")
    try:
        server.initialize()
        result = server.call(
            "projmem_deep_search", {"query": QUERY, "skipReranking": True}, timeout=60
        )
    finally:
        server.kill()
    structured = result["structuredContent"]
    listed = [(e["type"], e["query"]) for e in structured["expandedQueries"]]
    assert listed == [("vec", "why zebras migrate across the plains"), ("lex", "zebra herds")]
    stages = {stage["name"]: stage for stage in structured["stages"]}
    assert stages["query_expansion"]["out"] == len(listed)
    assert stages["query_embedding"]["in"] == stages["vector_search"]["in"] == 1 + 1
    assert stages["bm25_search"]["in"] == 1 + 1


@pytest.mark.slow  # waits on real time by design: left out of `make test-fast`
def test_a_slow_generator_leaves_the_answer_in_time(
    index_env: dict[str, str], models: type[FakeOpenAI]
) -> None:
    """The generator answers after 30 s; the request limit is 3 s. `query` and `vsearch` on
    the default surface and projmem's deep search answer before it, from the caller's query,
    and say that the expansion was skipped (before: error -32001 at 3 s)."""
    models.expansion, models.chat_delay_s = REPEATED, 30.0
    calls_before = models.chats
    spec = StdioServer({**index_env, "QMD_REQUEST_TIMEOUT": "3"})
    projmem = StdioServer({**index_env, "QMD_REQUEST_TIMEOUT": "3"}, "--surface", "projmem")
    try:
        spec.initialize()
        projmem.initialize()
        for tool, arguments in (
            ("query", {"query": SLOW_QUERY, "rerank": False, "minScore": 0}),
            ("vsearch", {"query": SLOW_QUERY, "minScore": 0}),
        ):
            began = time.monotonic()
            reply = spec.request("tools/call", {"name": tool, "arguments": arguments}, timeout=30)
            assert time.monotonic() - began < 3.0, tool
            assert "result" in reply, reply  # not -32001
            structured = reply["result"]["structuredContent"]
            assert structured["results"], (tool, structured)
            (degraded,) = structured["degraded"]
            assert degraded["stage"] == "expansion" and "time limit" in degraded["reason"]
        began = time.monotonic()
        result = projmem.call(
            "projmem_deep_search", {"query": SLOW_QUERY, "skipReranking": True}, timeout=30
        )
        assert time.monotonic() - began < 3.0
    finally:
        spec.kill()
        projmem.kill()
    structured = result["structuredContent"]
    stages = {stage["name"]: stage for stage in structured["stages"]}
    assert stages["query_expansion"]["skipped"] is True
    assert "time limit" in stages["query_expansion"]["why"], stages["query_expansion"]
    assert structured["expandedQueries"] == [] and structured["count"] >= 1
    assert stages["vector_search"]["in"] == 1  # the caller's query alone
    assert models.chats - calls_before == 3

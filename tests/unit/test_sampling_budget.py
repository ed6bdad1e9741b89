"""A call that waits on the client has the sampling time limit, not the request one, and tells
a client that asked for progress that it is still waiting (REQ-MEM-SAMPLING-001/002): the
budget chosen from a tool's declared facts, and the concurrent stdio transport over the
memorize surface on fakes, whose client answers late or never."""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from typing import Any

import pytest

from adapters.http.app import HttpSettings, OriginPolicy, QmdHttpApp
from adapters.mcp.memorize import MemorizeSurface
from adapters.mcp.outgoing import Correlator
from adapters.mcp.protocol import Session
from adapters.mcp.stdio import serve_stdio
from adapters.mcp.tools import (
    CLIENT_BUDGET,
    OWN_BUDGET,
    OWN_TIMEOUT_GRACE_S,
    Budgets,
    ToolFacts,
    tool,
)
from adapters.mcp.workers import Worker, WorkerPools
from domain.profiles import SEED_000
from domain.usecases.memorize import Memorizer, Thresholds
from tests.fakes import FixedClock, InMemoryMemoryStore, InMemoryStore, app_over
from tests.model_fakes import FakeEmbedder
from tests.toy_surface import ToySurface
from tests.unit.test_http_app import ACCEPT, _events, _request

PLAIN = ToolFacts()
OWN = ToolFacts(budget=OWN_BUDGET)
WAITS = ToolFacts(runs_model=True, waits_on_client=True, budget=CLIENT_BUDGET)
MEMORIZE_FACTS = MemorizeSurface.facts


def test_each_budget_comes_from_the_tool_facts() -> None:
    budgets = Budgets(request_s=30.0, sampling_s=300.0)
    assert budgets.time_limit(PLAIN) == 30.0
    assert budgets.time_limit(OWN) == 30.0 + OWN_TIMEOUT_GRACE_S
    assert budgets.time_limit(WAITS) == 300.0
    # 2026-07-28: the server never waits on the client (input_required), so the request's
    assert budgets.time_limit(WAITS, modern=True) == 30.0
    assert budgets.time_limit(PLAIN, modern=True) == 30.0


def test_no_request_limit_leaves_the_sampling_one() -> None:
    budgets = Budgets(request_s=None, sampling_s=120.0)
    assert budgets.time_limit(PLAIN) is None and budgets.time_limit(OWN) is None
    assert budgets.time_limit(WAITS) == 120.0
    assert budgets.time_limit(WAITS, modern=True) is None


def test_memorize_declares_that_merge_waits_on_the_client() -> None:
    budgets = Budgets(request_s=30.0, sampling_s=600.0)
    assert budgets.time_limit(MEMORIZE_FACTS.tool("merge_knowledge")) == 600.0
    assert budgets.time_limit(MEMORIZE_FACTS.tool("store_qa")) == 30.0


def test_progress_comes_at_least_twice_within_the_request_limit() -> None:
    assert Budgets(request_s=30.0).progress_every_s == 5.0
    assert Budgets(request_s=2.0).progress_every_s == 1.0
    assert Budgets(request_s=None).progress_every_s == 5.0
    assert Budgets(request_s=0.01).progress_every_s == 0.1


class Client:
    """A 2025-era client over two pipes to `serve_stdio` with worker pools and time limits."""

    def __init__(self, request_s: float, sampling_s: float) -> None:
        self.memory = Memorizer(
            InMemoryMemoryStore(), FakeEmbedder(), FixedClock(), Thresholds(0.5, 0.5)
        )
        services = app_over(InMemoryStore()).services()

        def worker() -> Worker:  # the fakes are shared; each worker has its own session
            return Worker(
                Session(MemorizeSurface(self.memory, "t")), services, lambda: None, lambda: None
            )

        self.pools = WorkerPools(worker, threads=2, model_threads=1)
        server_in, self._to_server = os.pipe()
        self._from_server, server_out = os.pipe()
        self._writer = os.fdopen(self._to_server, "wb", buffering=0)
        stdin = os.fdopen(server_in, "rb")
        self._stdout = os.fdopen(server_out, "wb", buffering=0)
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.thread = threading.Thread(
            target=serve_stdio,
            args=(Session(MemorizeSurface(self.memory, "t")), stdin, self._stdout),
            kwargs={"pools": self.pools, "timeout_s": request_s, "sampling_timeout_s": sampling_s},
            daemon=True,
        )
        self.thread.start()
        threading.Thread(target=self._read, daemon=True).start()
        init = {"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}}
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        assert self.receive()["id"] == 1
        for n, question in enumerate(("how to install pip packages", "how to install pip now")):
            self.call(10 + n, "store_qa", {"question": question, "answer": "pip", "topic": "pip"})
            assert self.receive()["id"] == 10 + n

    def _read(self) -> None:
        with os.fdopen(self._from_server, "rb") as out:
            for line in out:
                self.messages.put(json.loads(line))

    def send(self, message: dict[str, Any]) -> None:
        self._writer.write(json.dumps(message).encode() + b"\n")

    def receive(self, timeout: float = 10.0) -> dict[str, Any]:
        return self.messages.get(timeout=timeout)

    def call(self, request_id: int, tool: str, arguments: dict[str, Any], **extra: Any) -> None:
        params = {"name": tool, "arguments": arguments, **extra}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    def close(self) -> None:
        self._writer.close()
        self.thread.join(timeout=10)
        self._stdout.close()


@pytest.fixture
def client() -> Any:
    made: list[Client] = []

    def make(request_s: float, sampling_s: float) -> Client:
        made.append(Client(request_s, sampling_s))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_a_late_sampling_answer_within_the_sampling_limit_is_merged_with_progress(
    client: Any,
) -> None:
    """The client's LLM answers after four request time limits: the call goes on (the
    sampling limit is 10 s), and meanwhile the client hears progress with its token."""
    served = client(request_s=0.3, sampling_s=10.0)
    served.call(20, "merge_knowledge", {"topic": "pip"}, _meta={"progressToken": "merge-1"})
    asked = served.receive()
    assert asked["method"] == "sampling/createMessage"
    time.sleep(1.2)  # the LLM thinks
    content = {"type": "text", "text": "use pip"}
    served.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"content": content}})
    notes: list[dict[str, Any]] = []
    while "id" not in (message := served.receive()):
        notes.append(message)
    assert message["id"] == 20, message
    assert message["result"]["structuredContent"]["merged"][0]["text"] == "use pip"
    assert len(notes) >= 3, notes  # every 0.15 s (half the request limit) for 1.2 s
    assert {n["method"] for n in notes} == {"notifications/progress"}
    assert {n["params"]["progressToken"] for n in notes} == {"merge-1"}
    progress = [n["params"]["progress"] for n in notes]
    assert progress == sorted(set(progress)) and progress[0] > 0  # always increasing
    assert "sampling/createMessage" in notes[0]["params"]["message"]
    assert all("total" not in n["params"] for n in notes)  # the wait has no known end


def test_no_progress_token_no_progress(client: Any) -> None:
    served = client(request_s=0.2, sampling_s=10.0)
    served.call(20, "merge_knowledge", {"topic": "pip"})
    asked = served.receive()
    time.sleep(0.6)
    content = {"type": "text", "text": "use pip"}
    served.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"content": content}})
    reply = served.receive()  # the first message after the question is the answer
    assert reply["id"] == 20 and reply["result"]["structuredContent"]["merged"]


@pytest.mark.slow  # waits on real time by design: left out of `make test-fast`
def test_a_client_that_never_answers_meets_the_sampling_limit(client: Any) -> None:
    """The sampling limit bounds the whole call: the wait ends a little before it (a tenth of
    what is left, at most 1 s), so the tool answers in time that nothing was merged and why."""
    served = client(request_s=0.2, sampling_s=3.0)
    began = time.monotonic()
    served.call(20, "merge_knowledge", {"topic": "pip"})
    assert served.receive()["method"] == "sampling/createMessage"
    reply = served.receive()
    took = time.monotonic() - began
    assert reply["id"] == 20 and "result" in reply, reply
    result = reply["result"]["structuredContent"]
    assert result["merged"] == [] and "did not answer" in result["skipped"][0]["reason"]
    assert 2.4 < took < 3.0, took
    assert [r.merged for r in served.memory._store.records()] == [False, False]


def test_the_sampling_limit_is_a_service_setting(tmp_path: Any) -> None:
    """--sampling-timeout, then QMD_SAMPLING_TIMEOUT (also from --env-file), then 300 s."""
    from adapters.config.service import resolve_settings
    from domain.errors import INVALID_ARGUMENT, QmdError

    assert resolve_settings({}, {}).sampling_timeout_s == 300.0
    path = tmp_path / "service.env"
    path.write_text("QMD_SAMPLING_TIMEOUT=900\n", encoding="utf-8")
    assert resolve_settings({}, {}, str(path)).sampling_timeout_s == 900.0
    environ = {"QMD_SAMPLING_TIMEOUT": "120"}
    assert resolve_settings({}, environ, str(path)).sampling_timeout_s == 120.0
    assert resolve_settings({"sampling_timeout": 45.0}, environ).sampling_timeout_s == 45.0
    with pytest.raises(QmdError) as refused:
        resolve_settings({}, {"QMD_SAMPLING_TIMEOUT": "0"})
    assert refused.value.code == INVALID_ARGUMENT
    assert "QMD_SAMPLING_TIMEOUT" in refused.value.message


class WaitingSurface(ToySurface):
    """`fuse` waits on the client (as its facts say) for as long as the test lets it."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__(app_over(InMemoryStore()).services())
        self.gate = gate

    @tool("fuse", "Waits on the client.", schema={"type": "object"}, example={}, facts=WAITS)
    def _fuse(self, _args: dict[str, Any]) -> dict[str, Any]:
        self.gate.wait(10)
        return {"content": [{"type": "text", "text": "late"}]}


async def test_a_streamed_http_call_meets_the_sampling_limit_not_the_request_one() -> None:
    """2025-era HTTP streams a call that waits on the client: it outlives the request limit
    (0.1 s) and is answered with the timeout error in its stream at the sampling limit."""
    gate = threading.Event()
    surface = WaitingSurface(gate)

    def worker() -> Worker:
        return Worker(Session(surface), surface._services, lambda: None, lambda: None)

    settings = HttpSettings(
        policy=OriginPolicy.build("localhost", {}),
        profile=SEED_000,
        strict_original=False,
        timeout_s=0.1,
        sampling_timeout_s=0.6,
    )
    pools = WorkerPools(worker, threads=2, model_threads=1)
    app = QmdHttpApp(pools, settings, Correlator("t"), WaitingSurface.facts)
    call = {"name": "fuse", "arguments": {}}
    body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": call})
    began = time.monotonic()
    try:
        reply = await _request(app, "POST", "/mcp", body.encode(), ACCEPT)
        took = time.monotonic() - began
        assert _events(reply) == [
            {
                "jsonrpc": "2.0",
                "id": 5,
                "error": {"code": -32001, "message": "Request timed out after 0.6 s"},
            }
        ]
        assert 0.5 < took < 5, took
    finally:
        gate.set()
        pools.shutdown()

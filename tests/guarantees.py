"""Every registered surface on fakes, for the guarantee tests generated from the registry
(tests/unit/test_tool_facts.py, tests/unit/test_guarantee_matrix.py).

A `Rig` wires one surface through the composition root (`assemble`) over in-memory adapters
and model fakes that block on a gate until the test opens it, so a call that reaches a model
stays in flight as long as the test needs. `model_call` picks, from the surface's own tool
list and declared facts, a call that runs a model; `sample_arguments` makes its arguments
from the tool's input schema. A new surface is covered by registering it.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.bootstrap import ProjmemAdapters, assemble
from adapters.http.app import HttpSettings, QmdHttpApp
from adapters.http.exchange import HttpReply
from adapters.http.guard import OriginPolicy
from adapters.mcp.dispatch import Dispatcher
from adapters.mcp.outgoing import Correlator
from adapters.mcp.protocol import Session
from adapters.mcp.registry import SurfaceContext, create_surface, surface_facts, surface_names
from adapters.mcp.workers import Worker, WorkerPools
from adapters.models.bundle import Models
from domain.model import Collection, SubQuery
from domain.profiles import SEED_000
from domain.usecases.memorize import Memorizer, Thresholds
from tests.fakes import (
    FakeContentSource,
    FixedClock,
    InMemoryChunkIndex,
    InMemoryConfigRepository,
    InMemoryMemoryStore,
    InMemorySessions,
    InMemoryStore,
)
from tests.model_fakes import FakeEmbedder, FakeExpander, FakeReranker

MODERN = "2026-07-28"
QUERY_TEXT = "zebra quantum"  # matches nothing lexically: every search goes on to its models
WAIT_S = 10.0


class Gate:
    """Shared by a rig's model fakes: shut, a model call waits; `entered` counts arrivals."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered = threading.Semaphore(0)

    def wait(self) -> None:
        self.entered.release()
        if not self.open.wait(WAIT_S * 3):
            raise TimeoutError("the test never opened the model gate")

    def reached(self, timeout: float = WAIT_S) -> bool:
        return self.entered.acquire(timeout=timeout)


class GatedEmbedder(FakeEmbedder):
    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.gate.wait()
        return super().embed_queries(texts)


class GatedExpander(FakeExpander):
    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    def expand(self, query: str) -> list[SubQuery]:
        self.gate.wait()
        return super().expand(query)


class GatedReranker(FakeReranker):
    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.gate.wait()
        return super().rerank(query, documents)


class MemoryNotes:
    """NoteWriter in memory (the session vault)."""

    def __init__(self) -> None:
        self.notes: dict[str, str] = {}

    @property
    def folder(self) -> str:
        return "/vault"

    def write_note(self, name: str, text: str) -> str:
        self.notes[name] = text
        return name


@dataclass
class Rig:
    surface_name: str
    gate: Gate = field(default_factory=Gate)

    def __post_init__(self) -> None:
        store = InMemoryStore()
        store.put_collection(Collection("notes", "/notes"))
        body = "# Alpha\n\nThe alpha note.\n"
        store.upsert_document("notes", "alpha.md", "Alpha", "a1" * 32, body, "t", "t")
        vector = FakeEmbedder().embed_documents([("Alpha", body)])[0]
        store.store_chunk_vectors("a1" * 32, [(0, 0, vector)], "fake-embed", "", "t")
        chunks = InMemoryChunkIndex(store)
        models = Models(
            embedder=GatedEmbedder(self.gate),
            reranker=GatedReranker(self.gate),
            expander=GatedExpander(self.gate),
        )
        self.app = assemble(
            store=store,
            lexical=store,
            vectors=store,
            cache=store,
            config=InMemoryConfigRepository([Collection("notes", "/notes")]),
            source=FakeContentSource({}),
            clock=FixedClock(),
            models=models,
            maintenance=store,
            metadata=store,
            projmem=ProjmemAdapters(chunks, chunks, InMemorySessions(), chunks, MemoryNotes()),
        )
        self.services = self.app.services()
        self.memory_store = InMemoryMemoryStore()
        self.memory = Memorizer(
            self.memory_store, GatedEmbedder(self.gate), FixedClock(), Thresholds(0.5, 0.5)
        )
        self.context = SurfaceContext("test", memory=lambda: self.memory)
        self.facts = surface_facts(self.surface_name)
        # as the HTTP service shares one across its workers (adapters/http/main.py)
        self.outgoing = Correlator("test") if self.facts.talks_back else None

    def session(self, stateless: bool = False) -> Session:
        return Session(
            create_surface(self.surface_name, self.services, self.context), stateless=stateless
        )

    def pools(self, model_threads: int = 1, model_queue: int = 0) -> WorkerPools:
        def worker() -> Worker:  # the fakes are shared between workers
            session = self.session(stateless=True)
            session.outgoing = self.outgoing
            return Worker(session, self.services, lambda: None, lambda: None)

        return WorkerPools(worker, threads=4, model_threads=model_threads, model_queue=model_queue)

    def tools(self) -> list[dict[str, Any]]:
        return self.session().surface.tools()

    def http(
        self, pools: WorkerPools, timeout_s: float = 30.0, sampling_timeout_s: float = 300.0
    ) -> QmdHttpApp:
        settings = HttpSettings(
            policy=OriginPolicy.build("localhost", {}),
            profile=SEED_000,
            strict_original=False,
            timeout_s=timeout_s,
            sampling_timeout_s=sampling_timeout_s,
        )
        return QmdHttpApp(pools, settings, self.outgoing, self.facts)


def sample_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that pass `schema`: every required property, from its type or default, and
    the search text (`query`) where a tool takes one without requiring it."""
    properties = schema.get("properties", {})
    arguments: dict[str, Any] = {}
    wanted = [*schema.get("required", []), *(["query"] if "query" in properties else [])]
    for name in dict.fromkeys(wanted):
        spec = properties.get(name, {})
        if "default" in spec:
            arguments[name] = spec["default"]
        elif spec.get("type") == "string":
            arguments[name] = QUERY_TEXT
        elif spec.get("type") in ("number", "integer"):
            arguments[name] = spec.get("minimum", 1)
        elif spec.get("type") == "boolean":
            arguments[name] = False
        elif spec.get("type") == "array":
            arguments[name] = []
        else:
            arguments[name] = {}
    return arguments


def model_calls(rig: Rig) -> list[tuple[str, dict[str, Any]]]:
    """Every tool of the surface whose declared facts say these arguments run a model."""
    calls = []
    for tool in rig.tools():
        arguments = sample_arguments(tool["inputSchema"])
        if rig.facts.tool(tool["name"]).may_run_model(arguments):
            calls.append((tool["name"], arguments))
    return calls


def served_surfaces() -> list[str]:
    return surface_names()


# -- stdio: a Dispatcher over a connection session, replies in a queue ------------------------


class Stdio:
    def __init__(
        self,
        rig: Rig,
        pools: WorkerPools,
        timeout_s: float | None = None,
        sampling_timeout_s: float = 300.0,
    ) -> None:
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self.session = rig.session()
        self.outgoing = Correlator("stdio")
        self.session.emit, self.session.outgoing = self.replies.put, self.outgoing
        self.dispatcher = Dispatcher(
            self.session, self.replies.put, pools, timeout_s, sampling_timeout_s
        )
        self.pools = pools

    def send(self, message: dict[str, Any]) -> None:
        self.dispatcher.feed_text(json.dumps(message))

    def handshake(self) -> None:
        params = {"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}}
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {**params}})
        assert self.reply()["id"] == "init"

    def call(self, request_id: Any, tool: str, arguments: dict[str, Any], **extra: Any) -> None:
        params = {"name": tool, "arguments": arguments, **extra}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    def cancel(self, request_id: Any) -> None:
        params = {"requestId": request_id, "reason": "test"}
        self.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})

    def reply(self, timeout: float = WAIT_S) -> dict[str, Any]:
        return self.replies.get(timeout=timeout)

    def close(self) -> None:
        self.outgoing.close()
        self.dispatcher.close()
        self.pools.shutdown()


# -- HTTP: the ASGI app driven in process; a request may disconnect on an event ---------------


# a client always names the server it speaks to (REQ-HTTP-PARSE-003)
HOST = (b"host", b"localhost:8181")


def modern_call(method: str, params: dict[str, Any], request_id: Any = 1) -> tuple[bytes, list]:
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = [
        HOST,
        (b"content-type", b"application/json"),
        (b"mcp-protocol-version", MODERN.encode()),
        (b"mcp-method", method.encode()),
    ]
    if "name" in params:
        headers.append((b"mcp-name", str(params["name"]).encode()))
    body = {"jsonrpc": "2.0", "id": request_id, "method": method}
    body["params"] = {**params, "_meta": envelope}
    return json.dumps(body).encode(), headers


def legacy_call(method: str, params: dict[str, Any], request_id: Any = 1) -> tuple[bytes, list]:
    headers = [
        HOST,
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
    ]
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(body).encode(), headers


@dataclass
class Exchange:
    """One POST in flight: what was sent back so far, and an event that hangs it up."""

    app: QmdHttpApp
    body: bytes
    headers: list[tuple[bytes, bytes]]
    hang_up: asyncio.Event = field(default_factory=asyncio.Event)
    sent: list[dict[str, Any]] = field(default_factory=list)
    chunk: asyncio.Event = field(default_factory=asyncio.Event)
    client: str = "127.0.0.1"

    async def run(self) -> HttpReply | None:
        pending = [{"type": "http.request", "body": self.body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            if pending:
                return pending.pop(0)
            await self.hang_up.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if self.hang_up.is_set():
                raise OSError("the client went away")
            self.sent.append(message)
            self.chunk.set()

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/mcp",
            "headers": self.headers,
            "client": (self.client, 40000),
        }
        await self.app(scope, receive, send)
        if not self.sent or self.hang_up.is_set():
            return None
        body = b"".join(m.get("body", b"") for m in self.sent[1:])
        head = dict(self.sent[0]["headers"])
        kind = head.get(b"content-type")
        return HttpReply(self.sent[0]["status"], body, kind.decode() if kind else None)

    def events(self) -> list[dict[str, Any]]:
        text = b"".join(m.get("body", b"") for m in self.sent[1:]).decode()
        return [
            json.loads(line[len("data: ") :])
            for line in text.split("\n")
            if line.startswith("data: ")
        ]


def replies_of(reply: HttpReply) -> list[dict[str, Any]]:
    if reply.content_type == "application/json":
        return [json.loads(reply.body)]
    text = reply.body.decode()
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]


# -- the transports that carry replies, for the write-side limits (REQ-HTTP-LIMIT-007/008) ---


@dataclass(frozen=True)
class ReplyTransport:
    """One way an HTTP client gets replies from a real server: `head` frames a POST of one
    JSON-RPC request on a connection of its own, whose reply comes back on it; `stream`
    transports (legacy SSE) carry every reply of a session on one `GET /sse` stream instead,
    and take their POSTs at the endpoint it names. A transport added here is in every
    write-side test (tests/e2e/test_write_limits.py)."""

    name: str
    head: Callable[[int, bytes], bytes]  # (content length, body) -> the raw POST head
    stream: bool = False


def _raw_post(path: str, length: int, extra: dict[str, str]) -> bytes:
    lines = [f"{name}: {value}" for name, value in extra.items()]
    lines += ["Host: localhost", "Content-Type: application/json", f"Content-Length: {length}"]
    return (f"POST {path} HTTP/1.1\r\n" + "\r\n".join(lines) + "\r\n\r\n").encode()


def _modern_headers(body: bytes) -> dict[str, str]:
    message = json.loads(body)
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": message["method"]}
    name = message.get("params", {}).get("name")
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


REPLY_TRANSPORTS = [
    ReplyTransport(
        "mcp-2025",
        lambda length, _body: _raw_post(
            "/mcp", length, {"Accept": "application/json, text/event-stream"}
        ),
    ),
    ReplyTransport(
        "mcp-" + MODERN,
        lambda length, body: _raw_post("/mcp", length, _modern_headers(body)),
    ),
    ReplyTransport("legacy-sse", lambda length, _body: b"", stream=True),
]


def reply_request(transport: ReplyTransport, request_id: int, name: str, args: Any) -> bytes:
    """A `tools/call` as `transport`'s clients send it (the 2026-07-28 envelope on that era)."""
    params: dict[str, Any] = {"name": name, "arguments": args}
    if transport.name == "mcp-" + MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message).encode()

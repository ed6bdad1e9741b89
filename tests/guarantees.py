"""Every registered surface on fakes, for the guarantee tests generated from the registry
(tests/unit/test_tool_facts.py, tests/unit/test_guarantee_matrix.py).

A `Rig` wires one surface through the application object (`App`) over in-memory adapters
and model fakes that block on a gate until the test opens it, so a call that reaches a model
stays in flight as long as the test needs. `model_call` picks, from the surface's own tool
list and declared facts, a call that runs a model; `sample_arguments` makes its arguments
from the tool's input schema. `tool_names` and `tool_examples` are what the process-level
tests list and call. A new surface is covered by registering it, a new tool by declaring it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.bootstrap import App, ProjmemAdapters, scoped_ports
from adapters.fs.scope import ScopePolicy
from adapters.http.app import HttpSettings, OriginPolicy, QmdHttpApp
from adapters.http.exchange import HttpReply
from adapters.mcp.dispatch import Dispatcher
from adapters.mcp.outgoing import Correlator
from adapters.mcp.protocol import Session
from adapters.mcp.registry import SurfaceContext, create_surface, surface_facts, surface_names
from adapters.mcp.workers import Worker, WorkerPools
from adapters.models.bundle import Models
from domain.model import Collection, SubQuery
from domain.profiles import SEED_000
from domain.usecases.chunks import ChunkKeeper
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
    """`scope`: the server's scope policy, applied as the composition root applies it (the
    services scoped by it, the surface context carrying it); `extra`: collections and
    documents beside the alpha note, as (collection, path, body) under their folders."""

    surface_name: str
    gate: Gate = field(default_factory=Gate)
    scope: ScopePolicy = field(default_factory=ScopePolicy)
    folders: dict[str, str] = field(default_factory=lambda: {"notes": "/notes"})
    extra: Sequence[tuple[str, str, str]] = ()

    def __post_init__(self) -> None:
        store = InMemoryStore()
        for name, folder in self.folders.items():
            store.put_collection(Collection(name, folder))
        documents = [("notes", "alpha.md", "# Alpha\n\nThe alpha note.\n"), *self.extra]
        for number, (collection, path, body) in enumerate(documents):
            content_hash = f"{number + 0xA1:02x}" * 32
            title = body.splitlines()[0].lstrip("# ")
            store.upsert_document(collection, path, title, content_hash, body, "t", "t")
            vector = FakeEmbedder().embed_documents([(title, body)])[0]
            store.store_chunk_vectors(content_hash, [(0, 0, vector)], "fake-embed", "", "t")
        chunks = InMemoryChunkIndex(store)
        ChunkKeeper(store, chunks).sync()  # every document's chunks, outside ones too
        models = Models(
            embedder=GatedEmbedder(self.gate),
            reranker=GatedReranker(self.gate),
            expander=GatedExpander(self.gate),
        )
        scoped_store, lexical, vectors = scoped_ports(self.scope, store, store, store)
        self.app = App(
            store=scoped_store,
            lexical=lexical,
            vectors=vectors,
            cache=store,
            config=InMemoryConfigRepository(
                [Collection(name, folder) for name, folder in self.folders.items()]
            ),
            source=FakeContentSource({}),
            clock=FixedClock(),
            models=models,
            maintenance=store,
            metadata_index=store,
            projmem=ProjmemAdapters(chunks, chunks, InMemorySessions(), chunks, MemoryNotes()),
            scope=self.scope,
        )
        self.services = self.app.services()
        self.memory_store = InMemoryMemoryStore()
        self.memory = Memorizer(
            self.memory_store, GatedEmbedder(self.gate), FixedClock(), Thresholds(0.5, 0.5)
        )
        self.context = SurfaceContext("test", self.scope, memory=lambda: self.memory)
        self.facts = surface_facts(self.surface_name)
        # as the HTTP service shares one across its workers (adapters/http/main.py)
        self.outgoing = Correlator("test") if self.facts.talks_back else None

    def session(
        self, stateless: bool = False, emit: Any = None, outgoing: Correlator | None = None
    ) -> Session:
        surface = create_surface(self.surface_name, self.services, self.context)
        return Session(surface, stateless=stateless, emit=emit, outgoing=outgoing)

    def pools(self, model_threads: int = 1, model_queue: int = 0) -> WorkerPools:
        def worker() -> Worker:  # the fakes are shared between workers
            session = self.session(stateless=True, outgoing=self.outgoing)
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


def tool_names(surface: str) -> list[str]:
    """The tools `surface` declares, in the order `tools/list` shows them."""
    return list(surface_facts(surface).examples)


def path_arguments(surface: str) -> dict[str, tuple[str, ...]]:
    """Each tool of `surface` that declares arguments naming a file or document
    (`Tool.paths`), with those arguments."""
    return dict(surface_facts(surface).paths)


def tool_examples(surface: str) -> dict[str, dict[str, Any]]:
    """Each declared tool of `surface` with the example arguments declared beside it: what the
    tests that list and call every tool over a transport send (tests/e2e), so that a new tool
    is covered by its declaration alone."""
    return {name: dict(example) for name, example in surface_facts(surface).examples.items()}


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
        self.outgoing = Correlator("stdio")
        self.session = rig.session(emit=self.replies.put, outgoing=self.outgoing)
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


# -- a folder's files cannot change a server's security settings (REQ-SEC-ENV-004) ------------
#
# Declared tables: each class of security setting with the variables (and the hostile values)
# a folder would use to change it, and each file a folder can carry that a server reads. The
# matrix (tests/unit/test_folder_settings_matrix.py) is their product for every registered
# surface: a new setting class, variable or source joins it by being declared here, and every
# variable the code names joins the `.env` rows on its own (`process_variables`).

SETTING_CLASSES: dict[str, dict[str, str]] = {
    "trust": {"QMD_TRUST_LOCAL_CONFIG": "1", "QMD_TRUST_UPDATE_HOOKS": "1"},
    "paths": {
        "INDEX_PATH": "./idx.sqlite",
        "QMD_CONFIG_DIR": "./cfg",
        "XDG_CONFIG_HOME": "./xdg-config",
        "XDG_CACHE_HOME": "./xdg-cache",
        "XDG_DATA_HOME": "./xdg-data",
        "QMD_MEMORY_DIR": "./memory",
        "QMD_SESSIONS_DIR": "./sessions",
        "QMD_SESSIONS_VAULT": "./vault",
        "HOME": "./home",
    },
    "network": {
        "QMD_HOST": "0.0.0.0",
        "QMD_ALLOWED_ORIGINS": "*",
        "QMD_ALLOWED_HOSTS": "*",
        "QMD_HTTP_TOKEN": "folder-token",
    },
    "watch": {"QMD_WATCH": "1"},
    "models": {
        "QMD_EMBED_MODEL": "hf:folder/evil/embed.gguf",
        "QMD_RERANK_MODEL": "hf:folder/evil/rerank.gguf",
        "QMD_GENERATE_MODEL": "openai:folder-model",
    },
    "remote": {
        "LDIMS_API_BASE_URL": "http://folder.example/api",
        "QMD_OPENAI_BASE_URL": "http://folder.example/v1",
        "OLLAMA_HOST": "folder.example:11434",
        "HF_ENDPOINT": "http://folder.example",
    },
    "keys": {
        "QMD_OPENAI_API_KEY": "sk-folder",
        "OPENAI_API_KEY": "sk-folder",
        "QMD_EMBED_API_KEY": "sk-folder",
        "QMD_OPENAI_API_KEY_FILE": "./key",
    },
}

# what a `.qmd/index.yml` can say for each class in its own fields, besides naming variables
INDEX_YML_FIELDS: dict[str, str] = {
    "trust": "trusted: true\ntrust: {hooks: true, paths: true, models: true}\n",
    "paths": "index_url: postgresql://folder@folder.example/db?options=-csearch_path%3Dfolder\n"
    "collections:\n  private:\n    path: ~/private\n    pattern: '**/*.md'\n",
    "network": "host: 0.0.0.0\nallowed_origins: ['*']\nallowed_hosts: ['*']\ntoken: folder\n",
    "watch": "watch: true\n",
    "models": "models:\n  embed: hf:folder/evil/embed.gguf\n  rerank: hf:folder/evil/rerank.gguf\n"
    "  generate: openai:folder-model?key_env=HOME\n",
    "remote": "ldims_api_base_url: http://folder.example/api\n",
    "keys": "api_key: sk-folder\n",
}
BENIGN_INDEX_YML = "collections:\n  docs:\n    path: docs\n    pattern: '**/*.md'\n"


def _write_env(folder: Any, variables: dict[str, str], kind: str) -> None:
    lines = [f"{name}={value}" for name, value in variables.items()]
    (folder / ".env").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _hostile_config(variables: dict[str, str], kind: str) -> str:
    import yaml

    as_keys = yaml.safe_dump(
        {"env": variables, **variables, **{k.lower(): v for k, v in variables.items()}}
    )
    text = INDEX_YML_FIELDS[kind] + as_keys
    if "collections:" not in text:
        return BENIGN_INDEX_YML + text
    return text.replace("collections:\n", BENIGN_INDEX_YML, 1)  # the benign one stays too


def _config_writers(relative: str) -> tuple[Any, Any]:
    """(benign, hostile) writers of a project config at `relative` to the working folder (a
    server started in a subfolder of a checkout adopts the nearest one above it)."""

    def write(folder: Any, text: str) -> None:
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def benign(folder: Any) -> None:
        write(folder, BENIGN_INDEX_YML)

    def hostile(folder: Any, variables: dict[str, str], kind: str) -> None:
        write(folder, _hostile_config(variables, kind))

    return benign, hostile


@dataclass(frozen=True)
class FolderSource:
    """A file a folder can carry that a server started there reads: how a benign folder has
    it, how a hostile one sets a class of settings in it, and the file `qmd trust` approves
    (None when approval is not the file's alone to give: a config's gated fields)."""

    name: str
    benign: Any  # (folder) -> None
    hostile: Any  # (folder, {variable: value}, class) -> None
    approvable: str | None


FOLDER_SOURCES: tuple[FolderSource, ...] = (
    FolderSource(".env", lambda folder: None, _write_env, ".env"),
    FolderSource(".qmd/index.yml", *_config_writers(".qmd/index.yml"), None),
    FolderSource(".qmd/index.yaml", *_config_writers(".qmd/index.yaml"), None),
    FolderSource("../.qmd/index.yml", *_config_writers("../.qmd/index.yml"), None),
)


@functools.cache
def process_variables() -> frozenset[str]:
    """Every name in the code under adapters/ and domain/ that could be an environment
    variable (an upper-case string constant with an underscore): more than the process reads,
    never less, so a variable added to the code joins the matrix without being declared."""
    import ast
    import re
    from pathlib import Path

    shape = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
    root = Path(__file__).resolve().parent.parent
    names: set[str] = set()
    for folder in ("adapters", "domain"):
        for path in (root / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                value = node.value if isinstance(node, ast.Constant) else None
                if isinstance(value, str) and shape.fullmatch(value):
                    names.add(value)
    return frozenset(names)


def server_view(argv: Sequence[str]) -> dict[str, Any]:
    """What a server started in the working folder with `qmd <argv>` would run with, per
    setting class, read through the code `qmd mcp`/`qmd server` run before they build
    anything (the test sets the working folder and os.environ)."""
    from adapters.bootstrap import builtin_models
    from adapters.cli.commands.servers import startup_settings
    from adapters.cli.parser import build_parser
    from adapters.config.trust import TrustStore, decide, opted_in, untrusted_view
    from adapters.config.yaml_config import cache_dir, config_dir, load_config
    from adapters.http.app import OriginPolicy
    from adapters.locations import index_location, memory_folder, session_folders
    from adapters.models.references import select_model_refs

    parser, _commands = build_parser(argv[0])
    _surface, settings, options = startup_settings(parser.parse_args(list(argv)))
    env = settings.env
    location, config_path = index_location(None, env)
    config = load_config(config_path)
    decision = decide(config, config_path, env, builtin_models())
    usable = untrusted_view(config, decision)
    variables = {name for table in SETTING_CLASSES.values() for name in table}
    return {
        # whether a checked-in config's gated fields are used shows in paths and models
        "trust": (opted_in(env), TrustStore(env).path),
        "paths": (
            location,
            config_path,
            config_dir(env),
            cache_dir(env),
            memory_folder(location, env),
            session_folders(env),
            sorted((name, c.path) for name, c in usable.collections.items()),
        ),
        "network": (
            options.host,
            options.port,
            options.token,
            OriginPolicy.build(options.host, env, options.allow_origins, options.allow_hosts),
        ),
        "watch": settings.watch,
        "models": select_model_refs(usable.models, env),
        "remote": {name: env.get(name) for name in SETTING_CLASSES["remote"]},
        "keys": {name: env.get(name) for name in SETTING_CLASSES["keys"]},
        # every variable the process and its libraries would see (os.environ is updated
        # from these, and never overrides the real environment)
        "environment": {name: env.get(name) for name in sorted(variables | process_variables())},
    }


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

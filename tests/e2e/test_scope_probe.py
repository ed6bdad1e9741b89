"""The force-root escape probe, generated from the surface registry (REQ-SEC-SCOPE-001): every
registered MCP surface is started as a real `qmd mcp --force-root DIR` process, over stdio,
over HTTP in both eras and over the legacy HTTP+SSE transport, on SQLite and on PostgreSQL,
with a secret planted outside DIR in every place a surface reads: a collection, a document
whose extraction failed, a memory record (and its topic), a session transcript (in a sessions
folder outside, and linked into the one inside). Every answer must be exactly the answer for
something that does not exist: no marker of the outside in it (unless the request carried it),
and the same reply as for a twin reference to nothing.

A surface is covered by registering it: `PROBES` must name a probe for every registered
surface, and a surface without one fails here rather than being skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import pytest

from adapters.mcp.registry import canonical_surface
from tests.http_harness import HttpServer
from tests.mcp_harness import REPO, StdioServer, fixture_env
from tests.shipped import shipped_surfaces
from tests.sse_harness import SseSession

pytestmark = pytest.mark.models
EMBED_MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"

SECRET_WORD = "ZEBRASECRET"
SECRET_ANSWER = "PLUTONIUM-LANTERN-42"
SECRET_TOPIC = "kettle vault HIDDENTOPIC"
SECRET_SESSION = "secret-0000-4000-8000-000000000001"
LINKED_SESSION = "linked-secret-0000-4000-8000-000000000002"
INSIDE_SESSION = "inside-0000-4000-8000-000000000003"
PROJECT = "-home-dev-proj"
OUTSIDE_TRANSCRIPT_TEXT = "Please rotate the ZEBRASECRET key in the PLUTONIUM vault"


@dataclass
class World:
    tmp: Path
    root: Path
    outside: Path
    env: dict[str, str]  # the rooted server's environment
    markers: tuple[str, ...]
    backend: str
    cleanup: list[Callable[[], None]] = field(default_factory=list)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _transcript(session: str, text: str) -> str:
    base = {"sessionId": session, "cwd": "/home/dev/proj", "isSidechain": False}
    lines = [
        {
            **base,
            "type": "user",
            "uuid": "u1",
            "timestamp": "2026-01-01T10:00:00.000Z",
            "message": {"role": "user", "content": text},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a1",
            "timestamp": "2026-01-01T10:01:00.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        },
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def _cli(env: dict[str, str], *args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def build_world(tmp: Path, backend: str) -> World:
    if not EMBED_MODEL.is_file():
        pytest.fail(f"{EMBED_MODEL} missing: run scripts/prepare_models.py")
    root, outside = tmp / "permitted", tmp / "outside"
    env = fixture_env(tmp)
    env["QMD_EMBED_MODEL"] = str(EMBED_MODEL)
    cleanup: list[Callable[[], None]] = []
    if backend == "postgresql":
        from tests.postgres_server import drop_schema, fresh_schema_url

        url, schema = fresh_schema_url()
        env["INDEX_PATH"] = url
        cleanup.append(lambda: drop_schema(schema))
    _write(root / "notes" / "alpha.md", "# Alpha\n\nInside notes about kettles and lanterns.\n")
    _write(outside / "docs" / "secret.md", f"# Secret plan\n\n{SECRET_WORD} budget for kettles.\n")
    # not a PDF at all: its extraction fails and the failure is recorded (with its reason)
    (outside / "docs" / "secret-broken.pdf").write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 64)
    mask = "'**/*.{md,pdf}'"
    # a PostgreSQL index keeps collections of its own unless index.yml names it (ADR 0047)
    shared = f"index_url: {env['INDEX_PATH']}\n" if backend == "postgresql" else ""
    _write(
        Path(env["QMD_CONFIG_DIR"]) / "index.yml",
        shared + "collections:\n"
        f"  notes:\n    path: {root / 'notes'}\n    pattern: {mask}\n"
        f"  outsidecoll:\n    path: {outside / 'docs'}\n    pattern: {mask}\n",
    )
    _cli(env, "update", cwd=tmp)
    # an unrooted reader finds the secret: a probe that finds nothing later proves the root
    # hid it, not that nothing was indexed (as once happened on PostgreSQL)
    assert "secret.md" in _cli(env, "search", SECRET_WORD, cwd=tmp)
    # transcripts: one in a sessions folder outside, one inside, one linked in from outside
    _write(
        outside / "claude" / PROJECT / f"{SECRET_SESSION}.jsonl",
        _transcript(SECRET_SESSION, OUTSIDE_TRANSCRIPT_TEXT),
    )
    _write(
        root / "claude" / PROJECT / f"{INSIDE_SESSION}.jsonl",
        _transcript(INSIDE_SESSION, "Inside session about kettles"),
    )
    (root / "claude" / PROJECT / f"{LINKED_SESSION}.jsonl").symlink_to(
        outside / "claude" / PROJECT / f"{SECRET_SESSION}.jsonl"
    )
    # a memory record stored by an unrooted server into a memory folder outside
    memory_env = {**env, "QMD_MEMORY_DIR": str(outside / "memory")}
    writer = StdioServer(memory_env, "--surface", "memorize", cwd=tmp)
    try:
        writer.initialize()
        stored = writer.call(
            "store_qa",
            {
                "question": f"What is the {SECRET_WORD} code?",
                "answer": SECRET_ANSWER,
                "topic": SECRET_TOPIC,
            },
            timeout=120,
        )
        assert stored.get("isError") is not True, stored
    finally:
        writer.kill()
    rooted = {
        **env,
        "QMD_MEMORY_DIR": str(root / "memory"),
        "QMD_SESSIONS_DIR": str(root / "claude"),
        "QMD_SESSIONS_VAULT": str(root / "vault"),
    }
    markers = (
        SECRET_WORD,
        SECRET_ANSWER,
        "HIDDENTOPIC",
        "PLUTONIUM",
        "Secret plan",
        "secret.md",
        "secret-broken",
        "outsidecoll",
        str(outside),
        SECRET_SESSION,
        LINKED_SESSION,
        "CONTENT_UNAVAILABLE",
        "processing",
    )
    return World(tmp, root, outside, rooted, markers, backend, cleanup=cleanup)


# -- transports ------------------------------------------------------------------------------


class Client(Protocol):
    def call(self, tool: str, arguments: dict[str, Any]) -> Any: ...
    def request(self, method: str, params: dict[str, Any]) -> Any: ...
    def close(self) -> None: ...


class StdioClient:
    def __init__(self, env: dict[str, str], args: list[str], cwd: Path) -> None:
        self.server = StdioServer(env, *args, cwd=cwd)
        self.server.initialize()

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return self.request("tools/call", {"name": tool, "arguments": arguments})

    def request(self, method: str, params: dict[str, Any]) -> Any:
        reply = self.server.request(method, params, timeout=120)
        return reply.get("result", reply.get("error"))

    def close(self) -> None:
        self.server.kill()


class HttpClient:
    """One POST per request: the 2025 era answers it as an event stream, the 2026-07-28 era
    as plain JSON with its headers."""

    def __init__(self, env: dict[str, str], args: list[str], cwd: Path, modern: bool) -> None:
        self.server = HttpServer(["mcp", "--http", "--port", "0", *args], env, cwd=cwd).start()
        self.modern = modern
        self.next_id = 0

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return self.request("tools/call", {"name": tool, "arguments": arguments})

    def request(self, method: str, params: dict[str, Any]) -> Any:
        if self.modern:
            name = params.get("name", params.get("uri"))
            reply = self.server.modern(method, params, name if isinstance(name, str) else None)
            answer = reply.json()
        else:
            self.next_id += 1
            message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
            reply = self.server.mcp(message)
            events = reply.events()
            answer = events[-1] if events else reply.json()
        return answer.get("result", answer.get("error"))

    def close(self) -> None:
        self.server.stop()


class SseClient:
    """The legacy HTTP+SSE transport: one stream, one session, requests POSTed to it."""

    def __init__(self, env: dict[str, str], args: list[str], cwd: Path) -> None:
        self.server = HttpServer(["mcp", "--http", "--port", "0", *args], env, cwd=cwd).start()
        self.session = SseSession(self.server.port)
        self.session.initialize()

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return self.request("tools/call", {"name": tool, "arguments": arguments})

    def request(self, method: str, params: dict[str, Any]) -> Any:
        reply = self.session.request(method, params, timeout=120)
        return reply.get("result", reply.get("error"))

    def close(self) -> None:
        self.session.close()
        self.server.stop()


def open_client(transport: str, world: World, surface: str) -> Client:
    args = ["--surface", surface, "--force-root", str(world.root)]
    if transport == "stdio":
        return StdioClient(world.env, args, world.tmp)
    if transport == "http-sse":
        return SseClient(world.env, args, world.tmp)
    return HttpClient(world.env, args, world.tmp, modern=transport == "http-2026")


# -- the probes, one per surface -------------------------------------------------------------

Exchange = tuple[Any, Any, Any]  # (request, reply, reply to the twin request or None)


def _twin(value: Any) -> Any:
    """The same request naming something that does not exist ("secret" -> "secrex")."""
    return json.loads(json.dumps(value).replace("secret", "secrex"))


def _paired(ask: Callable[[Any], Any], request: Any) -> Exchange:
    return request, ask(request), ask(_twin(request))


def _document_refs(world: World) -> list[str]:
    outside = world.outside / "docs"
    return [
        str(outside / "secret.md"),
        "outsidecoll/secret.md",
        "qmd://outsidecoll/secret.md",
        "secret.md",
        "outsidecoll/secret-broken.pdf",
        "secret-broken.pdf",
        "../outside/docs/secret.md",
    ]


def probe_spec(client: Client, world: World, compat: bool = False) -> Iterator[Exchange]:
    for ref in _document_refs(world):
        yield _paired(lambda r: client.call("get", {"file": r}), ref)
        uri = ref if ref.startswith("qmd://") else "qmd://" + quote(ref, safe="/")
        yield _paired(lambda u: client.request("resources/read", {"uri": u}), uri)
    for pattern in ("outsidecoll/**", "**/secret*", "*secret*.md"):
        yield _paired(lambda p: client.call("multi_get", {"pattern": p}), pattern)
    for words in (SECRET_WORD, "secret plan budget"):
        if compat:
            arguments: dict[str, Any] = {"searches": [{"type": "lex", "query": words}]}
            yield arguments, client.call("query", arguments), None
        else:
            search = {"query": words, "minScore": 0, "limit": 50}
            yield search, client.call("search", search), None
            scoped = {**search, "collection": "outsidecoll"}
            yield scoped, client.call("search", scoped), None
    yield "status", client.call("status", {}), None


def probe_compat(client: Client, world: World) -> Iterator[Exchange]:
    yield from probe_spec(client, world, compat=True)


def probe_ldims(client: Client, world: World) -> Iterator[Exchange]:
    for document in ("outsidecoll/secret-broken.pdf", "outsidecoll/secret.md"):
        uri = f"ldims://docs/{quote(document, safe='/')}/extracted_content"
        yield _paired(lambda u: client.request("resources/read", {"uri": u}), uri)
    search = {"query": SECRET_WORD, "maxResults": 50, "filters": {"searchMode": "exact"}}
    yield search, client.call("searchDocuments", search), None


def probe_memorize(client: Client, world: World) -> Iterator[Exchange]:
    before = sorted(p.name for p in (world.outside / "memory").rglob("*.md"))
    for question, context in (
        (f"What is the {SECRET_WORD} code?", "kettle vault"),
        ("What is the code?", SECRET_TOPIC.replace("HIDDENTOPIC", "").strip()),
    ):
        arguments = {"question": question, "context": context}
        yield arguments, client.call("query_qa", arguments), None
    uri = "knowledge://" + quote("kettle vault", safe="") + "/code"
    yield uri, client.request("resources/read", {"uri": uri}), None
    yield "resources/list", client.request("resources/list", {}), None
    stored = {"question": "Where is the kettle?", "answer": "In the kitchen.", "topic": "home"}
    reply = client.call("store_qa", stored)
    assert reply.get("isError") is not True, reply
    yield stored, reply, None
    # nothing was written outside, and the inside store got its file
    assert sorted(p.name for p in (world.outside / "memory").rglob("*.md")) == before
    assert list((world.root / "memory").rglob("*.md")), "store_qa wrote nothing inside"
    # the hidden `memory` collection of the unrooted server is not taken over
    config = _config_text(world.env)
    assert str(world.outside / "memory") in config and str(world.root / "memory") not in config


def _config_text(env: dict[str, str]) -> str:
    """Every collection file of the config folder: a PostgreSQL index keeps its collections in
    a file of its own beside index.yml (docs/postgres.md)."""
    folder = Path(env["QMD_CONFIG_DIR"])
    return "".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.yml")))


def probe_projmem(client: Client, world: World) -> Iterator[Exchange]:
    listed = client.call("projmem_session_list", {"limit": 200})
    yield "session_list", listed, None
    ids = [s["sessionId"] for s in listed["structuredContent"]["sessions"]]
    assert ids == [INSIDE_SESSION], ids  # positive control: the inside one is there
    for session in (SECRET_SESSION, LINKED_SESSION):
        yield _paired(
            lambda s: client.call("projmem_session_transcript", {"sessionId": s}), session
        )
        summary = {
            "sessionId": session,
            "overview": "o",
            "decisions": [],
            "outcomes": [],
            "openItems": [],
            "tags": [],
        }
        yield _paired(lambda a: client.call("projmem_session_update_summary", a), summary)
    assert not (world.root / "vault").exists() or not any((world.root / "vault").iterdir())
    for ref in ("outsidecoll/secret.md", "qmd://outsidecoll/secret.md"):
        yield _paired(lambda r: client.call("projmem_get", {"identifier": r}), ref)
    yield _paired(
        lambda p: client.call("projmem_multi_get", {"pathPattern": p}), "outsidecoll/%secret%"
    )
    search = {"query": SECRET_WORD}
    yield search, client.call("projmem_search", search), None
    status = client.call("projmem_status", {})
    yield "status", status, None
    assert status["structuredContent"]["chunks"] == _inside_chunks(world), status


PROBES: dict[str, Callable[[Client, World], Iterator[Exchange]]] = {
    "spec": probe_spec,
    canonical_surface("2.8.3"): probe_compat,
    "ldims": probe_ldims,
    "memorize": probe_memorize,
    "projmem": probe_projmem,
}


SHIPPED = shipped_surfaces()


def test_every_registered_surface_has_a_probe() -> None:
    """A newly registered surface fails here until its probe is declared in PROBES."""
    assert len(SHIPPED) >= 5, SHIPPED
    missing = [name for name in SHIPPED if name not in PROBES]
    assert not missing, f"surfaces without a force-root probe: {missing}"


# -- the matrix ------------------------------------------------------------------------------


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    built = build_world(tmp_path_factory.mktemp(f"scope-{request.param}"), request.param)
    yield built
    for undo in built.cleanup:
        undo()


def _inside_chunks(world: World) -> int:
    """The chunk count of the documents of collections inside the root, read one by one
    from an unrooted app (the figure `projmem_status` must give under the root)."""
    from adapters.bootstrap import build_app

    app = build_app(env=world.env, with_models=False)
    try:
        assert app.chunks is not None
        root = str(world.root.resolve())
        inside = [
            f"{meta.collection}/{meta.path}"
            for c in app.store.list_collections()
            if os.path.realpath(c.path).startswith(root + os.sep)
            for meta in app.store.documents(c.name)
        ]
        count = sum(len(app.chunks.get(ref)) for ref in inside)
        assert 0 < count < app.chunks.status(None).chunks, count
        return count
    finally:
        app.close()


def _check(world: World, exchanges: Iterator[Exchange]) -> tuple[int, list[str]]:
    problems: list[str] = []
    tried = 0
    for request, reply, twin_reply in exchanges:
        tried += 1
        sent, answered = json.dumps(request), json.dumps(reply, ensure_ascii=False)
        leaked = [m for m in world.markers if m in answered and m not in sent]
        if leaked:
            problems.append(f"{leaked} leaked in reply to {sent}: {answered}")
        if twin_reply is not None:
            normalised = json.dumps(twin_reply, ensure_ascii=False).replace("secrex", "secret")
            if normalised != answered:
                problems.append(
                    f"{sent} answers differently from nothing: {answered} vs {normalised}"
                )
    return tried, problems


@pytest.mark.parametrize("transport", ["stdio", "http-2025", "http-2026", "http-sse"])
@pytest.mark.parametrize("surface", SHIPPED)
def test_nothing_outside_the_root_answers_except_as_missing(
    world: World, surface: str, transport: str, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = PROBES.get(surface)
    if probe is None:
        pytest.fail(f"surface {surface!r} has no force-root probe in PROBES")
    client = open_client(transport, world, surface)
    try:
        tried, problems = _check(world, probe(client, world))
    finally:
        client.close()
    with capsys.disabled():
        print(
            f"\nscope probe {surface} {transport} {world.backend}: {tried} calls, "
            f"{len(problems)} escapes"
        )
    assert tried > 0
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("transport", [[], ["--http", "--port", "0"]], ids=["stdio", "http"])
@pytest.mark.parametrize(
    ("surface", "setting", "folder"),
    [("memorize", "QMD_MEMORY_DIR", "memory"), ("projmem", "QMD_SESSIONS_VAULT", "vault")],
)
def test_a_written_folder_outside_the_root_refuses_to_start(
    tmp_path: Path, surface: str, setting: str, folder: str, transport: list[str]
) -> None:
    """REQ-SEC-SCOPE-003: named in the error, on every transport, nothing created there."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    env = {**fixture_env(tmp_path), setting: str(outside / folder)}
    env["QMD_EMBED_MODEL"] = str(EMBED_MODEL)
    command = [sys.executable, "-m", "adapters.cli.main", "mcp", *transport]
    try:
        done = subprocess.run(
            [*command, "--surface", surface, "--force-root", str(root)],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired as running:
        pytest.fail(f"the server started instead of refusing: {running.stderr!r}")
    assert done.returncode != 0 and setting in done.stderr, done
    assert "out-of-root" in done.stderr and "outside --force-root" in done.stderr, done.stderr
    assert not (outside / folder).exists()
    assert not done.stdout.strip()


def test_the_memory_folder_default_beside_the_index_refuses_too(tmp_path: Path) -> None:
    """Finding 1: no QMD_MEMORY_DIR, the default folder beside the index lies outside."""
    root = tmp_path / "root"
    root.mkdir()
    env = fixture_env(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "adapters.cli.main",
            "mcp",
            "--surface",
            "memorize",
            "--force-root",
            str(root),
        ],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "QMD_MEMORY_DIR" in done.stderr, done
    assert not (tmp_path / "index-memory").exists()


def test_a_sessions_folder_outside_the_root_is_confined(tmp_path: Path) -> None:
    """Finding 2: QMD_SESSIONS_DIR outside the root (read only): nothing in it exists."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    _write(
        outside / "claude" / PROJECT / f"{SECRET_SESSION}.jsonl",
        _transcript(SECRET_SESSION, OUTSIDE_TRANSCRIPT_TEXT),
    )
    root.mkdir()
    env = {
        **fixture_env(tmp_path),
        "QMD_SESSIONS_DIR": str(outside / "claude"),
        "QMD_SESSIONS_VAULT": str(root / "vault"),
    }
    server = StdioServer(env, "--surface", "projmem", "--force-root", str(root), cwd=tmp_path)
    try:
        server.initialize()
        listed = server.call("projmem_session_list", {})
        assert listed["structuredContent"]["count"] == 0, listed
        read = server.call("projmem_session_transcript", {"sessionId": SECRET_SESSION})
        twin = server.call("projmem_session_transcript", {"sessionId": "no-such-session"})
        assert json.dumps(read).replace(SECRET_SESSION, "X") == json.dumps(twin).replace(
            "no-such-session", "X"
        )
        latest = server.call("projmem_session_transcript", {})
        assert SECRET_WORD not in json.dumps(latest), latest
    finally:
        server.kill()
    assert "sessions" not in _config_text(env)
    assert os.listdir(outside / "claude" / PROJECT) == [f"{SECRET_SESSION}.jsonl"]

"""HTTP requests for the wire fuzzer: the frames of tests/fuzz/frames.py POSTed to /mcp in both
protocol eras (2025: SSE-framed, Accept both; 2026-07-28: plain JSON with the
MCP-Protocol-Version / Mcp-Method / Mcp-Name headers), plus HTTP-level mutations: missing or
wrong headers, content types, batches, empty and over-the-limit bodies, odd methods and paths,
foreign Origin and Host.

Every choice goes through a `frames.Source`, like the stdio frames.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.fuzz import frames as gen

MODERN = "2026-07-28"
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07")
ACCEPT_BOTH = "application/json, text/event-stream"
# Named targets the 2026-07-28 era repeats in `Mcp-Name`.
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
BODY_LIMIT = 16 * 1024 * 1024  # docs/spec/http.md: a body over the limit (16 MiB) gets 413

# (value, allowed): the spec's loopback rule (REQ-MCP-HTTP-006), decided here by hand.
ORIGINS = [
    ("http://localhost", True), ("http://localhost:3000", True), ("https://127.0.0.1", True),
    ("http://127.9.9.9:80", True), ("http://[::1]:8080", True), ("http://app.localhost", True),
    ("HTTP://LOCALHOST", True),
    ("http://evil.example", False), ("null", False), ("file://", False), ("ftp://localhost", False),
    ("http://0.0.0.0", False), ("http://127.0.0.1.evil.example", False), ("", False),
    ("http://localhost.evil.example", False), ("http://[::2]", False), ("javascript:1", False),
    ("http://evil.example@localhost", False), ("http://localhost/", False),  # REQ-HTTP-PARSE-002
]  # fmt: skip
HOSTS = [
    ("localhost", True), ("127.0.0.1", True), ("127.1.2.3:99", True), ("[::1]:8181", True),
    ("x.localhost:1", True), ("LOCALHOST:8181", True),
    ("evil.example", False), ("0.0.0.0:8181", False), ("example.com:80", False),
    ("127.0.0.1.nip.io", False), ("[::2]", False),
    ("[::1]evil.example", False), ("evil.example@localhost", False),  # REQ-HTTP-PARSE-001
]  # fmt: skip
OTHER_PATHS = [
    "/", "/nope", "/mcp/", "/MCP", "/mcp/x", "//mcp", "/healthz", "/health/", "/query/",
    "/openapi.json", "/docs", "/.env", "/mcp.json", "/%00", "/%ff", "/%2e%2e/etc/passwd",
]  # fmt: skip
CONTENT_TYPES = [
    None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
    "application/json; charset=utf-8", "APPLICATION/JSON", "application/json-seq",
    "text/json", "", "application/jso", "application/*",
]  # fmt: skip
ACCEPTS = [
    None, "application/json", "text/event-stream", "*/*", "", "application/*, text/*",
    "text/event-stream, application/json", "APPLICATION/JSON, TEXT/EVENT-STREAM",
    "application/json;q=0.9, text/event-stream;q=0.1",
]  # fmt: skip


@dataclass
class HttpRequest:
    method: str
    target: str  # path and query
    headers: dict[str, str | bytes] = field(default_factory=dict)
    body: bytes | None = None
    chunked: bool = False  # sent without Content-Length, in chunks
    origin: tuple[str, bool] | None = None  # (value, allowed) or absent
    host: tuple[str, bool] | None = None  # (value, allowed); None: the server's own address

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str) -> str | None:
        """A header as the server reads it (names are case-insensitive, values latin-1)."""
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                text = value.decode("latin-1") if isinstance(value, bytes) else value
                return text.strip(" \t")  # HTTP drops optional whitespace around a value
        return None

    def describe(self) -> str:
        head = " ".join(f"{k}: {v!r}" for k, v in self.headers.items())
        body = (self.body or b"")[:240]
        extra = f" origin={self.origin[0]!r}" if self.origin else ""
        extra += f" host={self.host[0]!r}" if self.host else ""
        size = len(self.body or b"")
        return f"{self.method} {self.target} [{head}]{extra} ({size} bytes) {body!r}"


def _header_safe(value: Any) -> bool:
    """A string the fuzzer can repeat in a header byte for byte (and short enough for the
    HTTP server's header limit: a longer `Mcp-Name` is left out, a disagreement)."""
    return (
        isinstance(value, str)
        and len(value) <= 4096
        and value == value.strip(" \t")
        and all(0x20 <= ord(ch) < 0x7F for ch in value)
    )


def _modern_headers(message: dict[str, Any]) -> dict[str, str | bytes]:
    headers: dict[str, str | bytes] = {"MCP-Protocol-Version": MODERN}
    method = message.get("method")
    if _header_safe(method):
        headers["Mcp-Method"] = method
    params = message.get("params")
    key = NAMED.get(str(method))
    if key and isinstance(params, dict) and _header_safe(params.get(key)):
        headers["Mcp-Name"] = params[key]
    return headers


def _mcp_request(
    source: gen.Source, tools: list[dict[str, Any]], counter: int, era: str | None = None
) -> HttpRequest:
    message = gen.message(source, tools, counter)
    params = message.get("params")
    modern = source.chance(0.35) if era is None else era == MODERN
    if modern and isinstance(params, dict):
        params["_meta"] = dict(gen.MODERN_META)
    headers: dict[str, str | bytes] = {"Content-Type": "application/json"}
    if modern:
        headers.update(_modern_headers(message))
    else:
        headers["Accept"] = ACCEPT_BOTH
        if source.chance(0.3):
            headers["MCP-Protocol-Version"] = source.pick(LEGACY_VERSIONS)
    if source.chance(0.08):  # a batch of the message and a few more
        batch = [message] + [
            gen.message(source, tools, counter * 10 + n) for n in range(source.integer(0, 3))
        ]
        body = gen.encode(batch)
    else:
        body = gen.encode(message)
    if source.chance(0.2):
        body = gen.mutate(source, body)
    request = HttpRequest("POST", "/mcp", headers, body)
    if source.chance(0.25):
        _mutate_headers(source, request, message)
    return request


def _mutate_headers(source: gen.Source, request: HttpRequest, message: dict[str, Any]) -> None:
    headers = request.headers
    for _ in range(source.integer(1, 2)):
        kind = source.integer(0, 6)
        if kind == 0:
            _set(headers, "Content-Type", source.pick(CONTENT_TYPES))
        elif kind == 1:
            _set(headers, "Accept", source.pick(ACCEPTS))
        elif kind == 2:
            versions = [None, "", MODERN, "2099-01-01", "2025-06-18", "1", "2026-07-28 "]
            _set(headers, "MCP-Protocol-Version", source.pick(versions))
        elif kind == 3:
            methods = [None, "", "tools/list", "ping", str(message.get("method")).upper()]
            _set(headers, "Mcp-Method", source.pick(methods))
        elif kind == 4:
            _set(headers, "Mcp-Name", source.pick([None, "", "query", "get", "qmd://x/y.md"]))
        elif kind == 5:
            request.origin = source.pick(ORIGINS)
        else:
            request.host = source.pick(HOSTS)


def _set(headers: dict[str, str | bytes], name: str, value: str | None) -> None:
    for key in [k for k in headers if k.lower() == name.lower()]:
        del headers[key]
    if value is not None:
        headers[name] = value


def _rest_body(source: gen.Source) -> bytes:
    kind = source.integer(0, 5)
    if kind == 0:
        return b"not json"
    if kind == 1:
        return source.pick([b"{}", b"[]", b"null", b'{"searches":"x"}', b'{"searches":{}}'])
    searches: Any = [
        {
            "type": source.pick(["lex", "vec", "hyde", "other", 5]),
            "query": gen.string(source, gen.WORDS),
        }
        for _ in range(source.integer(0, 3))
    ]
    if kind == 2 and searches:
        searches[0] = gen.wrong_type(source)
    body: dict[str, Any] = {"searches": searches, "rerank": False}
    for name in ("limit", "minScore", "candidateLimit"):
        if source.chance(0.3):
            body[name] = source.pick(gen.NUMBERS)
    if source.chance(0.2):
        body["collections"] = source.pick([[], ["handbook"], ["nosuch"], "handbook", [5]])
    if source.chance(0.1):
        body["rerank"] = True  # no models on this server: answered without reranking
    return gen.encode(body)


def _other_request(source: gen.Source) -> HttpRequest:
    kind = source.integer(0, 9)
    method_pool = ["GET", "PUT", "DELETE", "OPTIONS", "PATCH", "HEAD", "TRACE", "FOO"]
    if kind <= 2:  # another method on /mcp
        return HttpRequest(source.pick(method_pool), source.pick(["/mcp", "/mcp?x=1"]))
    if kind == 3:
        target = source.pick(["/health", "/health?x=1", "/health?"])
        return HttpRequest(source.pick(["GET", "GET", "HEAD", "POST", "DELETE"]), target)
    if kind == 4:
        method = source.pick(["GET", "POST", "HEAD", "DELETE"])
        body = b"{}" if method == "POST" else None
        return HttpRequest(method, source.pick(OTHER_PATHS), {"Content-Type": "text/plain"}, body)
    if kind <= 7:  # REST
        path = source.pick(["/query", "/search", "/query?x=1"])
        headers: dict[str, str | bytes] = {"Content-Type": "application/json"}
        if source.chance(0.8):
            return HttpRequest("POST", path, headers, _rest_body(source))
        return HttpRequest(source.pick(["GET", "PUT", "HEAD"]), path)
    if kind == 8:  # an empty body
        headers = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}
        return HttpRequest("POST", "/mcp", headers, b"")
    # a notification or response only: nothing to answer
    body = source.pick(
        [
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
            b'{"jsonrpc":"2.0","id":7,"result":{}}',
            b'[{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"a","error":'
            b'{"code":1,"message":"m"}}]',
        ]
    )
    return HttpRequest(
        "POST", "/mcp", {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}, body
    )


def huge_request(source: gen.Source) -> HttpRequest:
    """A body just over the limit, declared or (chunked) only discovered while reading."""
    size = BODY_LIMIT + source.pick([1, 4096])
    path = source.pick(["/mcp", "/query"])
    headers: dict[str, str | bytes] = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}
    prefix = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
    body = prefix + b"x" * (size - len(prefix) - 3) + b'"}}'
    return HttpRequest("POST", path, headers, body, chunked=source.chance(0.5))


def request(
    source: gen.Source, tools: list[dict[str, Any]], counter: int, era: str | None = None
) -> HttpRequest:
    """A fuzzed request; `era` ("2025" or "2026-07-28") fixes the era of /mcp requests
    (else drawn, 35% 2026-07-28)."""
    roll = source.integer(0, 9999)
    if roll < 3:
        return huge_request(source)
    mcp = roll >= 1200
    found = _mcp_request(source, tools, counter, era) if mcp else _other_request(source)
    if source.chance(0.03):
        found.origin = source.pick(ORIGINS)
    if source.chance(0.03):
        found.host = source.pick(HOSTS)
    return found


def tools_list_body() -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": "tools", "method": "tools/list"}).encode()

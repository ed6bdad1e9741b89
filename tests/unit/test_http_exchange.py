"""POST /mcp without a server: the order of the checks and the framing of replies."""

from __future__ import annotations

import json
from typing import Any

from adapters.http.exchange import answer, plan_mcp_request
from adapters.mcp.protocol import Session
from tests.fakes import InMemoryStore, app_over
from tests.toy_surface import ToySurface

ACCEPT = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


def _error(method: str, headers: dict[str, str], body: Any) -> tuple[int, dict[str, Any]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    plan = plan_mcp_request(method, headers, raw)
    assert plan.reply is not None
    return plan.reply.status, json.loads(plan.reply.body or b"null")


def test_checks_come_in_the_sdk_order() -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert _error("GET", ACCEPT, ping)[0] == 405
    assert _error("POST", {"accept": ACCEPT["accept"]}, b"{bad")[0] == 415
    assert _error("POST", {"content-type": "application/json"}, b"{bad")[0] == 406
    status, body = _error("POST", ACCEPT, b"{bad")
    assert (status, body["error"]["code"]) == (400, -32700)
    assert _error("POST", ACCEPT, b"NaN")[1]["error"]["code"] == -32700
    assert _error("POST", ACCEPT, [])[1]["error"]["message"] == "Bad Request: empty JSON-RPC batch"
    status, body = _error("POST", ACCEPT, {"id": 7, "method": "ping"})
    assert (status, body["id"], body["error"]["code"]) == (400, 7, -32600)
    status, body = _error("POST", {**ACCEPT, "mcp-protocol-version": "1999-01-01"}, ping)
    assert status == 400 and "Unsupported protocol version: 1999-01-01" in body["error"]["message"]


def test_modern_header_rules() -> None:
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": ENVELOPE}}
    status, body = _error("POST", {**ACCEPT, "mcp-protocol-version": "2026-07-28"}, listing)
    assert (status, body["error"]["code"]) == (400, -32020)
    assert body["error"]["data"]["mismatch"]["header"] == "(missing)"
    assert _error("POST", _modern_headers("tools/call"), listing)[1]["error"]["code"] == -32020
    bare = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    status, body = _error("POST", _modern_headers("tools/list"), bare)
    assert (status, body["error"]["code"]) == (400, -32602)
    old = {**listing, "params": {"_meta": {**ENVELOPE, ENVELOPE_KEY: "1900-01-01"}}}
    headers = {**_modern_headers("tools/list"), "mcp-protocol-version": "1900-01-01"}
    status, body = _error("POST", headers, old)
    assert (status, body["error"]["code"]) == (400, -32022)
    assert body["error"]["data"] == {"supported": ["2026-07-28"], "requested": "1900-01-01"}
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "count_documents", "arguments": {}, "_meta": ENVELOPE},
    }
    message = _error("POST", _modern_headers("tools/call", "x"), call)[1]["error"]["message"]
    assert message.endswith('params.name="count_documents" but the Mcp-Name header names "x"')
    batch = _error("POST", ACCEPT, [listing])
    assert batch[0] == 400 and "batches may not contain" in batch[1]["error"]["message"]


ENVELOPE_KEY = "io.modelcontextprotocol/protocolVersion"


def test_framing_of_answers() -> None:
    session = Session(ToySurface(app_over(InMemoryStore()).services()))
    legacy = plan_mcp_request(
        "POST", ACCEPT, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    )
    reply = answer(session, legacy)
    assert (reply.status, reply.content_type) == (200, "text/event-stream")
    assert reply.body == b'event: message\ndata: {"result":{},"jsonrpc":"2.0","id":1}\n\n'
    note = plan_mcp_request(
        "POST", ACCEPT, b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    )
    assert answer(session, note).status == 202
    modern = {"jsonrpc": "2.0", "id": 4, "method": "nope", "params": {"_meta": ENVELOPE}}
    plan = plan_mcp_request("POST", _modern_headers("nope"), json.dumps(modern).encode())
    missing = answer(session, plan)
    assert (missing.status, missing.content_type) == (404, "application/json")
    assert json.loads(missing.body)["error"]["code"] == -32601


def test_bodies_are_decoded_by_the_wire_policy() -> None:
    """REQ-WIRE-PARSE-001 / REQ-WIRE-DEPTH-001 over HTTP (found by the HTTP fuzzer: a body the
    decoder gives up on was a bare 500, and nesting past 64 levels was served)."""
    for depth in (65, 100_000):
        body = b'{"jsonrpc":"2.0","id":7,"method":"ping","x":' + b"[" * depth + b"]" * depth + b"}"
        status, reply = _error("POST", ACCEPT, body)
        assert (status, reply["error"]["code"]) == (400, -32600)
        assert reply["id"] == (7 if depth == 65 else None)
    for literal in (b"NaN", b"-Infinity"):
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + literal + b"}}"
        assert _error("POST", ACCEPT, body) == (
            400,
            {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error: Invalid JSON"},
             "id": None},
        )  # fmt: skip
    # a 400-digit integer is a double beyond range, as over stdio (REQ-WIRE-PARAMS-001)
    body = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"n":' + b"1" * 400 + b"}}"
    plan = plan_mcp_request("POST", ACCEPT, body)
    assert plan.reply is None and plan.messages[0]["params"]["n"] == float("inf")

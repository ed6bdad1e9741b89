"""The JSON-RPC session and the stdio framing, with fakes wired through the composition root."""

from __future__ import annotations

import io
import json
from typing import Any

from adapters.mcp.compat import CompatSurface
from adapters.mcp.protocol import Session
from adapters.mcp.spec import SpecSurface
from adapters.mcp.stdio import OVERSIZED, encode_frame, read_lines, serve_stdio
from domain.model import DocumentMeta
from tests.fakes import InMemoryStore, app_over


class ExplodingStore(InMemoryStore):
    """A store whose document listing fails, to prove one bad call doesn't end the server."""

    def documents(self, collection: str | None = None) -> list[DocumentMeta]:
        raise RuntimeError("disk on fire")


def _session(store: InMemoryStore, compat: bool = False) -> Session:
    app = app_over(store)
    surface = CompatSurface(app.services()) if compat else SpecSurface(app.services(), "9.9.9")
    return Session(surface)


def _call(session: Session, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reply = session.handle_message(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )
    assert reply is not None
    result: dict[str, Any] = reply["result"]
    return result


def test_a_failing_tool_call_is_an_internal_error_result_and_the_session_goes_on() -> None:
    session = _session(ExplodingStore())
    failed = _call(session, "multi_get", {"pattern": "*.md"})
    assert failed["isError"] is True
    assert failed["structuredContent"]["error"]["code"] == "internal-error"
    assert "RuntimeError" in failed["content"][0]["text"]
    assert session.handle_message({"jsonrpc": "2.0", "id": 2, "method": "ping"}) == {
        "result": {},
        "jsonrpc": "2.0",
        "id": 2,
    }


def test_compat_surface_answers_a_failing_call_with_the_exception_message() -> None:
    failed = _call(_session(ExplodingStore(), compat=True), "multi_get", {"pattern": "*.md"})
    assert failed == {"content": [{"type": "text", "text": "disk on fire"}], "isError": True}


def test_spec_surface_answers_malformed_messages_and_compat_stays_silent() -> None:
    spec, compat = _session(InMemoryStore()), _session(InMemoryStore(), compat=True)
    cases = [
        "{oops",
        "[]",
        '{"jsonrpc":"2.0","id":null,"method":"ping"}',
        '{"id":1,"method":"ping"}',
    ]
    expected = [-32700, -32600, -32600, -32600]
    for line, code in zip(cases, expected, strict=True):
        reply = spec.handle_text(line)
        assert reply is not None and reply["error"]["code"] == code, line
        assert compat.handle_text(line) is None, line


def test_validation_messages_follow_the_original_wording() -> None:
    result = _call(_session(InMemoryStore(), compat=True), "get", {"file": 5, "fromLine": "x"})
    assert result["content"][0]["text"] == (
        "Input validation error: Invalid arguments for tool get: "
        "file: Invalid input: expected string, received number, "
        "fromLine: Invalid input: expected number, received string"
    )


def test_read_lines_splits_on_newlines_and_flags_oversized_lines() -> None:
    stream = io.BytesIO(b'{"a":1}\n' + b"x" * 50 + b"\nlast")
    assert list(read_lines(stream, max_bytes=20)) == [b'{"a":1}', OVERSIZED, b"last"]


def test_read_lines_handles_a_line_split_across_reads() -> None:
    class Trickle(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self._data = data

        def readable(self) -> bool:
            return True

        def read1(self, size: int = -1) -> bytes:
            piece, self._data = self._data[:3], self._data[3:]
            return piece

    lines = list(read_lines(Trickle(b"abcdefg\nhij\n"), max_bytes=100))  # type: ignore[arg-type]
    assert lines == [b"abcdefg", b"hij"]


def test_frames_are_single_lines_with_javascript_numbers() -> None:
    frame = encode_frame({"result": {"score": 1.0, "text": "a\nb", "cjk": "中文"}, "id": 1})
    assert frame.count(b"\n") == 1 and frame.endswith(b"\n")
    assert json.loads(frame) == {"result": {"score": 1, "text": "a\nb", "cjk": "中文"}, "id": 1}
    assert b'"score":1,' in frame and "中文".encode() in frame


def test_serve_stdio_answers_each_request_and_returns_zero_on_eof() -> None:
    session = _session(InMemoryStore())
    stdin = io.BytesIO(
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
    )
    stdout = io.BytesIO()
    assert serve_stdio(session, stdin=stdin, stdout=stdout) == 0
    replies = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert [r["id"] for r in replies] == [1, 2]


_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _request(session: Session, req_id: int, method: str, meta: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "method": method}
    if meta is not None:
        message["params"] = {"_meta": meta}
    reply = session.handle_message(message)
    assert reply is not None
    return reply


def test_an_opening_envelope_error_decides_nothing_and_a_modern_request_pins_the_era() -> None:
    session = _session(InMemoryStore())
    partial = _request(
        session, 1, "tools/list", {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    )
    assert partial["error"]["data"] == {
        "envelope": {"key": "io.modelcontextprotocol/clientCapabilities", "problem": "missing"}
    }
    assert _request(session, 2, "tools/list", _ENVELOPE)["result"]["resultType"] == "complete"
    plain = _request(session, 3, "tools/list")
    assert plain["error"]["code"] == -32602
    assert plain["error"]["message"].startswith("Request is missing the required _meta envelope")
    assert _request(session, 4, "ping")["error"]["code"] == -32601
    assert _request(session, 5, "initialize")["error"] == {
        "code": -32022,
        "message": "Unsupported protocol version: the request did not name a protocol version",
        "data": {"supported": ["2026-07-28"]},
    }


def test_discover_only_probes_and_a_plain_request_pins_the_2025_era() -> None:
    session = _session(InMemoryStore())
    assert "supportedVersions" in _request(session, 1, "server/discover", _ENVELOPE)["result"]
    assert _request(session, 2, "ping")["result"] == {}
    after = _request(session, 3, "tools/list", _ENVELOPE)
    assert "resultType" not in after["result"] and "_meta" not in after["result"]
    assert _request(session, 4, "server/discover", _ENVELOPE)["error"]["code"] == -32601

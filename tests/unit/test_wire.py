"""The wire policy (REQ-WIRE-*): what a frame may hold, and that every reply is strict JSON.

Each class the fuzzer ever found (issue 11: lone surrogates, non-finite numbers, deep nesting,
invalid UTF-8) is pinned here on both surfaces, through the session a real server runs.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.mcp.compat import CompatSurface
from adapters.mcp.protocol import MAX_DEPTH, FrameError, Session, decode_frame, encode_frame
from adapters.mcp.spec import SpecSurface
from adapters.mcp.stdio import serve_stdio
from tests.fakes import InMemoryStore, app_over


def _session(compat: bool) -> Session:
    app = app_over(InMemoryStore())
    surface = CompatSurface(app.services()) if compat else SpecSurface(app.services(), "9.9.9")
    return Session(surface)


def strict_loads(frame: bytes) -> Any:
    """What a strict peer accepts: UTF-8, no NaN/Infinity, no lone surrogates."""
    text = frame.decode("utf-8")

    def refuse(name: str) -> Any:
        raise ValueError(name)

    parsed = json.loads(text, parse_constant=refuse)
    # a lone surrogate escape would come back as a str that UTF-8 cannot encode
    json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    return parsed


def _nested(depth: int) -> str:
    return (
        '{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":' + "[" * depth + "]" * depth + "}}"
    )


# -- decoding ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["NaN", '{"id": Infinity}', "[-Infinity]", "{oops", "\ufeff{}"])
def test_non_json_text_is_a_parse_error(text: str) -> None:
    with pytest.raises(FrameError) as raised:
        decode_frame(text)
    assert raised.value.code == -32700


def test_invalid_utf8_is_a_parse_error() -> None:
    with pytest.raises(FrameError) as raised:
        decode_frame(b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff\xfe"}')
    assert raised.value.code == -32700


def test_nesting_the_parser_cannot_follow_is_an_invalid_request_not_a_crash() -> None:
    with pytest.raises(FrameError) as raised:
        decode_frame("[" * 100_000 + "]" * 100_000)
    assert raised.value.code == -32600


def test_a_huge_integer_literal_becomes_a_non_finite_double() -> None:
    assert decode_frame("1" * 5000) == math.inf
    assert decode_frame("12345678901234567890") == 12345678901234567890


# -- the session's answers ----------------------------------------------------------------


SPEC_ANSWERS = [
    # (frame, code, id): REQ-WIRE-PARSE-001, -ID-001, -PARAMS-001, -DEPTH-001
    (b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', -32700, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\xc3"}}', -32700, None),
    (b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":-1e999,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":"\\udc00","method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":1e999}}', -32602, 3),
    (
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call",'
        b'"params":{"name":"get","arguments":{"file":"a.md","fromLine":1e999}}}',
        -32602,
        4,
    ),
    (
        b'{"jsonrpc":"2.0","id":5,"method":"tools/call",'
        b'"params":{"name":"search","arguments":{"query":"\\ud83d oops"}}}',
        -32602,
        5,
    ),
    (b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"\\udfff":1}}', -32602, 6),
    (_nested(MAX_DEPTH + 5).encode(), -32600, 7),
    (_nested(5000).encode(), -32600, None),
]


@pytest.mark.parametrize(("frame", "code", "request_id"), SPEC_ANSWERS)
def test_spec_surface_answers_every_class_with_its_code(
    frame: bytes, code: int, request_id: Any
) -> None:
    reply = _session(compat=False).handle_text(frame)
    assert reply is not None
    assert reply["error"]["code"] == code
    assert reply["id"] == request_id
    strict_loads(encode_frame(reply))


@pytest.mark.parametrize(("frame", "code", "request_id"), SPEC_ANSWERS)
def test_compat_surface_drops_frames_that_are_not_requests(
    frame: bytes, code: int, request_id: Any
) -> None:
    reply = _session(compat=True).handle_text(frame)
    if code == -32602:  # a request: read leniently, like the original (REQ-WIRE-COMPAT-001)
        assert reply is not None and reply["id"] == request_id
        strict_loads(encode_frame(reply))
    else:  # the original drops what is not a valid request (REQ-MCP-STDIO-002)
        assert reply is None


def test_compat_reads_non_finite_arguments_as_the_originals_validator_does() -> None:
    reply = _session(compat=True).handle_text(
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call",'
        b'"params":{"name":"get","arguments":{"file":"a.md","fromLine":1e999}}}'
    )
    assert reply is not None
    assert reply["result"] == {
        "content": [
            {
                "type": "text",
                "text": "Input validation error: Invalid arguments for tool get: "
                "fromLine: Invalid input: expected number, received number",
            }
        ],
        "isError": True,
    }


def test_compat_reads_lone_surrogates_as_replacement_characters() -> None:
    reply = _session(compat=True).handle_text(
        b'{"jsonrpc":"2.0","id":5,"method":"tools/call",'
        b'"params":{"name":"get","arguments":{"file":"\\udc00.md"}}}'
    )
    assert reply is not None
    assert reply["result"]["content"][0]["text"] == "Document not found: \ufffd.md"


def test_paired_surrogate_escapes_are_ordinary_text() -> None:
    reply = _session(compat=False).handle_text(
        b'{"jsonrpc":"2.0","id":"\\ud83d\\ude00","method":"ping"}'
    )
    assert reply == {"result": {}, "jsonrpc": "2.0", "id": "\U0001f600"}
    assert strict_loads(encode_frame(reply))["id"] == "\U0001f600"


def test_nesting_within_the_limit_is_served() -> None:
    reply = _session(compat=False).handle_text(_nested(MAX_DEPTH - 3).encode())
    assert reply == {"result": {}, "jsonrpc": "2.0", "id": 7}


# -- encoding -----------------------------------------------------------------------------


def test_the_encoder_never_writes_non_json_numbers_or_lone_surrogates() -> None:
    frame = encode_frame(
        {"id": 1, "result": {"a": math.inf, "b": -math.inf, "c": math.nan, "d": 2.0, "e": 0.5}}
    )
    assert strict_loads(frame) == {
        "id": 1,
        "result": {"a": None, "b": None, "c": None, "d": 2, "e": 0.5},
    }
    frame = encode_frame({"id": 1, "result": {"text\udc80": "bad \ud800 name", "ok": "中文"}})
    assert strict_loads(frame) == {
        "id": 1,
        "result": {"text\ufffd": "bad \ufffd name", "ok": "中文"},
    }


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),  # hypothesis text includes lone surrogates
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_any_reply_content_encodes_to_one_strict_line(value: Any) -> None:
    frame = encode_frame({"jsonrpc": "2.0", "id": 1, "result": {"v": value}})
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    strict_loads(frame)


def test_a_client_that_goes_away_ends_the_server_cleanly() -> None:
    class GoneAway(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            raise BrokenPipeError

    stdin = io.BytesIO(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n' * 3)
    closed: list[bool] = []
    code = serve_stdio(
        _session(compat=False), stdin=stdin, stdout=GoneAway(), on_close=lambda: closed.append(True)
    )
    assert code == 0 and closed == [True]


def test_blank_and_whitespace_frames_get_no_reply_on_either_surface() -> None:
    for compat in (False, True):
        for line in (b"", b"   ", b"\t\r"):
            assert _session(compat).handle_text(line) is None

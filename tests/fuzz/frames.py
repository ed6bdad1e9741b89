"""Frame generation for the wire fuzzer: structure-aware requests built from the tools'
input schemas, plus raw mutations (wrong types, odd ids, huge numbers, invalid UTF-8, lone
surrogate escapes, deep nesting, 1 MB strings).

Every choice goes through a `Source`, so the same grammar runs from a seeded `random.Random`
(fast, for 100,000-frame runs) or from hypothesis' `st.data()` (shrinking, in pytest).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")


class Source(Protocol):
    def integer(self, low: int, high: int) -> int: ...
    def pick(self, options: Sequence[T]) -> T: ...
    def chance(self, probability: float) -> bool: ...


class RandomSource:
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self._rng.randint(low, high)

    def pick(self, options: Sequence[T]) -> T:
        return options[self._rng.randrange(len(options))]

    def chance(self, probability: float) -> bool:
        return self._rng.random() < probability


class HypothesisSource:
    def __init__(self, data: st.DataObject) -> None:
        self._data = data

    def integer(self, low: int, high: int) -> int:
        return self._data.draw(st.integers(low, high))

    def pick(self, options: Sequence[T]) -> T:
        return options[self._data.draw(st.integers(0, len(options) - 1))]

    def chance(self, probability: float) -> bool:
        return self._data.draw(st.integers(0, 999)) < probability * 1000


class Raw:
    """A JSON token written verbatim (`1e999`, `NaN`): Python's encoder cannot produce them."""

    def __init__(self, token: str) -> None:
        self.token = token


def encode(value: Any) -> bytes:
    """JSON text with `Raw` tokens spliced in; lone surrogates come out as `\\udXXX` escapes."""
    raws: list[str] = []

    def default(item: Any) -> Any:
        if isinstance(item, Raw):
            raws.append(item.token)
            return f"\x00RAW{len(raws) - 1}\x00"
        raise TypeError(type(item).__name__)

    text = json.dumps(value, default=default, ensure_ascii=True, allow_nan=True)
    for index, token in enumerate(raws):
        text = text.replace(f'"\\u0000RAW{index}\\u0000"', token)
    return text.encode("ascii")


PATHS = [
    "readme.md", "handbook/readme.md", "qmd://handbook/readme.md", "engineering/architecture.md",
    "engineering/architecture.md:5:3", "#abc123", "abc123", "../../etc/passwd", "/etc/passwd",
    "~/x.md", "qmd://other/x.md", "special-chars (v2) & more.md", "notes/中文笔记.md", "",
    " ", "a" * 300, "%2e%2e/%2e%2e/x", "qmd://handbook/../../x", "\\\\server\\share",
]  # fmt: skip
PATTERNS = [
    "*.md", "**/*.md", "handbook/**", "{a,b}.md", "[abc]*.md", "!(*.md)", "@(a|b)*",
    "readme.md, engineering/architecture.md", "#abc123,#def456", "*a" * 30 + "*b",
    "**/" * 20 + "x", "[", "{", "{a..z}{1..9}", "./*.md", "!*.md", ",", "*,*",
]  # fmt: skip
WORDS = [
    "authentication",
    "api",
    "BM25",
    "rate limits",
    "中文",
    "-term",
    '"exact phrase"',
    "auth*",
    "2.8.3",
    "hyphen-ated",
    "don't",
    "a b",
    "",
    " ",
    "\t",
    '"',
    "-",
    "NEAR(a b)",
]
ODD_STRINGS = [
    "\udc00",
    "\ud83d",
    "x\udfffy",
    "\ud83d\ude00",
    "\u0000",
    "\u2028",
    "\ufeff",
    "\x7f",
    "é" * 10,
    "🙂" * 5,
    "\n",
    "\r\n",
]
NUMBERS: list[Any] = [
    0,
    1,
    -1,
    2,
    10,
    200,
    201,
    10**6,
    2**31,
    2**53 + 1,
    10**30,
    -(10**30),
    0.5,
    -0.0,
    1.5,
    1e300,
    -1e300,
    Raw("1e999"),
    Raw("-1e999"),
    Raw("1E400"),
    Raw("0.0000001e-400"),
    Raw("1" * 400),
]


def string(source: Source, pool: Sequence[str]) -> str:
    roll = source.integer(0, 99)
    if roll < 55:
        return source.pick(pool)
    if roll < 70:
        return source.pick(pool) + source.pick(ODD_STRINGS)
    if roll < 80:
        return source.pick(ODD_STRINGS)
    if roll < 88:
        return " ".join(source.pick(WORDS) for _ in range(source.integer(2, 40)))
    if roll < 93:
        return source.pick(["a b ", "x", "文", "*a", "中 ", "-q "]) * source.integer(100, 4000)
    if source.chance(0.5):
        return "x" * source.pick([4000, 4001, 4096, 4097, 65536, 1_000_000])
    return source.pick(["a b ", "*a", "文", "\\"]) * 250_000


def wrong_type(source: Source) -> Any:
    return source.pick(
        [None, True, False, [], {}, [1, "a"], {"a": 1}, "str", 3, Raw("NaN"), Raw("Infinity")]
    )


def value_for(source: Source, schema: dict[str, Any], name: str, depth: int = 0) -> Any:
    if source.chance(0.12):
        return wrong_type(source)
    kind = schema.get("type")
    if "enum" in schema:
        return source.pick([*schema["enum"], "other", ""])
    if kind == "string":
        pool = PATTERNS if name == "pattern" else PATHS if name in ("file", "uri") else WORDS
        return string(source, pool)
    if kind in ("number", "integer"):
        return source.pick(NUMBERS)
    if kind == "boolean":
        return source.chance(0.5)
    if kind == "array":
        items = schema.get("items", {})
        count = source.pick([0, 1, 2, 3, 10, 11])
        return [value_for(source, items, name, depth + 1) for _ in range(count)]
    if kind == "object" and depth < 4:
        return arguments_for(source, schema, depth + 1)
    return wrong_type(source)


def arguments_for(source: Source, schema: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    arguments = {
        name: value_for(source, prop, name, depth)
        for name, prop in properties.items()
        if (name in required and source.chance(0.95)) or source.chance(0.45)
    }
    if source.chance(0.1):
        arguments[source.pick(["extra", "__proto__", "\udc00", "", "constructor"])] = 1
    return arguments


def request_id(source: Source, counter: int) -> Any:
    roll = source.integer(0, 99)
    if roll < 60:
        return counter
    if roll < 80:
        return f"r-{counter}"
    return source.pick(
        [
            0,
            -counter,
            f"\udc00-{counter}",
            f"🙂{counter}",
            1.5,
            Raw("1e999"),
            Raw("NaN"),
            None,
            True,
            [],
            {},
            2**53 + counter,
            10**20 + counter,
            float(counter),
            "",
            Raw("-0"),
        ]
    )


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def message(source: Source, tools: list[dict[str, Any]], counter: int) -> dict[str, Any]:
    """A structurally valid-looking JSON-RPC message (possibly with bad values inside)."""
    roll = source.integer(0, 99)
    params: Any
    if roll < 60 and tools:
        tool = source.pick(tools)
        name = tool["name"] if source.chance(0.95) else source.pick(["nosuch", "", "\udc00"])
        params = {"name": name}
        if source.chance(0.93):
            params["arguments"] = arguments_for(source, tool["inputSchema"])
        method = "tools/call"
    else:
        method = source.pick(
            [
                "initialize",
                "ping",
                "tools/list",
                "resources/list",
                "resources/templates/list",
                "resources/read",
                "prompts/list",
                "prompts/get",
                "server/discover",
                "nosuch/method",
                "logging/setLevel",
                "completion/complete",
                "notifications/initialized",
            ]
        )
        params = {
            "initialize": {
                "protocolVersion": source.pick(["2025-06-18", "1999", 5, "\udc00"]),
                "capabilities": {},
                "clientInfo": {"name": "fuzz", "version": "1"},
            },
            "resources/read": {"uri": "qmd://" + string(source, PATHS)},
            "prompts/get": {"name": source.pick(["query", "nope", 5])},
        }.get(method, {})
    if source.chance(0.1) and isinstance(params, dict):
        params["_meta"] = (
            MODERN_META
            if source.chance(0.7)
            else {
                "io.modelcontextprotocol/protocolVersion": source.pick(
                    ["2026-07-28", "2099-01-01", 1]
                )
            }
        )
    if source.chance(0.05):
        params = wrong_type(source)
    frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if not (method.startswith("notifications/") or source.chance(0.04)):
        frame["id"] = request_id(source, counter)
    if params is not None or source.chance(0.5):
        frame["params"] = params
    if source.chance(0.03):
        frame["jsonrpc"] = source.pick(["1.0", 2, None])
    return frame


def mutate(source: Source, data: bytes) -> bytes:
    """A raw mutation of an encoded frame."""
    kind = source.integer(0, 11)
    if kind == 0 and data:
        return data[: source.integer(0, len(data) - 1)]  # truncated
    if kind == 1 and data:
        at = source.integer(0, len(data) - 1)
        return data[:at] + bytes([source.integer(0, 255)]) + data[at + 1 :]  # one byte changed
    if kind == 2:
        return data.replace(b'"2.0"', b'"2.0\xff\xfe"', 1)  # invalid UTF-8
    if kind == 3:
        depth = source.pick([10, 63, 65, 100, 1000, 5000, 100_000])
        return data[:-1] + b',"deep":' + b"[" * depth + b"]" * depth + b"}"
    if kind == 4:
        return b"[" + data + b"]"  # a batch
    if kind == 5:
        return source.pick(
            [b"", b"   ", b"\t", b"null", b"1", b'"x"', b"[]", b"{}", b"\xef\xbb\xbf{}"]
        )
    if kind == 6:
        return data.replace(b":", b':NaN,"x":', 1)
    if kind == 7:
        return b"\xef\xbb\xbf" + data  # byte order mark
    if kind == 8:
        return data[:-1] + b',"pad":"' + b"x" * 1_000_000 + b'"}'
    if kind == 9:
        return data.replace(b'"id":', b'"id":1,"id":', 1)  # duplicate member
    if kind == 10:
        return data + b"\r"  # CRLF framing
    return data.replace(b"}", b"", 1)  # unbalanced


def frame(source: Source, tools: list[dict[str, Any]], counter: int) -> bytes:
    """One line (without its newline) to send."""
    data = encode(message(source, tools, counter))
    if source.chance(0.25):
        data = mutate(source, data)
    return data.replace(b"\n", b"\\n")

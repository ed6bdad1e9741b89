"""A deliberately small JSONPath subset: `$`, `.key`, `["key"]`, `[N]`, `[*]`.

Enough to name any node in an MCP message and to point diffs at it; nothing that needs a
query language (filters, recursion) is supported, so a path always means one thing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

Segment = str | int | None  # None stands for [*]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class PathError(ValueError):
    pass


def parse(path: str) -> list[Segment]:
    if not path.startswith("$"):
        raise PathError(f"path must start with $: {path!r}")
    out: list[Segment] = []
    i = 1
    while i < len(path):
        ch = path[i]
        if ch == ".":
            m = _IDENT.match(path, i + 1)
            if not m:
                raise PathError(f"bad key after '.' at {i} in {path!r}")
            out.append(m.group(0))
            i = m.end()
        elif ch == "[":
            end = path.find("]", i)
            if end < 0:
                raise PathError(f"unclosed [ in {path!r}")
            inner = path[i + 1 : end]
            if inner.startswith('"'):
                # A quoted key may itself contain ']' so decode it as a JSON string.
                key, consumed = json.JSONDecoder().raw_decode(path, i + 1)
                if path[consumed] != "]":
                    raise PathError(f"expected ] after key in {path!r}")
                out.append(str(key))
                i = consumed + 1
                continue
            if inner == "*":
                out.append(None)
            elif inner.isdigit():
                out.append(int(inner))
            else:
                raise PathError(f"bad index [{inner}] in {path!r}")
            i = end + 1
        else:
            raise PathError(f"unexpected {ch!r} at {i} in {path!r}")
    return out


def format_path(segments: list[Segment]) -> str:
    parts = ["$"]
    for seg in segments:
        if seg is None:
            parts.append("[*]")
        elif isinstance(seg, int):
            parts.append(f"[{seg}]")
        elif _IDENT.fullmatch(seg):
            parts.append(f".{seg}")
        else:
            parts.append(f"[{json.dumps(seg, ensure_ascii=False)}]")
    return "".join(parts)


def child(path: str, seg: str | int) -> str:
    return format_path([*parse(path), seg])


def find(doc: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Yield (concrete path, value) for every node the path selects."""
    yield from _walk(doc, parse(path), [])


def _walk(node: Any, rest: list[Segment], here: list[Segment]) -> Iterator[tuple[str, Any]]:
    if not rest:
        yield format_path(here), node
        return
    seg, tail = rest[0], rest[1:]
    if seg is None:
        if isinstance(node, list):
            for idx, item in enumerate(node):
                yield from _walk(item, tail, [*here, idx])
        elif isinstance(node, dict):
            for key, item in node.items():
                yield from _walk(item, tail, [*here, key])
    elif isinstance(seg, int):
        if isinstance(node, list) and 0 <= seg < len(node):
            yield from _walk(node[seg], tail, [*here, seg])
    elif isinstance(node, dict) and seg in node:
        yield from _walk(node[seg], tail, [*here, seg])


def set_value(doc: Any, concrete_path: str, value: Any) -> None:
    segs = parse(concrete_path)
    if not segs:
        raise PathError("cannot replace the root")
    node = doc
    for seg in segs[:-1]:
        node = node[seg]
    node[segs[-1]] = value

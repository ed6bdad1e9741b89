"""Hostile requests, timed: the inputs issue 11 found expensive, against both MCP surfaces.

    .venv/bin/python -m benchmarks.bench_hostile [--huge-mb 10] [--json OUT]

Indexes a corpus with one huge markdown file (`--huge-mb`, default 10: files over 10 MiB are
not indexed since ADR 0022, so a larger one would only measure not-found) and a file named with
30 `a`s, then times each request of the issue's list on `qmd mcp` and `qmd mcp --compat 2.8.3`
and prints its seconds, the reply's size and its first words (a refusal names its bound), and
each server's peak RSS. Before issue 11: `a b` x 3,000 took 42 s, the `*a…*b` glob 29 s, a
1 MB pattern no answer within 60 s, and `get` of a 50 MB file a 52 MB reply after 21 s.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import McpServer, ours

LINE = "The quick brown fox jumps over the lazy dog while counting sheep, line "


def _corpus(root: Path, huge_mb: int) -> Path:
    docs = root / "docs"
    docs.mkdir(parents=True)
    for n in range(200):
        (docs / f"note-{n:03d}.md").write_text(f"# Note {n}\n\nabout api and auth {n}\n")
    (docs / ("a" * 30 + ".md")).write_text("# Thirty a\n\nbody\n")
    with (docs / "huge.md").open("w", encoding="utf-8") as out:
        out.write("# Huge\n\n")
        written, n = 0, 0
        while written < huge_mb * 1_000_000:
            row = f"{LINE}{n}\n"
            out.write(row)
            written += len(row)
            n += 1
    return docs


def _requests(compat: bool) -> list[tuple[str, str, dict[str, Any]]]:
    def search(text: str) -> tuple[str, dict[str, Any]]:
        if compat:
            return "query", {"searches": [{"type": "lex", "query": text}], "rerank": False}
        return "search", {"query": text}

    alternating = ("a b " * 250_000).strip()
    cases: list[tuple[str, tuple[str, dict[str, Any]]]] = [
        ("search `a b` x 3,000 (12 KB)", search(("a b " * 3000).strip())),
        ("search of 1 MB alternating words", search(alternating)),
        ("search of 1 MB CJK", search("文" * 1_000_000)),
        ("multi_get `*a` x 14 + `*b`", ("multi_get", {"pattern": "*a" * 14 + "*b"})),
        ("multi_get 1 MB literal pattern", ("multi_get", {"pattern": "x" * 1_000_000})),
        ("get of a 600 KB path", ("get", {"file": "y" * 600_000})),
        ("get docs/huge.md", ("get", {"file": "docs/huge.md"})),
        (
            "get docs/huge.md fromLine 300000",
            ("get", {"file": "docs/huge.md", "fromLine": 300_000}),
        ),
        (
            "multi_get docs/huge.md, maxBytes 1e9",
            ("multi_get", {"pattern": "docs/huge.md", "maxBytes": 1e9}),
        ),
    ]
    out = [(label, tool, args) for label, (tool, args) in cases]
    out.append(("resources/read qmd://docs/huge.md", "", {"uri": "qmd://docs/huge.md"}))
    return out


def _row(server: McpServer, tool: str, args: dict[str, Any]) -> tuple[float, int, str]:
    if tool:
        reply, seconds = server.request("tools/call", {"name": tool, "arguments": args})
    else:
        reply, seconds = server.request("resources/read", args)
    size = len(json.dumps(reply, ensure_ascii=False).encode("utf-8"))
    result = reply.get("result", {})
    text = ""
    if isinstance(result, dict):
        items = result.get("content") or result.get("contents") or []
        if items:
            first = items[0]
            text = first.get("text") or first.get("resource", {}).get("text", "")
    if "error" in reply:
        text = reply["error"].get("message", "")
    verdict = "error: " + text[:70] if result.get("isError") or "error" in reply else "answered"
    return seconds, size, verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--huge-mb", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="qmd-hostile-"))
    docs = _corpus(root / "corpus", args.huge_mb)
    impl = ours(root / "home")
    done, seconds = impl.run("collection", "add", str(docs), "--name", "docs")
    print(f"index: {args.huge_mb} MB file + 201 notes in {seconds:.1f} s (rc {done.returncode})")
    figures: list[dict[str, Any]] = []
    for compat in (False, True):
        surface = "compat-2.8.3" if compat else "spec"
        extra = ("--compat", "2.8.3") if compat else ()
        with McpServer(impl, *extra) as server:
            server.initialize()
            for label, tool, arguments in _requests(compat):
                took, size, verdict = _row(server, tool, arguments)
                print(f"{surface:13} {label:42} {took:7.2f} s {size:>11,} B  {verdict}")
                figures.append(
                    {
                        "surface": surface,
                        "request": label,
                        "seconds": round(took, 3),
                        "reply_bytes": size,
                        "verdict": verdict,
                    }
                )
            peak = server.peak_rss_kib() or 0
            print(f"{surface:13} peak RSS {peak / 1024:.0f} MB")
            figures.append({"surface": surface, "peak_rss_mb": round(peak / 1024, 1)})
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A tiny, real stdio MCP-ish server for testing the runner without any QMD installed.

It answers ping, tools/list and tools/call "echo"; every other method gets -32601; bad JSON
gets -32700. `--wrong` makes tools/list name its tool "ekho" (a seeded defect).
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    wrong = "--wrong" in sys.argv
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse"}}
            print(json.dumps(reply), flush=True)
            continue
        if "id" not in msg:
            continue  # notification
        method = msg.get("method")
        result: object
        if method == "initialize":
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "serverInfo": {"name": "mini", "version": "0.0.1"},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": [{"name": "ekho" if wrong else "echo", "inputSchema": {}}]}
        elif method == "tools/call":
            text = json.dumps(msg.get("params", {}).get("arguments", {}), sort_keys=True)
            result = {"content": [{"type": "text", "text": text}]}
        else:
            print(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "error": {"code": -32601, "message": "Method not found"},
                    }
                ),
                flush=True,
            )
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)


if __name__ == "__main__":
    main()

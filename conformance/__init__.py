"""qmd-conformance: replays MCP JSON-RPC cases against any QMD server over the wire."""

__version__ = "0.1.0"

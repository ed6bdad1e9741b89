"""QMD as a service: MCP over Streamable HTTP, the REST search route and the daemon."""

"""A surface that exists only for the tests: shows that a new MCP surface is one module plus
one registry line, served by the unchanged Session and stdio transport."""

from __future__ import annotations

from typing import Any

from adapters.mcp.registry import SurfaceContext, register_surface
from adapters.mcp.tools import SurfaceFacts, Tool, ToolFacts, call_tool, tool_table
from adapters.mcp.wording import JsonRpcError, JsonRpcWording, ProtocolWording
from domain.errors import DocumentNotFoundError, QmdError
from domain.usecases.services import Services

COUNT_TOOL = {
    "name": "count_documents",
    "description": "How many documents the index holds.",
    "inputSchema": {
        "type": "object",
        "properties": {"collection": {"type": "string"}},
    },
}


FACTS = SurfaceFacts({"count_documents": ToolFacts()})


class ToyErrors:
    def invalid_arguments(self, tool: str, issues: list[str]) -> dict[str, Any]:
        return {
            "content": [{"type": "text", "text": f"toy: bad {tool}: {issues}"}],
            "isError": True,
        }

    def not_found(self, error: DocumentNotFoundError) -> dict[str, Any]:
        return self.failed(error)

    def failed(self, error: QmdError) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"toy: {error.code}"}], "isError": True}

    def crashed(self, tool: str, error: Exception) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "toy: crashed"}], "isError": True}


class ToySurface:
    name = "toy"
    facts = FACTS
    server_version = "0.0.1-toy"
    answers_malformed_messages = True
    wording: ProtocolWording = JsonRpcWording()

    def __init__(self, services: Services) -> None:
        self._services = services
        self._tools = tool_table([Tool(COUNT_TOOL, self._count)])

    def _count(self, args: dict[str, Any]) -> dict[str, Any]:
        status = self._services.status.status()
        wanted = args.get("collection")
        counts = {c.name: c.documents for c in status.collections}
        if wanted is not None and wanted not in counts:
            raise QmdError("not-found", wanted)
        total = counts[wanted] if wanted else status.total_documents
        return {"content": [{"type": "text", "text": str(total)}]}

    def capabilities(self) -> dict[str, Any]:
        return {"tools": {"listChanged": False}}

    def instructions(self) -> str | None:
        return "A toy surface."

    def tools(self) -> list[dict[str, Any]]:
        return [COUNT_TOOL]

    def call_tool(self, name: str, arguments: Any) -> dict[str, Any]:
        return call_tool(self._tools, ToyErrors(), name, arguments)

    def prompts(self) -> list[dict[str, Any]] | None:
        return None

    def get_prompt(self, name: str, arguments: Any) -> dict[str, Any]:
        raise JsonRpcError(-32601, "Method not found")

    def resource_templates(self) -> list[dict[str, Any]]:
        return []

    def read_resource(self, uri: str) -> dict[str, Any]:
        raise JsonRpcError(-32602, f"Resource not found: {uri}")


def _toy(services: Services, _context: SurfaceContext) -> ToySurface:
    return ToySurface(services)


register_surface("toy", _toy, aliases=("plaything",), facts=FACTS)

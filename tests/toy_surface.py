"""A surface that exists only for the tests: shows that a new MCP surface is one module plus
one registry line, served by the unchanged Session and stdio transport."""

from __future__ import annotations

from typing import Any

from adapters.mcp.registry import SurfaceContext, register_surface
from adapters.mcp.tools import BaseSurface, ToolFacts, tool
from domain.errors import DocumentNotFoundError, QmdError
from domain.usecases.services import Services


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


class ToySurface(BaseSurface):
    name = "toy"
    errors = ToyErrors()
    instructions_text = "A toy surface."

    def __init__(self, services: Services) -> None:
        super().__init__("0.0.1-toy")
        self._services = services

    @tool(
        "count_documents",
        "How many documents the index holds.",
        schema={
            "type": "object",
            "properties": {"collection": {"type": "string"}},
            "additionalProperties": False,  # as every surface of this project's own
        },
        example={"collection": "handbook"},
        facts=ToolFacts(),
    )
    def _count(self, args: dict[str, Any]) -> dict[str, Any]:
        status = self._services.status.status()
        wanted = args.get("collection")
        counts = {c.name: c.documents for c in status.collections}
        if wanted is not None and wanted not in counts:
            raise QmdError("not-found", wanted)
        total = counts[wanted] if wanted else status.total_documents
        return {"content": [{"type": "text", "text": str(total)}]}


def _toy(services: Services, _context: SurfaceContext) -> ToySurface:
    return ToySurface(services)


register_surface("toy", _toy, aliases=("plaything",), facts=ToySurface.facts)

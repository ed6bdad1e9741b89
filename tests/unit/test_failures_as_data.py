"""Seed 001 answers an unknown tool and a resource URI outside the templates as data on the
surfaces that declare it (`SurfaceFacts.failures_as_data`, REQ-SPEC-ERR-002, REQ-SPEC-ERR-003);
the others, the compat surface first, keep JSON-RPC error -32602 (REQ-TOOL-CALL-001,
REQ-RES-READ-005). Generated from the registry: a new surface is covered by registering it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.guarantees import Rig, served_surfaces

SURFACES = served_surfaces()
FOREIGN_URI = "file:///etc/hosts"


def _request(rig: Rig, method: str, params: dict[str, Any]) -> dict[str, Any]:
    reply = rig.session().handle_message(
        {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
    )
    assert reply is not None and reply["id"] == 9
    return reply


def test_the_default_surface_and_compat_declare_opposite_answers() -> None:
    assert Rig("spec").facts.failures_as_data is True
    assert Rig("compat-2.8.3").facts.failures_as_data is False


@pytest.mark.parametrize("surface", SURFACES)
def test_an_unknown_tool_is_answered_as_the_surface_declares(surface: str) -> None:
    rig = Rig(surface)
    reply = _request(rig, "tools/call", {"name": "no_such_tool", "arguments": {}})
    if not rig.facts.failures_as_data:
        assert reply["error"] == {"code": -32602, "message": "Tool no_such_tool not found"}
        return
    assert "error" not in reply
    result = reply["result"]
    listed = ", ".join(tool["name"] for tool in rig.tools())
    message = f"Tool no_such_tool not found (tools: {listed})"
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": message}]
    assert result["structuredContent"] == {
        "success": False,
        "error": {"code": "not-found", "message": message},
    }


@pytest.mark.parametrize("surface", SURFACES)
def test_a_uri_outside_the_templates_is_answered_as_the_surface_declares(surface: str) -> None:
    rig = Rig(surface)
    session = rig.session()
    reply = _request(rig, "resources/read", {"uri": FOREIGN_URI})
    if "resources" not in session.surface.capabilities():  # no resources: REQ-SPEC-RES-003
        assert reply["error"] == {"code": -32601, "message": "Method not found"}
        return
    if not rig.facts.failures_as_data:
        assert reply["error"]["code"] == -32602
        assert reply["error"]["message"] == f"Resource not found: {FOREIGN_URI}"
        return
    assert "error" not in reply
    served = ", ".join(t["uriTemplate"] for t in session.surface.resource_templates())
    (content,) = reply["result"]["contents"]
    assert content["uri"] == FOREIGN_URI and content["mimeType"] == "application/json"
    assert json.loads(content["text"]) == {
        "success": False,
        "error": {
            "code": "not-found",
            "message": f"Resource not found: {FOREIGN_URI} (resources: {served})",
        },
    }


def test_a_tools_call_without_a_name_stays_a_malformed_request_on_every_surface() -> None:
    for surface in SURFACES:
        reply = _request(Rig(surface), "tools/call", {"arguments": {}})
        assert reply["error"]["code"] == -32602, surface

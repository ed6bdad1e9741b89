"""The LDIMS surface over fakes: extraction states, backend failures and the filter mapping
(REQ-LDIMS-RES-003, REQ-LDIMS-RES-004, REQ-LDIMS-ERR-004, REQ-LDIMS-TOOL-003)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from adapters.mcp.ldims import LdimsSurface
from domain.errors import UNAVAILABLE, QmdError
from domain.extraction import ExtractionState
from domain.usecases.services import Services
from tests.fakes import InMemoryStore, app_over

T0 = "2025-01-01T00:00:00.000Z"


def _services() -> Services:
    store = InMemoryStore()
    for path, body, meta in [
        ("a.md", "alpha report", {"format": "md", "modified": "2024-05-01T00:00:00.000Z"}),
        ("b.pdf", "alpha slides", {"format": "pdf", "created": "2023-01-01", "author": "Ana"}),
    ]:
        store.upsert_document(
            "c", path, path, hashlib.sha256(body.encode()).hexdigest(), body, T0, T0
        )
        store.put_metadata("c", path, meta)
    from domain.model import Collection

    store.put_collection(Collection(name="c", path="/c"))
    return app_over(store).services()


class States:
    def __init__(self, states: dict[str, ExtractionState]) -> None:
        self.states = states

    def recorded_state(self, collection: str, path: str) -> ExtractionState | None:
        return self.states.get(f"{collection}/{path}")


def _text(result: dict[str, Any]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(result["content"][0]["text"])
    return parsed


def test_extraction_states_answer_processing_and_failed() -> None:
    surface = LdimsSurface(
        _services(),
        States(
            {
                "c/new.pdf": ExtractionState("c", "new.pdf", "pending"),
                "c/gone.pdf": ExtractionState(
                    "c", "gone.pdf", "failed", "no-text-layer", "no page has a text layer"
                ),
                # indexed: its text is served whatever an older record says
                "c/b.pdf": ExtractionState("c", "b.pdf", "failed", "corrupt"),
            }
        ),
    )
    busy = surface.read_resource("ldims://docs/c%2Fnew.pdf/extracted_content")["contents"][0]
    assert json.loads(busy["text"]) == {
        "status": "processing",
        "message": "Content extraction is in progress. Please try again later.",
    }
    failed = surface.read_resource("ldims://docs/c%2Fgone.pdf/extracted_content")["contents"][0]
    assert json.loads(failed["text"])["errorCode"] == "CONTENT_UNAVAILABLE_OR_FAILED"
    assert json.loads(failed["text"])["errorDetails"] == {
        "reason": "no-text-layer: no page has a text layer"
    }
    ok = surface.read_resource("ldims://docs/c/b.pdf/extracted_content")["contents"][0]
    assert ok["text"] == "alpha slides" and ok["metadata"]["format"] == "pdf"


def test_filters_map_to_metadata() -> None:
    surface = LdimsSurface(_services())

    def ids(filters: dict[str, Any]) -> list[str]:
        result = surface.call_tool("searchDocuments", {"query": "alpha", "filters": filters})
        return [r["documentId"] for r in _text(result)["results"]]

    assert sorted(ids({})) == ["c/a.md", "c/b.pdf"]
    assert ids({"documentType": "PDF"}) == ["c/b.pdf"]
    assert ids({"submitter": "Ana"}) == ["c/b.pdf"]
    assert ids({"dateFrom": "2024-01-01"}) == ["c/a.md"]  # b's date is its `created`
    assert ids({"dateTo": "2023-01-01"}) == ["c/b.pdf"]
    result = surface.call_tool(
        "searchDocuments", {"query": "alpha", "filters": {"searchMode": "exact"}}
    )
    by_id = {r["documentId"]: r["metadata"] for r in _text(result)["results"]}
    assert by_id["c/b.pdf"] == {
        "createdAt": "2023-01-01",
        "submitter": "Ana",
        "documentType": "pdf",
    }


class Broken:
    def __getattr__(self, name: str) -> Any:
        raise QmdError(UNAVAILABLE, "database is locked at /secret/path")


def test_backend_failures_are_backend_api_errors() -> None:
    services = _services()
    surface = LdimsSurface(services)
    surface._searcher = Broken()  # type: ignore[assignment]
    result = surface.call_tool("searchDocuments", {"query": "alpha"})
    assert result["isError"] is True
    body = _text(result)
    assert body["errorCode"] == "BACKEND_API_ERROR"
    assert body["errorDetails"] == {"code": "unavailable"}
    assert "secret" not in result["content"][0]["text"]

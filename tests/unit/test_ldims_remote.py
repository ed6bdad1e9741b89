"""The LDIMS surface served from a backend over HTTP (REQ-LDIMS-DEPLOY-001..003), for what a
real process cannot be made to show: extraction states (injected, as in
test_ldims_surface.py) and backends that answer 5xx, forbid, or send what is not JSON. The
backend API module itself answers over a real loopback socket; the client is the real one."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from adapters.http.ldims_api import answer
from adapters.ldims_api.client import HttpDocumentBackend
from adapters.mcp.ldims import LdimsSurface
from adapters.mcp.ldims_backend import IndexBackend, RemoteLdims
from domain.document_backend import BackendError, BackendSearch
from domain.errors import QmdError
from domain.extraction import ExtractionState
from domain.usecases.services import Services
from tests.unit.test_ldims_surface import States, _services

CANNED: dict[str, tuple[int, bytes]] = {
    "/broken/documents": (
        500,
        b'{"isError": true, "errorCode": "SERVER_ERROR", '
        b'"errorMessage": "Database connection failed"}',
    ),
    "/forbidden/documents": (403, b'{"isError": true, "errorCode": "FORBIDDEN"}'),
    "/garbage/documents": (200, b"<html>not json</html>"),
    "/shape/documents": (200, b'{"results": "none"}'),
}


def _serve(services: Services) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            if path in CANNED:
                status, body, kind = *CANNED[path], "application/json"
            else:
                reply = answer(services, "GET", path, query)
                status, body, kind = reply.status, reply.body, reply.content_type or ""
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def base() -> Iterator[str]:
    states = States(
        {
            "c/new.pdf": ExtractionState("c", "new.pdf", "pending"),
            "c/gone.pdf": ExtractionState("c", "gone.pdf", "failed", "corrupt", "bad xref"),
        }
    )
    services = dataclasses.replace(_services(), extraction=states)  # type: ignore[arg-type]
    yield from _serve(services)


def _remote(url: str) -> LdimsSurface:
    return LdimsSurface(
        _services(), env={}, remote=RemoteLdims(HttpDocumentBackend(url, timeout_s=5))
    )


def _read(surface: LdimsSurface, document_id: str) -> dict[str, Any]:
    content = surface.read_resource(f"ldims://docs/{document_id}/extracted_content")
    parsed: dict[str, Any] = json.loads(content["contents"][0]["text"])
    return parsed


def test_extraction_states_travel_as_202_and_409(base: str) -> None:
    surface = _remote(base + "/api")
    assert _read(surface, "c%2Fnew.pdf") == {
        "status": "processing",
        "message": "Content extraction is in progress. Please try again later.",
    }
    failed = _read(surface, "c%2Fgone.pdf")
    assert failed["errorCode"] == "CONTENT_UNAVAILABLE_OR_FAILED"
    assert failed["errorDetails"] == {"code": "corrupt", "reason": "corrupt: bad xref"}
    ok = surface.read_resource("ldims://docs/c%2Fb.pdf/extracted_content")["contents"][0]
    assert ok["text"] == "alpha slides" and ok["metadata"]["format"] == "pdf"


def _search(surface: LdimsSurface) -> dict[str, Any]:
    result = surface.call_tool("searchDocuments", {"query": "alpha"})
    parsed: dict[str, Any] = json.loads(result["content"][0]["text"])
    return parsed


def test_backend_failures_are_the_seeds_codes(base: str) -> None:
    broken = _search(_remote(base + "/broken"))
    assert broken["errorCode"] == "BACKEND_API_ERROR"
    assert broken["errorMessage"] == "The document search service encountered an internal error."
    assert broken["errorDetails"] == {
        "backend_status": 500,
        "message": "Database connection failed",
    }
    forbidden = _search(_remote(base + "/forbidden"))
    assert forbidden["errorCode"] == "FORBIDDEN"
    assert forbidden["errorMessage"].startswith("You do not have permission")
    for name in ("garbage", "shape"):
        malformed = _search(_remote(f"{base}/{name}"))
        assert malformed["errorCode"] == "BACKEND_API_ERROR"
        assert malformed["errorDetails"]["backend_status"] == 200


def test_base_url_must_be_http() -> None:
    for bad in ("ftp://host/api", "backend:8181/api", "http:///api", "http://h/api?x=1"):
        with pytest.raises(QmdError) as refused:
            HttpDocumentBackend(bad, 1)
        assert refused.value.code == "invalid-argument"
    assert HttpDocumentBackend("http://h:1/api/", 1).base == "http://h:1/api"


class NewCodeSurface(LdimsSurface):
    """A surface answering an error code the backend API does not know (yet)."""

    def call_tool(self, name: str, arguments: Any) -> dict[str, Any]:
        text = json.dumps({"isError": True, "errorCode": "SOMETHING_NEW", "errorMessage": "x"})
        return {"content": [{"type": "text", "text": text}], "isError": True}


def test_an_unknown_error_code_is_a_backend_api_error() -> None:
    backend = IndexBackend(NewCodeSurface(_services(), env={}))
    with pytest.raises(BackendError) as failed:
        backend.search(BackendSearch("alpha", 5))
    assert failed.value.code == "BACKEND_API_ERROR"
    assert failed.value.details == {"errorCode": "SOMETHING_NEW"}

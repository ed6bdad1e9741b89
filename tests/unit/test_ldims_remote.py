"""The LDIMS surface served from a backend over HTTP (REQ-LDIMS-DEPLOY-001..003), for what a
real process cannot be made to show: extraction states (injected, as in
test_ldims_surface.py) and backends that answer 5xx, forbid, or send what is not JSON. The
backend API module itself answers over a real loopback socket; the client is the real one.
Hostile backends (dripping, redirecting, not finite, too deep, not HTTP) are real loopback
peers too (tests/backend_servers.py)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from adapters.http.ldims_api import answer
from adapters.ldims_api.client import HttpDocumentBackend
from adapters.mcp.ldims import MESSAGES, LdimsSurface
from adapters.mcp.ldims_backend import IndexBackend, RemoteLdims
from adapters.mcp.tools import NO_CLIENT, CallContext
from domain.document_backend import BackendError, BackendSearch
from domain.errors import QmdError
from domain.extraction import ExtractionState
from domain.ports import WorkCancelledError
from domain.usecases.services import Services
from tests.backend_servers import (
    Behaviour,
    Canned,
    Raw,
    drip_forever,
    json_answer,
    redirect,
    scripted_peer,
)
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
    "/unordered/documents": (
        200,
        json.dumps(
            {
                "results": [
                    {"documentId": "a", "relevanceScore": 0.492, "createdAt": "2024-03-01"},
                    {
                        "documentId": "b",
                        "relevanceScore": 0.705,
                        "createdAt": "2024-03-02T10:00:00+02:00",
                    },
                    {
                        "documentId": "c",
                        "relevanceScore": 0.696,
                        "createdAt": "2024-03-03T09:30:00.000Z",
                    },
                    {"documentId": "d", "createdAt": "not a date"},
                ],
                "totalMatches": 4,
                "searchMetadata": {},
            }
        ).encode(),
    ),
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
    result = surface.call_tool("searchDocuments", {"query": "alpha"}, NO_CLIENT)
    parsed: dict[str, Any] = json.loads(result["content"][0]["text"])
    return parsed


def test_a_backends_results_come_most_relevant_first_in_the_seeds_date_format(
    base: str,
) -> None:
    """REQ-LDIMS-TOOL-007 and REQ-LDIMS-TOOL-001 hold for a backend's answer as for ours."""
    results = _search(_remote(base + "/unordered"))["results"]
    assert [item["documentId"] for item in results] == ["b", "c", "a", "d"]
    assert [item["createdAt"] for item in results] == [
        "2024-03-02T08:00:00Z",
        "2024-03-03T09:30:00Z",
        "2024-03-01T00:00:00Z",
        "not a date",
    ]


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

    def call_tool(self, name: str, arguments: Any, context: CallContext) -> dict[str, Any]:
        text = json.dumps({"isError": True, "errorCode": "SOMETHING_NEW", "errorMessage": "x"})
        return {"content": [{"type": "text", "text": text}], "isError": True}


def test_an_unknown_error_code_is_a_backend_api_error() -> None:
    backend = IndexBackend(NewCodeSurface(_services(), env={}))
    with pytest.raises(BackendError) as failed:
        backend.search(BackendSearch("alpha", 5))
    assert failed.value.code == "BACKEND_API_ERROR"
    assert failed.value.details == {"errorCode": "SOMETHING_NEW"}


# -- the backend as an adversary (REQ-LDIMS-DEPLOY-006, REQ-LDIMS-DEPLOY-007) -------------------

GOOD_SEARCH = {"results": [], "totalMatches": 0, "searchMetadata": {}}
GOOD_FILE = {"extractedContent": "alpha", "documentName": "a.md", "format": "md"}
READ_URI = "ldims://docs/c%2Fa.md/extracted_content"


def _in_time(work: Callable[[], Any], seconds: float) -> Any:
    """`work`'s result, failing the test (instead of hanging it) if it takes longer."""
    done: list[Any] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as error:  # raised on the test's thread below
            failed.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if failed:
        raise failed[0]
    assert done, f"no answer within {seconds} s"
    return done[0]


def _remote_within(url: str, timeout_s: float = 5) -> LdimsSurface:
    return LdimsSurface(
        _services(), env={}, remote=RemoteLdims(HttpDocumentBackend(url, timeout_s=timeout_s))
    )


def _read_body(surface: LdimsSurface) -> dict[str, Any]:
    return _in_time(lambda: _read(surface, "c%2Fa.md"), 10)


def _search_body(surface: LdimsSurface) -> dict[str, Any]:
    return _in_time(lambda: _search(surface), 10)


def test_a_dripping_backend_is_search_timeout_at_the_deadline_and_let_go() -> None:
    """REQ-LDIMS-DEPLOY-006: a byte every half second never trips a 1 s read timeout; the
    exchange's deadline ends it, the worker returns, and the backend sees the connection
    closed."""
    with scripted_peer(lambda _path: drip_forever(every_s=0.5)) as peer:
        surface = _remote_within(peer.url + "/api", timeout_s=1)
        started = time.monotonic()
        found = _search_body(surface)
        elapsed = time.monotonic() - started
        assert found["errorCode"] == "SEARCH_TIMEOUT"
        assert found["errorDetails"] == {"timeoutSeconds": 1}
        assert elapsed < 1.8, elapsed
        assert peer.wait_dripping(0, 3), "the client kept the dripping connection open"
        read = _read_body(surface)
        assert read["errorCode"] == "SERVER_ERROR"
        assert read["errorDetails"]["backendErrorCode"] == "SEARCH_TIMEOUT"


def test_a_given_up_request_abandons_its_exchange() -> None:
    """REQ-LDIMS-DEPLOY-006: the stop check (the request given up) ends the exchange within
    50 ms of the watchdog's next look, long before its deadline."""
    given_up = threading.Event()

    def stop_check() -> None:
        if given_up.is_set():
            raise WorkCancelledError("given up")

    with scripted_peer(lambda _path: drip_forever()) as peer:
        backend = HttpDocumentBackend(peer.url + "/api", 30, stop_check=stop_check)
        threading.Timer(0.3, given_up.set).start()
        started = time.monotonic()
        with pytest.raises(BackendError) as failed:
            _in_time(lambda: backend.search(BackendSearch("alpha", 5)), 5)
        assert time.monotonic() - started < 1.0
        assert failed.value.code == "SEARCH_TIMEOUT"
        assert peer.wait_dripping(0, 3)


def test_no_redirect_leaves_the_backends_origin() -> None:
    """REQ-LDIMS-DEPLOY-007: a 302 to another port or to ftp:// is a failure, never followed;
    one within the backend's origin is."""
    with scripted_peer(lambda _path: json_answer(200, GOOD_SEARCH)) as elsewhere:
        targets = {
            "/port/": f"{elsewhere.url}/api/documents",
            "/ftp/": "ftp://127.0.0.1/api/documents",
            "/same/": "/api/documents",
        }

        def script(path: str) -> Behaviour:
            for prefix, target in targets.items():
                if path.startswith(prefix):
                    return redirect(302, target)
            if path.startswith("/api/documents"):
                return json_answer(200, GOOD_SEARCH)
            return json_answer(200, GOOD_FILE)

        with scripted_peer(script) as peer:
            for name in ("port", "ftp"):
                found = _search_body(_remote_within(f"{peer.url}/{name}"))
                assert found["errorCode"] == "BACKEND_API_ERROR", name
                assert found["errorDetails"] == {
                    "backend_status": 302,
                    "message": "the backend redirected to another origin",
                }
                read = _read_body(_remote_within(f"{peer.url}/{name}"))
                assert read["errorCode"] == "SERVER_ERROR"
                assert read["errorDetails"]["backendErrorCode"] == "BACKEND_API_ERROR"
            assert elsewhere.requests == []
            assert _search_body(_remote_within(f"{peer.url}/same"))["isError"] is False


DEEP = b"[" * 100_000 + b"]" * 100_000
HOSTILE: dict[str, Behaviour] = {
    "nan": Canned(200, b'{"results": [{"relevanceScore": NaN}], "totalMatches": 1}'),
    "infinity": Canned(200, b'{"results": [], "totalMatches": 1, "x": -Infinity}'),
    "overflow": Canned(200, b'{"results": [{"relevanceScore": 1e999}], "totalMatches": 1}'),
    "deep": Canned(200, b'{"results": [], "totalMatches": 0, "x": ' + DEEP + b"}"),
    "deep-error": Canned(500, DEEP),
    "not-http": Raw(b"SSH-2.0-OpenSSH_9.6\r\nProtocol mismatch.\r\n"),
    "silent-close": Raw(b""),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_every_hostile_answer_is_the_seeds_envelope(name: str) -> None:
    """REQ-LDIMS-DEPLOY-007: non-finite numbers, JSON 100,000 levels deep, an answer that is
    not HTTP: searchDocuments answers BACKEND_API_ERROR and extracted_content the seed's
    SERVER_ERROR body, never -32603 and never `NaN` in the seed's JSON text."""
    with scripted_peer(lambda _path: HOSTILE[name]) as peer:
        surface = _remote_within(peer.url + "/api")
        result = _in_time(
            lambda: surface.call_tool("searchDocuments", {"query": "alpha"}, NO_CLIENT), 10
        )
        text = result["content"][0]["text"]
        assert "NaN" not in text and "Infinity" not in text
        found = json.loads(text)
        assert found["errorCode"] == "BACKEND_API_ERROR"
        assert found["errorMessage"] == MESSAGES["BACKEND_API_ERROR"]
        read = _read_body(surface)
        assert read["isError"] is True and read["errorCode"] == "SERVER_ERROR"
        assert read["errorMessage"] == "An unexpected error occurred on the server."
        assert read["errorDetails"]["backendErrorCode"] == "BACKEND_API_ERROR"

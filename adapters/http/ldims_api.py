"""Seed 003's LDIMS backend API, served by qmd's HTTP service over this index (seed §6;
docs/spec/ldims.md REQ-LDIMS-DEPLOY-001), so that an LDIMS MCP service elsewhere
(`qmd mcp --surface ldims` with `LDIMS_API_BASE_URL=http://host:port/api`) serves from it.

    GET /api/documents?query=…[&maxResults=N][&searchMode=exact|semantic][&dateFrom=…]
        [&dateTo=…][&documentType=…][&submitter=…]
        200 {"isError": false, "results": [{documentId, documentName, relevanceScore,
        matchedContext, metadata}], "totalMatches", "searchMetadata"}; a refusal is the seed's
        error object with 400 (INVALID_INPUT), 422 (QUERY_UNPROCESSABLE), 504 (SEARCH_TIMEOUT)
        or 500 (BACKEND_API_ERROR)
    GET /api/document-files/{file_id}/content   (and GET /api/document-files/{file_id})
        200 {id, documentId, documentName, fileName, processingStatus: "completed",
        extractedContent, extractedAt, format}; 202 {"status": "processing", …}; 404, 409 and
        403 with the seed's bodies

A document and its one file share an id, the document's `collection/path` (percent-encode
its `/` in the URL). Answers are what the LDIMS surface itself answers (`IndexBackend`).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

from adapters.http.exchange import HttpReply
from adapters.mcp.ldims import MESSAGES as SEED_MESSAGES
from adapters.mcp.ldims import LdimsSurface
from adapters.mcp.ldims_backend import (
    FORBIDDEN_BODY,
    FORBIDDEN_MESSAGE,
    NOT_FOUND_BODY,
    PROCESSING_BODY,
    IndexBackend,
)
from domain.document_backend import (
    BACKEND_API_ERROR,
    FILTER_NAMES,
    FORBIDDEN,
    INVALID_INPUT,
    QUERY_UNPROCESSABLE,
    SEARCH_TIMEOUT,
    BackendError,
    BackendSearch,
)
from domain.usecases.services import Services

PREFIX = "/api/"
SEARCH_PATHS = ("/api/documents", "/api/documents/")
FILES = "/api/document-files/"
CONTENT_SUFFIX = "/content"
SEARCH_PARAMETERS = frozenset({"query", "maxResults", *FILTER_NAMES})
DEFAULT_MAX_RESULTS = 5
STATUS_OF = {
    INVALID_INPUT: 400,
    FORBIDDEN: 403,
    QUERY_UNPROCESSABLE: 422,
    BACKEND_API_ERROR: 500,
    SEARCH_TIMEOUT: 504,
}
MESSAGES = {**SEED_MESSAGES, FORBIDDEN: FORBIDDEN_MESSAGE}
NOT_FOUND = HttpReply(404, b"Not Found")


def runs_search(raw_path: str) -> bool:
    return raw_path in SEARCH_PATHS


def _json(status: int, payload: Mapping[str, Any]) -> HttpReply:
    return HttpReply(status, json.dumps(payload, ensure_ascii=False).encode(), "application/json")


def _error(error: BackendError) -> HttpReply:
    body: dict[str, Any] = {"isError": True, "errorCode": error.code}
    body["errorMessage"] = MESSAGES[error.code]
    if error.details:
        body["errorDetails"] = dict(error.details)
    return _json(STATUS_OF[error.code], body)


def answer(services: Services, method: str, raw_path: str, query: str) -> HttpReply:
    """The reply to one `/api/...` request, over `services` (a worker's view of the index).
    `raw_path` is still percent-encoded, so a file id's encoded `/` and `%` decode once."""
    path = raw_path
    if method not in ("GET", "HEAD"):
        return NOT_FOUND
    backend = IndexBackend(LdimsSurface(services, services.extraction))
    if path in SEARCH_PATHS:
        try:
            request = _search_request(query)
            return _json(200, backend.search(request))
        except BackendError as error:
            return _error(error)
    if path.startswith(FILES) and len(path) > len(FILES):
        file_id = path[len(FILES) :]
        file_id = file_id.removesuffix(CONTENT_SUFFIX)
        return _file(backend, urllib.parse.unquote(file_id).strip("/"))
    return NOT_FOUND


def backend_timeout(timeout_s: float) -> HttpReply:
    """A request that outran the service's time limit: 504 with the seed's SEARCH_TIMEOUT."""
    return _error(BackendError(SEARCH_TIMEOUT, {"timeoutSeconds": timeout_s}))


def _search_request(query: str) -> BackendSearch:
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    params: dict[str, str] = {}
    for name, value in pairs:
        if name not in SEARCH_PARAMETERS:
            raise BackendError(INVALID_INPUT, {"field": name, "issue": "unknown parameter"})
        if name in params:
            raise BackendError(INVALID_INPUT, {"field": name, "issue": "given more than once"})
        params[name] = value
    text = params.get("query")  # the seed's query parameter
    if text is None:
        raise BackendError(INVALID_INPUT, {"field": "query", "issue": "Required"})
    raw = params.get("maxResults", "").strip()
    try:
        wanted = int(raw, 10) if raw else DEFAULT_MAX_RESULTS
    except ValueError:
        raise BackendError(
            INVALID_INPUT, {"field": "maxResults", "issue": "expected a whole number"}
        ) from None
    filters = {k: params[k] for k in FILTER_NAMES if params.get(k)}
    return BackendSearch(text, wanted, filters)


def _file(backend: IndexBackend, file_id: str) -> HttpReply:
    found = backend.document_file(file_id)
    if found.status == "completed":
        return _json(
            200,
            {
                "id": file_id,
                "documentId": file_id,
                "documentName": found.name,
                "fileName": found.name,
                "processingStatus": "completed",
                "extractedContent": found.extracted_content,
                "extractedAt": found.extracted_at,
                "format": found.format,
            },
        )
    if found.status == "processing":
        return _json(202, PROCESSING_BODY)
    if found.status == "failed":
        body: dict[str, Any] = {
            "isError": True,
            "errorCode": "CONTENT_UNAVAILABLE_OR_FAILED",
            "errorMessage": "Content extraction failed or content is in an unusable state.",
        }
        if found.details:
            body["errorDetails"] = dict(found.details)
        return _json(409, body)
    if found.status == "forbidden":
        return _json(403, FORBIDDEN_BODY)
    return _json(404, NOT_FOUND_BODY)

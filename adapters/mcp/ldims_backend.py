"""Seed 003's two-service topology (§6, §7; docs/spec/ldims.md REQ-LDIMS-DEPLOY-*).

* `RemoteLdims`: what the LDIMS surface does when `LDIMS_API_BASE_URL` names a backend: its
  tool and resource answer from the `DocumentBackend` port instead of the local index, in the
  same shapes, a backend failure being the seed's error object.
* `IndexBackend`: the port over this index, through the LDIMS surface itself, so that the
  backend's HTTP API (`adapters/http/ldims_api.py`) answers exactly what the surface would.
"""

from __future__ import annotations

import json
import logging
import posixpath
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from adapters.mcp.ldims import (
    MESSAGES,
    META_KEY,
    URI_PREFIX,
    URI_SUFFIX,
    LdimsSurface,
    _json_text,
    _resource_json,
    seed_timestamp,
)
from adapters.mcp.tools import NO_CLIENT
from domain.document_backend import (
    BACKEND_API_ERROR,
    FILTER_NAMES,
    FORBIDDEN,
    SEARCH_ERROR_CODES,
    BackendError,
    BackendSearch,
    DocumentBackend,
    DocumentFile,
)

log = logging.getLogger("qmd.ldims")

FORBIDDEN_MESSAGE = (  # seed 003 §4.2, word for word
    "You do not have permission to perform this search or access the requested search scope."
)
NOT_FOUND_BODY = {
    "isError": True,
    "errorCode": "RESOURCE_NOT_FOUND",
    "errorMessage": "Document or its content not found.",
}
PROCESSING_BODY = {
    "status": "processing",
    "message": "Content extraction is in progress. Please try again later.",
}
FAILED_MESSAGE = "Content extraction failed or content is in an unusable state."
FORBIDDEN_BODY = {
    "isError": True,
    "errorCode": FORBIDDEN,
    "errorMessage": "Access to the requested content is forbidden.",
}
SERVER_ERROR_BODY = {
    "isError": True,
    "errorCode": "SERVER_ERROR",
    "errorMessage": "An unexpected error occurred on the server.",
}


def search_failure(error: BackendError) -> dict[str, Any]:
    body: dict[str, Any] = {
        "isError": True,
        "errorCode": error.code,
        "errorMessage": MESSAGES.get(error.code, FORBIDDEN_MESSAGE),
    }
    if error.details:
        body["errorDetails"] = dict(error.details)
    return _json_text(body, is_error=True)


def _score(item: Any) -> float:
    score = item.get("relevanceScore") if isinstance(item, Mapping) else None
    return float(score) if isinstance(score, (int, float)) else float("-inf")


def seed_ordered(results: Any) -> list[Any]:
    """A backend's results as this service answers its own (REQ-LDIMS-TOOL-007,
    REQ-LDIMS-TOOL-001): most relevant first (a stable sort, so the backend's order breaks
    ties and an item without a number keeps its place after the scored ones), `createdAt` in
    the seed's one format where the backend gave an ISO date in another."""
    items = list(results) if isinstance(results, list) else []
    ordered = sorted(items, key=_score, reverse=True)
    out: list[Any] = []
    for item in ordered:
        created = item.get("createdAt") if isinstance(item, Mapping) else None
        if isinstance(created, str) and (stamp := seed_timestamp(created)) is not None:
            item = {**item, "createdAt": stamp}
        out.append(item)
    return out


class RemoteLdims:
    """searchDocuments and extracted_content answered by a backend (REQ-LDIMS-DEPLOY-002)."""

    def __init__(self, backend: DocumentBackend) -> None:
        self.backend = backend

    def search(
        self, args: Mapping[str, Any], hard_limit: int, clock: Callable[[], float]
    ) -> dict[str, Any]:
        """The validated arguments go to the backend, which answers the seed's payload or
        error; this service still applies its own hard limit and times the whole call."""
        started = clock()
        wanted = int(args["maxResults"])
        shown = min(wanted, hard_limit) if wanted >= 1 else wanted  # the backend refuses < 1
        raw_filters = args.get("filters") or {}
        filters = {
            k: str(raw_filters[k]) for k in FILTER_NAMES if raw_filters.get(k) not in (None, "")
        }
        try:
            payload = self.backend.search(BackendSearch(str(args["query"]), shown, filters))
        except BackendError as error:
            return search_failure(error)
        metadata = dict(payload.get("searchMetadata") or {})
        metadata["executionTime"] = f"{clock() - started:.3f}s"
        metadata.setdefault("searchMode", filters.get("searchMode", "semantic"))
        if wanted > shown:
            metadata["maxResultsCappedAt"] = shown
        answer = {
            "isError": False,
            "results": seed_ordered(payload.get("results") or [])[: max(shown, 0)],
            "totalMatches": payload.get("totalMatches", 0),
            "searchMetadata": metadata,
        }
        return _json_text(answer, is_error=False)

    def read(self, uri: str, document_id: str) -> dict[str, Any]:
        """The backend's file as the resource; its states as the seed's bodies; a backend
        that fails as the seed's SERVER_ERROR body, saying why (REQ-LDIMS-DEPLOY-003,
        REQ-LDIMS-DEPLOY-007)."""
        try:
            found = self.backend.document_file(document_id)
        except BackendError as error:
            details = {"backendErrorCode": error.code, **error.details}
            return _resource_json(uri, {**SERVER_ERROR_BODY, "errorDetails": details})
        except Exception:  # a failure the backend's adapter did not foresee: still the seed's
            log.exception("LDIMS backend read of %r failed", document_id)
            details = {"backendErrorCode": BACKEND_API_ERROR}
            return _resource_json(uri, {**SERVER_ERROR_BODY, "errorDetails": details})
        if found.status == "completed":
            described = {
                "documentName": found.name or posixpath.basename(document_id),
                "extractedAt": found.extracted_at,
                "format": found.format,
            }
            return {
                "contents": [
                    {
                        "uri": uri,
                        "mimeType": "text/plain",
                        "text": found.extracted_content,
                        "metadata": described,
                        "_meta": {META_KEY: described},
                    }
                ]
            }
        if found.status == "processing":
            return _resource_json(uri, PROCESSING_BODY)
        if found.status == "failed":
            failed: dict[str, Any] = {
                "isError": True,
                "errorCode": "CONTENT_UNAVAILABLE_OR_FAILED",
                "errorMessage": FAILED_MESSAGE,
            }
            if found.details:
                failed["errorDetails"] = dict(found.details)
            return _resource_json(uri, failed)
        if found.status == "forbidden":
            return _resource_json(uri, FORBIDDEN_BODY)
        return _resource_json(uri, NOT_FOUND_BODY)


class IndexBackend:
    """`DocumentBackend` over this index: the LDIMS surface's own search and content."""

    def __init__(self, surface: LdimsSurface) -> None:
        self.surface = surface

    def search(self, request: BackendSearch) -> Mapping[str, Any]:
        args: dict[str, Any] = {"query": request.query, "maxResults": request.max_results}
        if request.filters:
            args["filters"] = dict(request.filters)
        result = self.surface.call_tool(LdimsSurface.search_documents.name, args, NO_CLIENT)
        payload: dict[str, Any] = json.loads(result["content"][0]["text"])
        if payload.get("isError"):
            code, details = str(payload.get("errorCode")), payload.get("errorDetails")
            if code not in SEARCH_ERROR_CODES:  # a code the backend API does not speak
                code, details = BACKEND_API_ERROR, {"errorCode": code}
            raise BackendError(code, details)
        return payload

    def document_file(self, file_id: str) -> DocumentFile:
        uri = URI_PREFIX + urllib.parse.quote(file_id, safe="") + URI_SUFFIX
        content = self.surface.read_resource(uri)["contents"][0]
        if content.get("mimeType") == "text/plain":
            described = content.get("metadata") or {}
            return DocumentFile(
                file_id,
                "completed",
                name=str(described.get("documentName", "")),
                extracted_content=str(content["text"]),
                extracted_at=str(described.get("extractedAt", "")),
                format=str(described.get("format", "")),
            )
        body = json.loads(content["text"])
        if body.get("status") == "processing":
            return DocumentFile(file_id, "processing")
        if body.get("errorCode") == "CONTENT_UNAVAILABLE_OR_FAILED":
            return DocumentFile(file_id, "failed", details=body.get("errorDetails") or {})
        if body.get("errorCode") == FORBIDDEN:
            return DocumentFile(file_id, "forbidden")
        return DocumentFile(file_id, "not_found")

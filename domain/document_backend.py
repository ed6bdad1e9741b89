"""Seed 003's LDIMS backend, as the LDIMS MCP service sees it (seed §6, docs/spec/ldims.md
REQ-LDIMS-DEPLOY-*): a document search over extracted content, and one document file's
extracted content with its processing state.

The LDIMS surface serves from this index; with `LDIMS_API_BASE_URL` it serves from a backend
over HTTP instead (another `qmd` serving `/api/...`). Both answer through this port, in the
seed's terms: a search answers the seed's payload (`results`, `totalMatches`,
`searchMetadata`), and a failure is `BackendError` carrying one of the seed's error codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# seed 003 §4.2's error codes a backend answers with
INVALID_INPUT = "INVALID_INPUT"
BACKEND_API_ERROR = "BACKEND_API_ERROR"
SEARCH_TIMEOUT = "SEARCH_TIMEOUT"
QUERY_UNPROCESSABLE = "QUERY_UNPROCESSABLE"
FORBIDDEN = "FORBIDDEN"
SEARCH_ERROR_CODES = frozenset(
    {INVALID_INPUT, BACKEND_API_ERROR, SEARCH_TIMEOUT, QUERY_UNPROCESSABLE, FORBIDDEN}
)
# the filters of searchDocuments a backend search takes, by their seed names
FILTER_NAMES = ("dateFrom", "dateTo", "documentType", "submitter", "searchMode")

FileStatus = Literal["completed", "processing", "failed", "not_found", "forbidden"]


class BackendError(Exception):
    """The backend refused or failed a request; `code` is one of SEARCH_ERROR_CODES and
    `details` goes to the answer's `errorDetails` (never a stack, a path or a URL)."""

    def __init__(self, code: str, details: Mapping[str, Any] | None = None) -> None:
        if code not in SEARCH_ERROR_CODES:
            raise ValueError(f"unknown backend error code {code!r}")
        super().__init__(code)
        self.code = code
        self.details = dict(details) if details else {}


@dataclass(frozen=True)
class BackendSearch:
    query: str
    max_results: int
    filters: Mapping[str, str] = field(default_factory=dict)  # names from FILTER_NAMES


@dataclass(frozen=True)
class DocumentFile:
    """One document file's extracted content (`status` "completed") or why there is none."""

    file_id: str
    status: FileStatus
    name: str = ""
    extracted_content: str = ""
    extracted_at: str = ""
    format: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)  # why it failed, if it did


class DocumentBackend(Protocol):
    def search(self, request: BackendSearch) -> Mapping[str, Any]:
        """The seed's search payload: `results` (documentId, documentName, relevanceScore,
        matchedContext, metadata), `totalMatches`, `searchMetadata`; BackendError if the
        search failed (an empty result is not a failure)."""
        ...

    def document_file(self, file_id: str) -> DocumentFile:
        """A document file's state and, when completed, its extracted text; BackendError only
        when the backend itself failed."""
        ...

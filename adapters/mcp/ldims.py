"""The LDIMS surface of seed 003 (docs/spec/ldims.md): tool `searchDocuments` and the resource
template `ldims://docs/{document_id}/extracted_content`, over the same engine as the others.

Answers are what the seed frames: a tool's `content` is one JSON string (results, or an error
object with `errorCode`), and a resource read answers the document's text with `metadata`, or
a JSON body saying it was not found, is still processing or failed to extract.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import posixpath
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from adapters.fs.deadline import LeftBehindError, answer_within
from adapters.mcp.formatting import results_metadata
from adapters.mcp.tools import OWN_BUDGET, READ_ONLY, BaseSurface, ToolFacts, tool
from adapters.mcp.wording import INVALID_PARAMS, JsonRpcError
from adapters.version import package_version
from domain.errors import INVALID_ARGUMENT, DocumentNotFoundError, QmdError
from domain.filters import (
    DATE_KEYS,
    FilterNode,
    MetaValue,
    all_of,
    of_format,
    since,
    until,
)
from domain.filters import (
    Condition as FilterCondition,
)
from domain.filters import (
    Group as FilterGroup,
)
from domain.lexquery import contains_cjk, sanitize_term
from domain.model import DocumentMeta, SearchResult
from domain.paths import decode_uri_component
from domain.ports import ExtractionStates
from domain.profiles import COMMAND_LINE_STRICT, SEED_000
from domain.text import extract_intent_terms, js_round
from domain.usecases.metadata import require as require_metadata
from domain.usecases.search import SearchRequest
from domain.usecases.services import Services
from domain.usecases.trace import SearchTrace


class RemoteLdims(Protocol):
    """What answers for the surface when LDIMS_API_BASE_URL names a backend
    (adapters.mcp.ldims_backend); declared here so the surface does not import its adapter."""

    def search(
        self, args: Mapping[str, Any], hard_limit: int, clock: Callable[[], float]
    ) -> dict[str, Any]: ...

    def read(self, uri: str, document_id: str) -> dict[str, Any]: ...


DEFAULT_MAX_RESULTS = 5
DEFAULT_HARD_LIMIT = 50  # SEARCH_MAX_RESULTS_HARD_LIMIT
DEFAULT_TIMEOUT_S = 30.0  # MCP_REQUEST_TIMEOUT_SECONDS
# The cosine similarity below which a document the query's words do not match is not
# relevant in semantic mode (REQ-LDIMS-TOOL-006). Calibrated for the bundled embedding model
# (all-MiniLM-L6-v2) by benchmarks/bench_ldims_floor.py; LDIMS_SEMANTIC_MIN_SCORE sets it for
# another model.
SEMANTIC_FLOOR = 0.35
# A document that shares not one of the query's words with it needs this much more: a query
# nothing in the index is about (gibberish, another topic) still lies nearest to something,
# and short or noisy chunks (a PDF's page of figures) lie near everything (REQ-LDIMS-TOOL-006).
SEMANTIC_ALONE_MARGIN = 0.15
CONTEXT_CHARS = 300
URI_PREFIX = "ldims://docs/"
META_KEY = "ldims/metadata"
URI_SUFFIX = "/extracted_content"
HYBRID_CANDIDATES = 30

INVALID_INPUT = "INVALID_INPUT"
SEARCH_TIMEOUT = "SEARCH_TIMEOUT"
QUERY_UNPROCESSABLE = "QUERY_UNPROCESSABLE"
BACKEND_API_ERROR = "BACKEND_API_ERROR"
MESSAGES = {  # seed 003 §4.2, word for word
    INVALID_INPUT: "Invalid input parameters provided. Please check your query, filters, and "
    "other parameters.",
    BACKEND_API_ERROR: "The document search service encountered an internal error.",
    SEARCH_TIMEOUT: "The search operation timed out before results could be retrieved.",
    QUERY_UNPROCESSABLE: "The search query is too broad, too complex, or could not be processed "
    "by the search engine.",
}


def _search_runs_model(arguments: Any) -> bool:
    """Every search mode but `exact` embeds the query (seed 003's default is semantic)."""
    filters = arguments.get("filters") if isinstance(arguments, dict) else None
    return not (isinstance(filters, dict) and filters.get("searchMode") == "exact")


RESOURCE_TEMPLATE: dict[str, Any] = {
    "name": "extracted_content",
    "uriTemplate": "ldims://docs/{document_id}/extracted_content",
    "title": "Extracted document content",
    "description": "This resource provides access to the full extracted text content of a "
    "document stored in the LDIMS system.\nUse this when you need to:\n- Read the actual "
    "content of a specific document\n- Answer questions about the content of a known "
    "document\n- Analyze or understand the details within a document\nThe content is "
    "pre-processed and extracted from various file formats (PDF, DOCX, etc.) into plain text.",
    "mimeType": "text/plain",
}


class LdimsError(Exception):
    """A searchDocuments failure in the seed's terms (REQ-LDIMS-ERR-001..004)."""

    def __init__(self, code: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.details = dict(details) if details else None


def _json_text(payload: Mapping[str, Any], is_error: bool) -> dict[str, Any]:
    # the seed's JSON text is strict JSON: a non-finite number is refused (ValueError, the
    # surface's BACKEND_API_ERROR), never written as NaN (REQ-LDIMS-DEPLOY-007)
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


def failure_result(code: str, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"isError": True, "errorCode": code, "errorMessage": MESSAGES[code]}
    if details:
        body["errorDetails"] = dict(details)
    return _json_text(body, is_error=True)


def _issue_details(issue: str) -> dict[str, str]:
    """`filters.dateFrom: Invalid input: …` as {field, issue}."""
    field, _, text = issue.partition(": ")
    return {"field": field or "arguments", "issue": text or issue}


class LdimsErrors:
    """Every failure as the seed's error object inside the content JSON string."""

    def invalid_arguments(self, tool: str, issues: list[str]) -> dict[str, Any]:
        return failure_result(INVALID_INPUT, _issue_details(issues[0]))

    def not_found(self, error: DocumentNotFoundError) -> dict[str, Any]:
        return self.failed(error)

    def failed(self, error: QmdError) -> dict[str, Any]:
        # A query the engine refuses (too long, too many terms) is unprocessable; anything
        # else is the backend's failure. Its message is ours, never a stack or a path.
        if error.code == INVALID_ARGUMENT:
            return failure_result(QUERY_UNPROCESSABLE, {"message": error.message})
        return failure_result(BACKEND_API_ERROR, {"code": error.code})

    def crashed(self, tool: str, error: Exception) -> dict[str, Any]:
        return failure_result(BACKEND_API_ERROR, {"error": type(error).__name__})


def _positive_number(raw: str | None, default: float) -> float:
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if value >= 0 else default


def _first_string(metadata: Mapping[str, MetaValue], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = metadata.get(key)
        if isinstance(value, tuple):
            strings = [v for v in value if isinstance(v, str)]
            if strings:
                return ", ".join(strings)
        elif isinstance(value, str) and value:
            return value
    return None


SUBMITTER_KEYS = ("author", "submitter")
TYPE_KEYS = ("documentType",)


def _context(result: SearchResult) -> str:
    _header, _, body = result.snippet.text.partition("\n")
    text = " ".join(body.split())
    return text[:CONTEXT_CHARS]


class LdimsSurface(BaseSurface):
    name = "ldims"
    reads_working_env_file = True  # seed 003 §7.1
    answers_shutdown = True  # seed 001's handshake (REQ-SPEC-SHUTDOWN-001)
    errors = LdimsErrors()
    instructions_text = (
        "LDIMS document search. Call searchDocuments to find documents, then read "
        "ldims://docs/{documentId}/extracted_content for a document's full text."
    )
    templates = (RESOURCE_TEMPLATE,)

    def __init__(
        self,
        services: Services,
        extraction: ExtractionStates | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        *,
        hard_limit: int | None = None,
        timeout_s: float | None = None,
        remote: RemoteLdims | None = None,
        version: str | None = None,
    ) -> None:
        """`hard_limit` and `timeout_s`: the server's resolved settings (flags, then the
        environment, then `--env-file`); None reads seed 003's variables from `env`.
        `remote`: the LDIMS backend to serve from instead of `services` (LDIMS_API_BASE_URL)."""
        # qmd's own version, as on every surface but compat (REQ-SPEC-VERSION-001)
        super().__init__(version or package_version())
        self._remote = remote
        environ = os.environ if env is None else env
        self._services = services
        self._searcher = services.searcher.with_profile(SEED_000)
        # the same engine matching every word of a query (the original's lexical rule)
        self._all_terms = services.searcher.with_profile(COMMAND_LINE_STRICT)
        self._extraction = extraction
        self._clock = clock
        if hard_limit is None:
            hard_limit = int(
                _positive_number(environ.get("SEARCH_MAX_RESULTS_HARD_LIMIT"), DEFAULT_HARD_LIMIT)
            )
        self.hard_limit = max(1, hard_limit)
        self.timeout_s = (
            _positive_number(environ.get("MCP_REQUEST_TIMEOUT_SECONDS"), DEFAULT_TIMEOUT_S)
            if timeout_s is None
            else timeout_s
        )
        self.semantic_floor = _positive_number(
            environ.get("LDIMS_SEMANTIC_MIN_SCORE"), SEMANTIC_FLOOR
        )
        self._unfinished: threading.Event | None = None  # a search past its deadline

    # -- searchDocuments ----------------------------------------------------------------------

    # seed 003: SEARCH_TIMEOUT is the tool's own answer to a slow search (OWN_BUDGET)
    @tool(
        "searchDocuments",
        "This tool helps you find relevant documents in the LDIMS system based on "
        "natural language queries.\nUse this tool when you need to:\n- Find documents matching "
        "specific topics or content\n- Locate documents containing particular information\n- "
        "Search across all documents using keywords or natural language\n- Get a list of "
        "relevant documents before accessing their content\n\nThe tool performs semantic search "
        "across document contents and metadata, returning the most relevant matches.\nEach "
        "result includes the document name and ID, which you can use with the extracted_content "
        "resource\nto access the full content.",
        schema={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "The search query in natural language or keywords. Be specific "
                    "and include key terms related to the information you're looking for.",
                },
                "maxResults": {
                    "type": "number",
                    "default": DEFAULT_MAX_RESULTS,
                    "description": "Maximum number of documents to return in the results. Use a "
                    "larger number if you need more comprehensive results.",
                },
                "filters": {
                    "type": "object",
                    "properties": {
                        "dateFrom": {
                            "type": "string",
                            "description": "Start date for filtering documents (ISO format)",
                        },
                        "dateTo": {
                            "type": "string",
                            "description": "End date for filtering documents (ISO format)",
                        },
                        "documentType": {
                            "type": "string",
                            "description": "Filter by document type/format",
                        },
                        "submitter": {
                            "type": "string",
                            "description": "Filter by document submitter",
                        },
                        "searchMode": {
                            "type": "string",
                            "enum": ["exact", "semantic"],
                            "default": "semantic",
                            "description": "The search mode to use: 'exact' for precise matches, "
                            "'semantic' for meaning-based matches",
                        },
                    },
                    "additionalProperties": False,
                },
            },
            "required": ["query"],
            "additionalProperties": False,  # REQ-SPEC-ARGS-001
        },
        annotations=READ_ONLY,
        facts=ToolFacts(_search_runs_model, budget=OWN_BUDGET),
        example={"query": "quarterly report", "maxResults": 5},
    )
    def search_documents(self, args: dict[str, Any]) -> dict[str, Any]:
        """The search runs on a thread of its own so that the answer comes at the configured
        time exactly, SEARCH_TIMEOUT if the search has not finished (REQ-LDIMS-ERR-003). A
        search left behind is given up then (adapters/fs/deadline.py): its running SQL
        statement is aborted and it stops at its next check, a model call in progress at its
        next step (REQ-SEARCH-CANCEL-LDIMSCANCEL-001). The next search on this surface's index
        connection waits for it to stop, within its own deadline."""
        if self._remote is not None:  # REQ-LDIMS-DEPLOY-002
            return self._remote.search(args, self.hard_limit, self._clock)
        deadline = time.monotonic() + self.timeout_s
        behind = self._unfinished
        if behind is not None and not behind.wait(max(0.0, deadline - time.monotonic())):
            return failure_result(SEARCH_TIMEOUT, {"timeoutSeconds": self.timeout_s})
        self._unfinished = None
        try:
            answer = answer_within(
                max(0.0, deadline - time.monotonic()), lambda: self._run_search(args)
            )
        except LeftBehindError as late:
            self._unfinished = late.ended
            return failure_result(SEARCH_TIMEOUT, {"timeoutSeconds": self.timeout_s})
        except LdimsError as error:
            answer = failure_result(error.code, error.details)
        if time.monotonic() > deadline:  # it ended, but after the limit: late is a timeout
            return failure_result(SEARCH_TIMEOUT, {"timeoutSeconds": self.timeout_s})
        return answer

    def _filters(self, raw: Mapping[str, Any]) -> FilterNode | None:
        """seed 003's filters as the engine's filter AST (REQ-LDIMS-TOOL-003)."""
        nodes: list[FilterNode] = []
        try:
            if raw.get("dateFrom"):
                nodes.append(since(raw["dateFrom"], "filters.dateFrom"))
            if raw.get("dateTo"):
                nodes.append(until(raw["dateTo"], "filters.dateTo"))
        except QmdError as error:
            field = error.message.split(" ", 1)[0].rstrip(":")
            raise LdimsError(INVALID_INPUT, {"field": field, "issue": error.message}) from None
        start, end = raw.get("dateFrom"), raw.get("dateTo")
        if start and end and start.strip()[:10] > end.strip()[:10]:
            raise LdimsError(
                INVALID_INPUT, {"field": "filters.dateFrom", "issue": "dateFrom is after dateTo"}
            )
        kind = (raw.get("documentType") or "").strip()
        if kind:
            nodes.append(
                FilterGroup(
                    "or",
                    (of_format([kind]), *(FilterCondition(k, "eq", kind) for k in TYPE_KEYS)),
                )
            )
        submitter = (raw.get("submitter") or "").strip()
        if submitter:
            nodes.append(
                FilterGroup(
                    "or", tuple(FilterCondition(k, "eq", submitter) for k in SUBMITTER_KEYS)
                )
            )
        return all_of(nodes)

    def _run_search(self, args: dict[str, Any]) -> dict[str, Any]:
        started = self._clock()
        query = args["query"].strip()
        if not query:
            raise LdimsError(INVALID_INPUT, {"field": "query", "issue": "Query cannot be empty"})
        wanted = int(args["maxResults"])
        if wanted < 1:
            raise LdimsError(
                INVALID_INPUT, {"field": "maxResults", "issue": "maxResults must be at least 1"}
            )
        shown = min(wanted, self.hard_limit)  # REQ-LDIMS-TOOL-002
        raw_filters = args.get("filters") or {}
        mode = raw_filters.get("searchMode") or "semantic"
        node = self._filters(raw_filters)
        collections = self._searcher.default_collections()
        within = (
            require_metadata(self._services.metadata).scope(node, collections)
            if node is not None
            else None
        )
        trace = SearchTrace()
        # Everything up to the hard limit is searched, so totalMatches counts what a larger
        # maxResults would have shown.
        request = SearchRequest(
            limit=self.hard_limit,
            collections=collections,
            candidate_limit=max(HYBRID_CANDIDATES, self.hard_limit),
            trace=trace,
            within=within,
        )
        used = mode
        note = None
        if not collections:
            results: list[SearchResult] = []
        elif mode == "exact":
            results = self._searcher.lex_search(query, request)
        else:
            fused = self._searcher.hybrid_query(query, replace(request, explain=True))
            skipped = [d for d in trace.degradations if d.stage == "vectors"]
            if skipped:  # REQ-LDIMS-TOOL-005: semantic without vectors is lexical, said so
                used, note = "exact", skipped[0].reason
                results = self._searcher.lex_search(query, replace(request, trace=None))
            else:
                # Lexical evidence is a document holding every word of the query; the hybrid
                # search's any-term fill would count a shared "the" (REQ-LDIMS-TOOL-006).
                every_word = self._all_terms.lex_search(query, replace(request, trace=None))
                lexical = {r.document.meta.id: r.score for r in every_word}
                sharing = self._sharing_a_word(query, request)
                results = _relevant(fused, lexical, sharing, self.semantic_floor)
        # the most relevant first, as relevanceScore says (the engine's order breaks ties)
        results = sorted(results, key=lambda r: r.score, reverse=True)
        elapsed = self._clock() - started
        page = results[:shown]
        found = (
            results_metadata(page, self._services.metadata.of)
            if self._services.metadata is not None
            else {}
        )
        search_metadata: dict[str, Any] = {
            "executionTime": f"{elapsed:.3f}s",
            "searchMode": mode,
        }
        if used != mode:
            search_metadata["effectiveSearchMode"] = used
            search_metadata["note"] = f"semantic search fell back to exact: {note}"
        if wanted > shown:
            search_metadata["maxResultsCappedAt"] = shown
        payload = {
            "isError": False,
            "results": [self._item(r, found.get(r.document.meta.id, {})) for r in page],
            "totalMatches": len(results),
            "searchMetadata": search_metadata,
        }
        return _json_text(payload, is_error=False)

    def _sharing_a_word(self, query: str, request: SearchRequest) -> frozenset[int] | None:
        """The documents holding at least one of the query's words, function words left out
        (a shared "the" or "how" is no sign of relevance). None: every document counts as
        sharing one, for a query in a script written without spaces (Chinese, Japanese),
        whose words cannot be told from its function words here."""
        if contains_cjk(query):
            return None
        words = [w for w in (sanitize_term(t) for t in extract_intent_terms(query)) if w]
        if not words:
            return frozenset()
        # the engine's all-words-then-any-word search over the content words alone
        found = self._searcher.lex_search(
            " ".join(words), replace(request, limit=request.candidate_limit, trace=None)
        )
        return frozenset(r.document.meta.id for r in found)

    def _item(self, result: SearchResult, metadata: Mapping[str, MetaValue]) -> dict[str, Any]:
        meta = result.document.meta
        return {
            "documentId": meta.display_path,
            "documentName": posixpath.basename(meta.path),
            "relevanceScore": js_round(result.score * 1000) / 1000,
            "matchedContext": _context(result),
            "metadata": _document_fields(meta, metadata),
        }

    # -- extracted_content --------------------------------------------------------------------

    def read_resource(self, uri: str) -> dict[str, Any]:
        if not (uri.startswith(URI_PREFIX) and uri.endswith(URI_SUFFIX)):
            raise JsonRpcError(INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})
        behind = self._unfinished
        if behind is not None:  # a search past its limit still reads this connection
            behind.wait(self.timeout_s)
        document_id = decode_uri_component(uri[len(URI_PREFIX) : -len(URI_SUFFIX)]).strip("/")
        if self._remote is not None:  # REQ-LDIMS-DEPLOY-002
            return self._remote.read(uri, document_id)
        collection, _, path = document_id.partition("/")
        meta = (
            self._services.store.document_by_path(collection, path) if collection and path else None
        )
        state = (
            self._extraction.recorded_state(collection, path)
            if self._extraction is not None and collection and path and meta is None
            else None
        )
        if state is not None and state.status == "pending":  # REQ-LDIMS-RES-003
            return _resource_json(
                uri,
                {
                    "status": "processing",
                    "message": "Content extraction is in progress. Please try again later.",
                },
            )
        if state is not None and state.status == "failed":  # REQ-LDIMS-RES-004
            details = {  # the stable code apart, for a client to branch on (REQ-EXTRACT-013)
                "code": state.reason,
                "reason": f"{state.reason}: {state.detail}" if state.detail else state.reason,
            }
            return _resource_json(
                uri,
                {
                    "isError": True,
                    "errorCode": "CONTENT_UNAVAILABLE_OR_FAILED",
                    "errorMessage": "Content extraction failed or content is in an unusable state.",
                    "errorDetails": details,
                },
            )
        if meta is None:  # REQ-LDIMS-RES-002
            return _resource_json(
                uri,
                {
                    "isError": True,
                    "errorCode": "RESOURCE_NOT_FOUND",
                    "errorMessage": "Document or its content not found.",
                },
            )
        fetched = self._services.retrieval.fetch(meta)
        fields = (
            self._services.metadata.of([meta.id]).get(meta.id, {})
            if self._services.metadata is not None
            else {}
        )
        extension = posixpath.splitext(meta.path)[1].lstrip(".").lower()
        fmt = fields.get("format")
        described = {
            "documentName": posixpath.basename(meta.path),
            "extractedAt": meta.modified_at,
            "format": fmt if isinstance(fmt, str) and fmt else extension,
        }
        # `metadata` is the seed's field; MCP clients keep only known fields, so it is in
        # `_meta` too, where the protocol allows anything (REQ-LDIMS-RES-001).
        return {
            "contents": [
                {
                    "uri": uri,
                    "mimeType": "text/plain",
                    "text": fetched.body,
                    "metadata": described,
                    "_meta": {META_KEY: described},
                }
            ]
        }


def _relevance(
    result: SearchResult, lexical: float | None, shares_a_word: bool, floor: float
) -> float | None:
    """How relevant a semantic-mode result is to the caller's own query (REQ-LDIMS-TOOL-006):
    the better of its BM25 score for all the query's words (`lexical`, normalised to 0..1; None
    when it lacks one of them) and the cosine similarity of the query's own vector list (not
    its expansions'). A document without every word counts only when its similarity reaches
    `floor`, and one sharing none of the query's words (`shares_a_word` False) only when it
    reaches the floor plus SEMANTIC_ALONE_MARGIN; None: not relevant."""
    explanation = result.explanation
    if explanation is None:
        return result.score if lexical is not None else None
    semantic = max(
        (
            c.backend_score
            for c in explanation.contributions
            if c.source == "vec" and c.query_type == "original"
        ),
        default=0.0,
    )
    if lexical is None:
        needed = floor if shares_a_word else floor + SEMANTIC_ALONE_MARGIN
        if semantic < needed:
            return None
    return max(lexical or 0.0, semantic)


def _relevant(
    results: list[SearchResult],
    lexical: Mapping[int, float],
    sharing: frozenset[int] | None,
    floor: float,
) -> list[SearchResult]:
    """The relevant results, in the engine's order, each scored by its relevance instead of
    its place in the fused list."""
    kept: list[SearchResult] = []
    for result in results:
        key = result.document.meta.id
        shares = sharing is None or key in sharing
        relevance = _relevance(result, lexical.get(key), shares, floor)
        if relevance is not None:
            kept.append(replace(result, score=relevance))
    return kept


def seed_timestamp(value: str) -> str | None:
    """An ISO 8601 date or time as seed 003 writes `createdAt`: `2023-12-01T10:00:00Z`, in
    UTC to the second. A bare day is its midnight; a time without a zone is taken as UTC (the
    extractors drop a PDF's or an Office file's zone). None: not an ISO date."""
    try:
        moment = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _created_at(meta: DocumentMeta, metadata: Mapping[str, MetaValue]) -> str | None:
    """The document's date (front matter `date`, an extractor's `created`, else the file's
    `modified`: the first that is an ISO date), in the seed's one format."""
    for key in DATE_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and (stamp := seed_timestamp(value)) is not None:
            return stamp
    return seed_timestamp(meta.modified_at)


def _document_fields(meta: DocumentMeta, metadata: Mapping[str, MetaValue]) -> dict[str, Any]:
    """seed 003's result metadata from the document's: createdAt is its date (front matter
    `date`, an extractor's `created`, else the file's `modified`) in the seed's format;
    submitter is `author` (or `submitter`); documentType is a `documentType` field, else the
    file format."""
    fmt = metadata.get("format")
    return {
        "createdAt": _created_at(meta, metadata),
        "submitter": _first_string(metadata, SUBMITTER_KEYS),
        "documentType": _first_string(metadata, TYPE_KEYS)
        or (fmt if isinstance(fmt, str) else posixpath.splitext(meta.path)[1].lstrip(".")),
    }


def _resource_json(uri: str, body: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "contents": [
            {
                "uri": uri,
                "mimeType": "application/json",
                "text": json.dumps(body, ensure_ascii=False, allow_nan=False),
            }
        ]
    }

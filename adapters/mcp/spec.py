"""The default MCP surface: seed 000's six tools, the `qmd://` template and the `query` prompt,
under seed 001's server-wide rules (JSON-RPC errors, error envelope, bounded output).

Requirement IDs are in docs/spec/; the ones this module implements are cited inline.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from adapters.fs.scope import ScopePolicy
from adapters.mcp.formatting import (
    RESOURCE_TEMPLATE,
    SPEC_DOCUMENT_CHARS,
    embedded_resource,
    extraction_status,
    get_body,
    multi_get_body,
    resource_contents,
    results_metadata,
    results_payload,
    status_payload,
    status_text_spec,
)
from adapters.mcp.tools import (
    READ_ONLY,
    BaseSurface,
    ToolFacts,
    error_result,
    hybrid_query_runs_model,
    optional_int,
    outside_templates,
    resource_failure,
    tool,
)
from adapters.mcp.wording import INVALID_PARAMS, JsonRpcError
from domain.errors import (
    INVALID_ARGUMENT,
    NOT_FOUND,
    QmdError,
)
from domain.model import CollectionCatalog, DocumentMeta, SearchResult, SubQuery, metadata_as_json
from domain.paths import decode_uri_component, expand_reserved
from domain.profiles import SEED_000
from domain.text import js_round
from domain.usecases.metadata import require as require_metadata
from domain.usecases.retrieval import merge_get_arguments
from domain.usecases.search import SearchRequest, default_names, primary_query
from domain.usecases.services import Services
from domain.usecases.trace import SearchTrace

SPEC_MAX_BYTES = 10240
MAX_ITEMS = 200  # seed 001 NFR-4: list results are bounded
REMAINING_HORIZON = 1000  # how far past the bound `remaining` counts
MULTI_GET_REPLY_CHARS = 1_048_576  # all documents of one multi_get reply together
HYBRID_CANDIDATES = 30
PROMPT_GUIDE = (resources.files("adapters.mcp") / "data" / "spec-query-prompt.md").read_text(
    encoding="utf-8"
)


def _search_schema(min_score_default: float, query_help: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": query_help},
            "limit": {
                "type": "number",
                "default": 10,
                "description": f"Maximum number of results (1-{MAX_ITEMS}, default 10)",
            },
            "minScore": {
                "type": "number",
                "default": min_score_default,
                "description": f"Minimum relevance score 0-1 (default {min_score_default:g})",
            },
            "collection": {
                "type": "string",
                "description": "Only search this collection",
            },
            "filter": FILTER_SCHEMA,
        },
        "required": ["query"],
        "additionalProperties": False,  # REQ-SPEC-ARGS-001
    }


# REQ-FILTER-001: the JSON AST of tobi/qmd PR #910, checked by domain/filters.py
FILTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Only documents whose metadata passes this filter, applied before ranking "
    "limits. A condition {key, operator, value} (operator: eq, ne, gt, gte, lt, lte, in, nin, "
    "all, exists; values typed exactly, ISO dates compare as strings), a group "
    "{operator: and|or, operands: [...]} or {operator: not, operand: {...}}. Keys: format "
    "(md, pdf, ...), size, modified, and front matter fields such as date, tags, author.",
}


MAX_SEARCHES = 10

# What `search`, `vsearch` and `query` put in `structuredContent` (MCP's `outputSchema`): seed
# 000's items plus this surface's own keys. A fill result's `partial` is said here and in a
# note, never inside the seed's `#id NN% path - Title` line (REQ-SPEC-SEARCH-006). A failure
# carries seed 001's envelope there instead, and clients check an isError result's structured
# content against this schema too, so the schema admits both.
RESULTS_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "docid": {"type": "string", "description": "Short id, e.g. #abc123"},
                    "file": {"type": "string", "description": "collection/relative path"},
                    "title": {"type": "string"},
                    "score": {"type": "number", "description": "Relevance 0-1, 2 decimals"},
                    "context": {"type": ["string", "null"]},
                    "snippet": {"type": "string", "description": "Lines as 'N: content'"},
                    "partial": {
                        "type": "boolean",
                        "description": "Present and true when the document matches only some "
                        "of the query's terms (the any-term fill after the documents that "
                        "match them all); absent otherwise",
                    },
                    "metadata": {
                        "type": "object",
                        "description": "The document's metadata fields, when it has some",
                    },
                },
                "required": ["docid", "file", "title", "score", "context", "snippet"],
            },
        },
        "truncated": {
            "type": "boolean",
            "description": "Whether the server's result limit cut the list",
        },
        "remaining": {
            "type": "integer",
            "description": "When truncated: how many more results there were",
        },
        "degraded": {
            "type": "array",
            "description": "Search stages skipped, with why",
            "items": {
                "type": "object",
                "properties": {"stage": {"type": "string"}, "reason": {"type": "string"}},
                "required": ["stage", "reason"],
            },
        },
        "success": {"type": "boolean", "description": "Only on a failure (isError): false"},
        "error": {
            "type": "object",
            "description": "Only on a failure (isError): its stable code and message",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        },
    },
    "anyOf": [{"required": ["results", "truncated"]}, {"required": ["success", "error"]}],
}


def with_degradations(payload: dict[str, Any], trace: SearchTrace) -> dict[str, Any]:
    """Say which stages a search skipped, in a second text item and as `degraded` in the
    structured result (REQ-SPEC-QUERY-008); nothing is added when none was."""
    if not trace.degradations:
        return payload
    notes = "\n".join(f"Note: {d.note}" for d in trace.degradations)
    payload["content"].append({"type": "text", "text": notes})
    payload["structuredContent"]["degraded"] = [
        {"stage": d.stage, "reason": d.reason} for d in trace.degradations
    ]
    return payload


def partial_note(count: int, total: int) -> str:
    """The note beside the result lines when `count` of the `total` results are partial."""
    results = "result" if total == 1 else "results"
    match = "matches" if count == 1 else "match"
    return (
        f"Note: {count} of {total} {results} {match} only some of the query's terms "
        "(partial: true in structuredContent)"
    )


def _query_schema() -> dict[str, Any]:
    """`query`'s seed-000 arguments plus documented extensions (REQ-SPEC-QUERY-004..006):
    `rerank`, `intent`, `candidateLimit` and typed `searches`, all optional; and the
    original's call shape, `searches` without `query` and `collections` (REQ-SPEC-QUERY-009)."""
    schema = _search_schema(
        0, "A natural-language query (may be left out when `searches` is given)"
    )
    del schema["required"]  # `query`, `searches` or both: checked by the handler
    schema["properties"].update(
        {
            "collections": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only search these collections (any of them); the original "
                "QMD's spelling, an alternative to `collection`",
            },
            "rerank": {
                "type": "boolean",
                "default": True,
                "description": "Rerank the best candidates with the rerank model (false: "
                "faster, scores are 1/rank of the fused list)",
            },
            "intent": {
                "type": "string",
                "description": "What the search is for; steers snippets, expansion and "
                "reranking, never matched by itself",
            },
            "candidateLimit": {
                "type": "number",
                "description": f"Candidates kept after fusion and reranked (1-{MAX_ITEMS}, "
                f"default {HYBRID_CANDIDATES}; lower is faster)",
            },
            "searches": {
                "type": "array",
                "maxItems": MAX_SEARCHES,
                "description": "Typed searches to run instead of expanding `query` "
                "(lex: keywords, vec: a question, hyde: an answer-like sentence); `query` "
                "then ranks chunks and snippets (without `query`: the first lex search, "
                "else the first vec one)",
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": ["lex", "vec", "hyde"]},
                        "query": {"type": "string"},
                    },
                    "required": ["type", "query"],
                    "additionalProperties": False,
                },
            },
        }
    )
    return schema


_LINE_NUMBERS = {
    "type": "boolean",
    "default": False,
    "description": "Prefix each line with its number (format 'N: content')",
}

_PROMPT = {
    "name": "query",
    "title": "QMD Query Guide",
    "description": "How to effectively search your knowledge base with QMD",
}


class SpecSurface(BaseSurface):
    name = "spec"
    # seed 001: an unknown tool or URI is data (REQ-SPEC-ERR-002, REQ-SPEC-ERR-003)
    failures_as_data = True
    answers_shutdown = True  # seed 001's handshake (REQ-SPEC-SHUTDOWN-001)
    templates = (RESOURCE_TEMPLATE,)

    def __init__(
        self,
        services: Services,
        version: str,
        scope: ScopePolicy | None = None,
        max_results: int | None = None,
    ):
        """`scope`: the server's scope policy (its `SurfaceContext`'s), which refuses a
        filesystem-path reference outside the root up front; the services are scoped by the
        same policy. `max_results`: the operator's hard limit on search results
        (`--max-results`), below the surface's own bound."""
        super().__init__(version)
        self._services = services
        self._max_results = min(max_results or MAX_ITEMS, MAX_ITEMS)
        self._searcher = services.searcher.with_profile(SEED_000)
        self._scope = scope or ScopePolicy()

    def prompts(self) -> list[dict[str, Any]]:
        return [_PROMPT]

    def get_prompt(self, name: str, arguments: Any) -> dict[str, Any]:
        if name != "query":
            raise JsonRpcError(INVALID_PARAMS, f"Prompt {name} not found")
        return {
            "description": _PROMPT["description"],
            "messages": [{"role": "user", "content": {"type": "text", "text": PROMPT_GUIDE}}],
        }

    # -- tools ----------------------------------------------------------------------------

    def _search_args(
        self, args: dict[str, Any]
    ) -> tuple[str, int, float, list[str], CollectionCatalog]:
        """The checked arguments, the collections to search and every collection as read once
        for this request (the results' contexts come from it)."""
        query = args["query"].strip()
        if not query:
            raise QmdError(INVALID_ARGUMENT, "query must not be empty")
        limit = int(args["limit"])
        if limit < 1:
            raise QmdError(INVALID_ARGUMENT, "limit must be at least 1")
        min_score = float(args["minScore"])
        if not 0 <= min_score <= 1:
            raise QmdError(INVALID_ARGUMENT, "minScore must be between 0 and 1")
        collection = args.get("collection")
        named = list(dict.fromkeys(args.get("collections") or []))  # `query` only
        if collection and named:
            raise QmdError(
                INVALID_ARGUMENT, "give collection (one) or collections (any of several), not both"
            )
        if collection:
            named = [collection]
        # Under --force-root an outside collection is absent from the store, so it is
        # "not found" like one that does not exist.
        catalog = self._searcher.catalog()
        known = {c.name for c in catalog.collections}
        for name in named:
            if name not in known:
                raise QmdError(NOT_FOUND, f"Collection not found: {name}")
        collections = named or default_names(catalog.collections)
        # Searched up to the requested limit (within a horizon) so that a list the hard limit
        # cuts can say how many more there were; `_payload` applies the limit.
        return query, min(limit, REMAINING_HORIZON), min_score, collections, catalog

    def _payload(self, searched: list[SearchResult], query: str) -> dict[str, Any]:
        results = searched[: self._max_results]
        remaining = len(searched) - len(results)
        payload = results_payload(results, query, with_line=False)
        partial = sum(1 for r in results if r.partial)
        if partial:  # REQ-SPEC-SEARCH-006: said beside the seed's lines, not inside them
            payload["content"].append({"type": "text", "text": partial_note(partial, len(results))})
        # seed 001's bounded output (REQ-SPEC-BOUND-001): `truncated`, and when truncated
        # `remaining`, beside the results
        payload["structuredContent"]["truncated"] = bool(remaining)
        if remaining:
            payload["structuredContent"]["remaining"] = remaining
            payload["content"][0]["text"] += (
                f"\n\n[TRUNCATED: {remaining} more results; the server returns at most "
                f"{self._max_results}]"
            )
        metadata = self._services.metadata
        if metadata is not None and results:  # REQ-FILTER-006: metadata when non-empty
            found = results_metadata(results, metadata.of)
            for item, result in zip(payload["structuredContent"]["results"], results, strict=True):
                fields = found.get(result.document.meta.id)
                if fields:
                    item["metadata"] = metadata_as_json(fields)
        return payload

    def _within(self, args: dict[str, Any], collections: list[str]) -> frozenset[int] | None:
        """The documents `filter` admits (None: no filter), REQ-FILTER-001..003."""
        raw = args.get("filter")
        if raw is None:
            return None
        return require_metadata(self._services.metadata).scope_json(raw, collections)

    @tool(
        "search",
        "Fast keyword search over the BM25 full-text index. Best for exact words, names and "
        'phrases. Supports prefix terms, "phrases" and -exclusions.',
        title="Search (BM25)",
        output_schema=RESULTS_OUTPUT_SCHEMA,
        schema=_search_schema(0, "Keywords to search for"),
        annotations=READ_ONLY,
        example={"query": "pagination"},
    )
    def _search(self, args: dict[str, Any]) -> dict[str, Any]:
        query, limit, min_score, collections, catalog = self._search_args(args)
        within = self._within(args, collections)
        if not collections:
            return self._payload([], query)
        results = self._searcher.lex_search(
            query,
            SearchRequest(
                limit=limit,
                collections=collections,
                min_score=min_score,
                within=within,
                catalog=catalog,
            ),
        )
        return self._payload(results, query)

    @tool(
        "vsearch",
        "Semantic search with vector embeddings: finds documents by meaning even without "
        "shared keywords. Needs `qmd embed` to have run.",
        title="Vector Search (Semantic)",
        output_schema=RESULTS_OUTPUT_SCHEMA,
        schema=_search_schema(0.3, "A natural-language question or description"),
        annotations=READ_ONLY,
        facts=ToolFacts(runs_model=True),
        example={"query": "pagination"},
    )
    def _vsearch(self, args: dict[str, Any]) -> dict[str, Any]:
        query, limit, min_score, collections, catalog = self._search_args(args)
        trace = SearchTrace()
        request = SearchRequest(
            limit=limit,
            collections=collections,
            min_score=min_score,
            trace=trace,
            within=self._within(args, collections),
            catalog=catalog,
        )
        results = self._searcher.vector_search(query, request)
        return with_degradations(self._payload(results, query), trace)

    @tool(
        "query",
        "Highest-quality search: query expansion, BM25 and vector search in parallel, "
        "reciprocal-rank fusion and LLM reranking. Falls back to BM25 when no vector index or "
        "models are available.",
        title="Hybrid Query (Best Quality)",
        output_schema=RESULTS_OUTPUT_SCHEMA,
        schema=_query_schema(),
        annotations=READ_ONLY,
        facts=ToolFacts(runs_model=hybrid_query_runs_model),
        example={"query": "pagination"},
    )
    def _query(self, args: dict[str, Any]) -> dict[str, Any]:
        typed = [SubQuery(s["type"], s["query"].strip()) for s in args.get("searches") or []]
        for index, sub_query in enumerate(typed):
            if not sub_query.query:
                raise QmdError(INVALID_ARGUMENT, f"searches[{index}]: query must not be empty")
        if "query" not in args:
            # the original's call shape: typed searches alone (REQ-SPEC-QUERY-009); the
            # first lex search (else vec) ranks chunks and snippets, as there
            if not typed:
                raise QmdError(
                    INVALID_ARGUMENT,
                    "give query (a natural-language query) or searches (typed sub-queries)",
                )
            args = {**args, "query": primary_query(typed)}
        query, limit, min_score, collections, catalog = self._search_args(args)
        within = self._within(args, collections)
        if not collections:
            return self._payload([], query)
        candidates = optional_int(args.get("candidateLimit"))
        if candidates is not None and candidates < 1:
            raise QmdError(INVALID_ARGUMENT, "candidateLimit must be at least 1")
        intent = (args.get("intent") or "").strip() or None
        request = SearchRequest(
            limit=limit,
            collections=collections,
            min_score=min_score,
            candidate_limit=min(candidates or HYBRID_CANDIDATES, MAX_ITEMS),
            intent=intent,
            rerank=bool(args["rerank"]),
            trace=SearchTrace(),
            within=within,
            catalog=catalog,
        )
        if typed:
            results = self._searcher.structured_query(
                typed, request, label=lambda i: f"searches[{i}]", primary=query
            )
        else:
            results = self._searcher.hybrid_query(query, request)
        assert request.trace is not None
        return with_degradations(self._payload(results, query), request.trace)

    def _find(self, reference: str, shown: str, encoded_uris: bool = False) -> DocumentMeta:
        self._scope.check_reference(reference)
        return self._services.retrieval.find(
            reference,
            original=shown,
            own_suggestions=True,  # REQ-SPEC-GET-006, REQ-SPEC-GET-NAME-001
            encoded_uris=encoded_uris,
            unicode_forms=True,  # REQ-SPEC-GET-NFC-001
        )

    @tool(
        "get",
        "Retrieve one document by path, qmd:// URI or docid (#abc123) from search results. "
        "`file.md:120` starts at line 120. Suggests similar files when the document is not "
        "found.",
        title="Get Document",
        schema={
            "type": "object",
            "properties": {
                "file": {
                    "type": "string",
                    "description": "File path, docid (#abc123) or path with a line suffix "
                    "(file.md:120)",
                },
                "fromLine": {"type": "number", "description": "First line to return (1-indexed)"},
                "maxLines": {"type": "number", "description": "Maximum number of lines"},
                "lineNumbers": _LINE_NUMBERS,
            },
            "required": ["file"],
            "additionalProperties": False,
        },
        annotations=READ_ONLY,
        example={"file": "handbook/engineering/api/pagination.md"},
        paths=("file",),
    )
    def _get(self, args: dict[str, Any]) -> dict[str, Any]:
        reference = args["file"]
        if not reference.strip():
            raise QmdError(INVALID_ARGUMENT, "file must not be empty")
        request = merge_get_arguments(
            reference,
            optional_int(args.get("fromLine")),
            optional_int(args.get("maxLines")),
            suffix_wins=True,  # REQ-SPEC-GET-007
        )
        if request.max_lines is not None and request.max_lines < 0:
            raise QmdError(INVALID_ARGUMENT, "maxLines must not be negative")
        # a resource item's `uri` is percent-encoded: it finds its document (REQ-SPEC-GET-URI-001)
        meta = self._find(request.target, reference, encoded_uris=True)
        fetched = self._services.retrieval.fetch(meta)
        body = get_body(
            fetched.body,
            request.from_line,
            request.max_lines,
            args["lineNumbers"],
            SPEC_DOCUMENT_CHARS,  # REQ-BOUND-DOC-001
        )
        return {"content": [embedded_resource(meta, body, fetched.context, with_name=True)]}

    @tool(
        "multi_get",
        "Retrieve several documents by glob pattern (journals/2025-05*.md) or a "
        "comma-separated list of paths or docids. Files larger than maxBytes are skipped with "
        "a notice; use `get` for those.",
        title="Multi-Get Documents",
        schema={
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "Glob pattern or comma-separated list of paths/docids",
                },
                "maxLines": {"type": "number", "description": "Maximum lines per file"},
                "maxBytes": {
                    "type": "number",
                    "default": SPEC_MAX_BYTES,
                    "description": "Skip files larger than this many bytes (default 10240)",
                },
                "lineNumbers": _LINE_NUMBERS,
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        annotations=READ_ONLY,
        example={"pattern": "handbook/engineering/api/*.md"},
        paths=("pattern",),
    )
    def _multi_get(self, args: dict[str, Any]) -> dict[str, Any]:
        pattern = args["pattern"]
        if not pattern.strip():
            raise QmdError(INVALID_ARGUMENT, "pattern must not be empty")
        max_bytes = int(args["maxBytes"])
        if max_bytes < 0:
            raise QmdError(INVALID_ARGUMENT, "maxBytes must not be negative")
        if max_bytes > SPEC_DOCUMENT_CHARS:  # REQ-BOUND-DOC-001
            raise QmdError(INVALID_ARGUMENT, f"maxBytes must be at most {SPEC_DOCUMENT_CHARS}")
        max_lines = optional_int(args.get("maxLines"))
        if max_lines is not None and max_lines < 0:
            raise QmdError(INVALID_ARGUMENT, "maxLines must not be negative")
        result = self._services.retrieval.multi_get(pattern, max_bytes)
        notices: list[dict[str, Any]] = []
        documents: list[dict[str, Any]] = []
        if result.errors:
            notices.append({"type": "text", "text": "Errors:\n" + "\n".join(result.errors)})
        entries = result.entries
        shown, remaining = entries[:MAX_ITEMS], max(0, len(entries) - MAX_ITEMS)
        budget, over_budget = MULTI_GET_REPLY_CHARS, 0
        for entry in shown:
            display = entry.meta.display_path
            if entry.fetched is not None and entry.meta.body_length > budget:
                notices.append(  # REQ-BOUND-DOC-002: the reply as a whole is bounded too
                    {
                        "type": "text",
                        "text": f"[SKIPPED: {display} - reply budget of "
                        f"{MULTI_GET_REPLY_CHARS} characters reached. "
                        f"Use 'qmd get' with file=\"{display}\" to retrieve.]",
                    }
                )
                budget, over_budget = 0, over_budget + 1
                continue
            if entry.fetched is not None:
                budget -= entry.meta.body_length
            if entry.fetched is None:
                size = js_round(entry.meta.body_length / 1024)
                notices.append(
                    {
                        "type": "text",
                        "text": f"[SKIPPED: {display} - File too large ({size}KB). "
                        f"Use 'qmd get' with file=\"{display}\" to retrieve.]",
                    }
                )
                continue
            body = multi_get_body(
                entry.fetched.body,
                max_lines,
                args["lineNumbers"],
                SPEC_DOCUMENT_CHARS,
                number_marker=False,  # REQ-SPEC-MGET-005
            )
            documents.append(
                embedded_resource(entry.meta, body, entry.fetched.context, with_name=True)
            )
        if not documents and not any(e.fetched is None for e in shown):
            message = "\n".join(result.errors) or f"No files matched pattern: {pattern}"
            return error_result(NOT_FOUND, message)
        content = notices + documents
        if remaining:
            content.append(
                {
                    "type": "text",
                    "text": f"[TRUNCATED: {remaining} more documents matched; "
                    "narrow the pattern to see them.]",
                }
            )
        result_payload: dict[str, Any] = {"content": content}
        result_payload["structuredContent"] = {
            "documents": len(documents),
            "skipped": sum(1 for e in shown if e.fetched is None) + over_budget,
            "errors": list(result.errors),
            "truncated": bool(remaining),
            **({"remaining": remaining} if remaining else {}),
        }
        return result_payload

    @tool(
        "status",
        "Show the index status: collections, document counts and embedding health.",
        title="Index Status",
        schema={"type": "object", "properties": {}, "additionalProperties": False},
        annotations=READ_ONLY,
        example={},
    )
    def _status(self, _args: dict[str, Any]) -> dict[str, Any]:
        status = self._services.status.status()
        return extraction_status(status, status_payload(status, status_text_spec(status)))

    # -- resources ------------------------------------------------------------------------

    def read_resource(self, uri: str) -> dict[str, Any]:
        foreign = outside_templates(uri, self.resource_templates())
        if foreign is not None:  # the Session answers these first (failures_as_data)
            return foreign
        path = decode_uri_component(uri[len("qmd://") :])
        uri = "qmd://" + expand_reserved(uri[len("qmd://") :])
        try:
            meta = self._find(path, path)
        except QmdError as error:
            return resource_failure(uri, error.code, error.message)
        fetched = self._services.retrieval.fetch(meta)
        text = get_body(fetched.body, None, None, True, SPEC_DOCUMENT_CHARS)  # REQ-BOUND-DOC-001
        return resource_contents(uri, meta, text, fetched.context)

"""`--compat 2.8.3`: the original QMD 2.8.3 MCP surface, answer for answer.

Tools `query`, `get`, `multi_get`, `status`; the `qmd://{+path}` template; no prompts;
malformed lines are dropped silently, as the original does. The tool definitions are the
original's wire contract and are kept as data (`data/compat-2.8.3-tools.json`).
Deliberate divergences would be baselined, with reasons, in
conformance/baselines/ours-compat.yaml (there are none today).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from adapters.mcp.formatting import (
    RESOURCE_TEMPLATE,
    embedded_resource,
    get_body,
    multi_get_body,
    not_found_text,
    resource_contents,
    results_payload,
    status_payload,
    status_text_2_8_3,
    text_result,
)
from adapters.mcp.tools import (
    BaseSurface,
    ToolFacts,
    hybrid_query_runs_model,
    input_validation_message,
    optional_int,
    recorded,
)
from adapters.mcp.wording import INVALID_PARAMS, JsonRpcError, OriginalWording, ProtocolWording
from adapters.version import IMPLEMENTS
from domain.errors import EXCLUDED, INVALID_ARGUMENT, DocumentNotFoundError, QmdError
from domain.model import SubQuery
from domain.paths import decode_uri_component, expand_reserved
from domain.profiles import ORIGINAL_2_8_3
from domain.usecases.retrieval import merge_get_arguments
from domain.usecases.search import SearchRequest, primary_query
from domain.usecases.services import Services

COMPAT_VERSION = IMPLEMENTS  # the original release this surface answers as
DEFAULT_MAX_BYTES = 65536
# The adapter slices with JavaScript semantics itself, so the use case returns everything.
UNBOUNDED = 1_000_000

_DATA = resources.files("adapters.mcp") / "data"
# The original's tools/list entries, loaded into this surface's Tools by name (`recorded`).
_RECORDED: dict[str, dict[str, Any]] = {
    definition["name"]: definition
    for definition in json.loads((_DATA / "compat-2.8.3-tools.json").read_text(encoding="utf-8"))
}
_INSTRUCTIONS_TAIL = (_DATA / "compat-2.8.3-instructions-tail.txt").read_text(encoding="utf-8")


class PlainTextErrors:
    """The original's error presenter: the message as text, `isError`, nothing structured."""

    def invalid_arguments(self, tool: str, issues: list[str]) -> dict[str, Any]:
        return text_result(input_validation_message(tool, issues), is_error=True)

    def not_found(self, error: DocumentNotFoundError) -> dict[str, Any]:
        return text_result(not_found_text(error), is_error=True)

    def failed(self, error: QmdError) -> dict[str, Any]:
        return text_result(error.message, is_error=True)

    def crashed(self, tool: str, error: Exception) -> dict[str, Any]:
        # The original answers a failing call with the exception's message.
        return text_result(str(error) or type(error).__name__, is_error=True)


class CompatSurface(BaseSurface):
    name = "compat-2.8.3"
    original = IMPLEMENTS  # the original's REST route and model rules come with it
    answers_malformed_messages = False
    wording: ProtocolWording = OriginalWording()
    errors = PlainTextErrors()
    list_changed = True
    templates = (RESOURCE_TEMPLATE,)

    def __init__(self, services: Services) -> None:
        super().__init__(COMPAT_VERSION)
        self._services = services

    def instructions(self) -> str:
        status = self._services.status.status()
        lines = [
            f"QMD is your local search engine over {status.total_documents} markdown documents."
        ]
        global_context = self._services.store.get_global_context()
        if global_context:
            lines.append(f"Context: {global_context}")
        names = [c.name for c in status.collections]
        if names:
            lines += [
                "",
                f"Collections (scope with `collections` parameter): {', '.join(names)}",
                "Call the `status` tool for collection descriptions, paths, "
                "and per-collection doc counts.",
            ]
        if not status.has_vector_index:
            lines += [
                "",
                "Note: No vector embeddings yet. Run `qmd embed` to enable semantic search "
                "(vec/hyde).",
            ]
        elif status.needs_embedding:
            lines += [
                "",
                f"Note: {status.needs_embedding} documents need embedding. "
                "Run `qmd embed` to update.",
            ]
        return "\n".join(lines) + "\n\n" + _INSTRUCTIONS_TAIL

    # -- tools ----------------------------------------------------------------------------

    @recorded(
        _RECORDED["query"],
        example={"searches": [{"type": "lex", "query": "pagination"}], "rerank": False},
        facts=ToolFacts(runs_model=hybrid_query_runs_model),
    )
    def _query(self, args: dict[str, Any]) -> dict[str, Any]:
        plain = args.get("query")
        searches = args.get("searches") or []
        if plain and searches:
            return text_result(
                "Error: 'query' and 'searches' are mutually exclusive; provide only one",
                is_error=True,
            )
        if not plain and not searches:
            return text_result(
                "Error: provide either 'query' (plain text) or 'searches' (typed sub-queries)",
                is_error=True,
            )
        searcher = self._services.searcher.with_profile(ORIGINAL_2_8_3)
        request = SearchRequest(
            limit=UNBOUNDED,
            collections=args.get("collections") or searcher.default_collections(),
            min_score=args["minScore"],
            candidate_limit=_js_int(args.get("candidateLimit", 40)),
            intent=args.get("intent"),
            rerank=args["rerank"],
        )
        limit = _js_int(args["limit"])
        if plain:
            primary = plain
            results = searcher.hybrid_query(plain, request)
        else:
            subs = [SubQuery(s["type"], s["query"]) for s in searches]
            primary = primary_query(subs)
            results = searcher.structured_query(subs, request)
        # JavaScript's slice(0, limit): negative limits count from the end.
        return results_payload(results[:limit], primary, with_line=True)

    @recorded(
        _RECORDED["get"],
        example={"file": "handbook/engineering/api/pagination.md"},
        paths=("file",),
    )
    def _get(self, args: dict[str, Any]) -> dict[str, Any]:
        reference = args["file"]
        request = merge_get_arguments(
            reference, optional_int(args.get("fromLine")), optional_int(args.get("maxLines"))
        )
        retrieval = self._services.retrieval
        meta = retrieval.find(request.target, original=reference)
        fetched = retrieval.fetch(meta)
        body = get_body(fetched.body, request.from_line, request.max_lines, args["lineNumbers"])
        return {"content": [embedded_resource(meta, body, fetched.context, with_name=False)]}

    @recorded(
        _RECORDED["multi_get"],
        example={"pattern": "handbook/engineering/api/*.md"},
        paths=("pattern",),
    )
    def _multi_get(self, args: dict[str, Any]) -> dict[str, Any]:
        pattern = args["pattern"]
        max_bytes = _js_int(args.get("maxBytes") or DEFAULT_MAX_BYTES)
        max_lines = optional_int(args.get("maxLines"))
        result = self._services.retrieval.multi_get(pattern, max_bytes)
        content: list[dict[str, Any]] = []
        if result.errors:
            content.append({"type": "text", "text": "Errors:\n" + "\n".join(result.errors)})
        for entry in result.entries:
            display = entry.meta.display_path
            if entry.fetched is None:
                content.append(
                    {
                        "type": "text",
                        "text": f"[SKIPPED: {display} - {entry.skipped_reason}. "
                        f"Use 'qmd_get' with file=\"{display}\" to retrieve.]",
                    }
                )
                continue
            body = multi_get_body(entry.fetched.body, max_lines, args["lineNumbers"])
            content.append(
                embedded_resource(entry.meta, body, entry.fetched.context, with_name=False)
            )
        if not content:
            return text_result(f"No files matched pattern: {pattern}", is_error=True)
        return {"content": content}

    @recorded(_RECORDED["status"], example={})
    def _status(self, _args: dict[str, Any]) -> dict[str, Any]:
        status = self._services.status.status()
        return status_payload(status, status_text_2_8_3(status))

    # -- resources ------------------------------------------------------------------------

    def read_resource(self, uri: str) -> dict[str, Any]:
        if not uri.startswith("qmd://"):
            raise JsonRpcError(INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})
        path = decode_uri_component(uri[len("qmd://") :])
        uri = "qmd://" + expand_reserved(uri[len("qmd://") :])
        retrieval = self._services.retrieval
        try:
            meta = retrieval.find(path)
        except DocumentNotFoundError:
            return {"contents": [{"uri": uri, "text": f"Document not found: {path}"}]}
        except QmdError as error:
            if error.code in (EXCLUDED, INVALID_ARGUMENT):  # INVALID_ARGUMENT: REQ-BOUND-REF-001
                return {"contents": [{"uri": uri, "text": error.message}]}
            raise
        fetched = retrieval.fetch(meta)
        text = get_body(fetched.body, None, None, True)  # bounded: REQ-BOUND-DOC-001
        return resource_contents(uri, meta, text, fetched.context)


def _js_int(value: Any) -> int:
    """JavaScript ToIntegerOrInfinity as slice() applies it (truncation towards zero)."""
    return int(value)

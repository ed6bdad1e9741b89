"""REST `POST /query` (alias `/search`): structured search answered with the original's JSON.

Body `{"searches": [{"type": "lex"|"vec"|"hyde", "query": …}], "limit"?, "minScore"?,
"collections"?, "candidateLimit"?, "intent"?, "rerank"?}`; answer `{"results": [{docid,
file: "qmd://…", title, score, context, line, snippet}]}`. As in the original, options of the
wrong type are ignored, unknown sub-query types contribute nothing, and a body that is not
a JSON object with a `searches` array gets 400 `Missing required field: searches (array)`.

Outside the original's rules (`strict_original` false: the default surface's server), the body
may also carry `filter`, the metadata filter AST (REQ-FILTER-007): a non-object is 400
`Invalid field: filter (must be an object)`, an invalid AST 400 with what is wrong, and results
carry `metadata` when it is non-empty. Under the original's rules `filter` is ignored, as 2.8.3
ignores every field it does not know.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from adapters.http.exchange import HttpReply
from adapters.mcp.formatting import result_item, results_metadata
from adapters.mcp.protocol import MAX_DEPTH, FrameError, decode_frame, depth_exceeds, encode_json
from domain.errors import QmdError
from domain.model import SubQuery, metadata_as_json
from domain.paths import encode_qmd_path
from domain.profiles import SearchProfile
from domain.usecases.metadata import require as require_metadata
from domain.usecases.search import SearchRequest
from domain.usecases.services import Services

SUB_QUERY_TYPES = ("lex", "vec", "hyde")
INTERNAL_ERROR_TEXT = b"Internal Server Error"


def _json_reply(status: int, payload: Any) -> HttpReply:
    # The wire's encoder, as the original's `JSON.stringify`: a score of 1.0 is `1`.
    return HttpReply(status, encode_json(payload), "application/json")


def internal_error() -> HttpReply:
    return HttpReply(500, INTERNAL_ERROR_TEXT)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _js_string(value: Any) -> str:
    """`String(s.query || "")`."""
    if not value:
        return ""
    if isinstance(value, bool):
        return "true"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value)


def parse_body(raw: bytes) -> Any:
    """The request body as JSON, read by the wire's decoding policy (no `NaN`, bounded
    nesting); ValueError when it is not (the original answers 500)."""
    try:
        body = decode_frame(raw)
    except FrameError as failure:
        raise ValueError(failure.message) from None
    if depth_exceeds(body):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return body


# (field, least, most): the numbers a REST search takes, as the MCP tools bound them
_NUMBER_FIELDS = (("limit", 1.0, None), ("candidateLimit", 1.0, None), ("minScore", 0.0, 1.0))


def invalid_field(body: dict[str, Any]) -> str | None:
    """Why the default surface refuses a field the original would coerce without a word
    (`"limit": -5` sliced all but the last five results, `"limit": "abc"` and a string
    `collections` were ignored), or None. A field that is absent or null is not given."""
    for name, least, most in _NUMBER_FIELDS:
        if body.get(name) is None:
            continue
        value = _number(body[name])
        if value is None or value < least or (most is not None and value > most):
            bound = f"between {least:g} and {most:g}" if most is not None else f"at least {least:g}"
            return f"Invalid field: {name} (must be a number {bound})"
    collections = body.get("collections")
    if collections is not None and not (
        isinstance(collections, list) and all(isinstance(c, str) for c in collections)
    ):
        return "Invalid field: collections (must be an array of collection names)"
    return None


def rest_query(
    services: Services, profile: SearchProfile, body: Any, strict_original: bool
) -> HttpReply:
    """Run one REST search. `strict_original` keeps the original's 500 for a failing search;
    otherwise a rejected query is a 400 with its message."""
    searches = body.get("searches") if isinstance(body, dict) else None
    if not isinstance(searches, list):
        return _json_reply(400, {"error": "Missing required field: searches (array)"})
    if not all(isinstance(s, dict) for s in searches):
        return (
            internal_error()
            if strict_original
            else _json_reply(400, {"error": "Every entry of searches must be an object"})
        )
    if not strict_original:
        invalid = invalid_field(body)
        if invalid is not None:
            return _json_reply(400, {"error": invalid})
    subs = [
        SubQuery(s["type"], _js_string(s.get("query")))
        for s in searches
        if s.get("type") in SUB_QUERY_TYPES
    ]
    searcher = services.searcher.with_profile(profile)
    collections = body.get("collections")
    if not (isinstance(collections, list) and collections):
        collections = searcher.default_collections()
    limit = _number(body.get("limit"))
    min_score = _number(body.get("minScore"))
    candidates = _number(body.get("candidateLimit"))
    request = SearchRequest(
        limit=1_000_000,
        collections=[str(c) for c in collections],
        min_score=min_score if min_score is not None else 0.0,
        intent=body["intent"] if isinstance(body.get("intent"), str) else None,
        rerank=body["rerank"] if isinstance(body.get("rerank"), bool) else True,
    )
    if candidates is not None:
        request = dataclasses.replace(request, candidate_limit=int(candidates))
    raw_filter = None if strict_original else body.get("filter")
    if raw_filter is not None:
        if not isinstance(raw_filter, dict):
            return _json_reply(400, {"error": "Invalid field: filter (must be an object)"})
        try:
            metadata = require_metadata(services.metadata)
            within = metadata.scope_json(raw_filter, request.collections)
        except QmdError as error:
            return _json_reply(400, {"error": error.message})
        request = dataclasses.replace(request, within=within)
    if not subs:
        return _json_reply(200, {"results": []})
    try:
        results = searcher.structured_query(subs, request)
    except QmdError as error:
        if strict_original:
            return internal_error()
        return _json_reply(400, {"error": error.message})
    wanted = int(limit) if limit is not None else 10
    shown = results[:wanted]
    found = (
        results_metadata(shown, services.metadata.of)
        if services.metadata is not None and not strict_original
        else {}
    )
    items = []
    for result in shown:
        item = result_item(result, with_line=True)
        item["file"] = encode_qmd_path(result.display_path)
        fields = found.get(result.document.meta.id)
        if fields:
            item["metadata"] = metadata_as_json(fields)
        items.append(item)
    return _json_reply(200, {"results": items})

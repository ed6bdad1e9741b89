"""Result shapes the MCP surfaces share (and REST's search results): search results, documents,
status."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from domain.errors import DocumentNotFoundError
from domain.indexing import IndexStatus
from domain.model import DocumentMeta, SearchResult
from domain.paths import encode_qmd_path
from domain.text import LineWindow, add_line_numbers, percent, round_score, window_lines

if TYPE_CHECKING:  # a type only: the filter code loads with the first filter
    from domain.filters import MetaValue

TEXT_MARKDOWN = "text/markdown"

# The one resource template the default and compat surfaces serve; there is no resource listing.
RESOURCE_TEMPLATE: dict[str, Any] = {
    "name": "document",
    "uriTemplate": "qmd://{+path}",
    "title": "QMD Document",
    "description": "A markdown document from your QMD knowledge base. "
    "Use search tools to discover documents.",
    "mimeType": TEXT_MARKDOWN,
}


def not_found_text(error: DocumentNotFoundError) -> str:
    """`Document not found: X`, plus up to five close paths when there are any."""
    text = f"Document not found: {error.reference}"
    if error.suggestions:
        listed = "\n".join(f"  - {path}" for path in error.suggestions)
        text += f"\n\nDid you mean one of these?\n{listed}"
    return text


def text_result(text: str, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


def document_text(body: str, context: str | None) -> str:
    """The body with the `<!-- Context: … -->` comment in front when a context applies."""
    return f"<!-- Context: {context} -->\n\n{body}" if context else body


def embedded_resource(
    meta: DocumentMeta, text: str, context: str | None, with_name: bool
) -> dict[str, Any]:
    """A `resource` content item for get/multi_get. The original's SDK drops `name` and
    `title` from embedded resources (`with_name=False`); the spec surface keeps them."""
    resource: dict[str, Any] = {"uri": encode_qmd_path(meta.display_path)}
    if with_name:
        resource["name"] = meta.display_path
        resource["title"] = meta.title
    resource["mimeType"] = TEXT_MARKDOWN
    resource["text"] = document_text(text, context)
    return {"type": "resource", "resource": resource}


# Bounded single documents (REQ-BOUND-DOC-001): a reply carries at most this many characters
# of one document; the rest is named by a line range. The compat surface allows more, so
# documents the original would send whole up to 1 MiB still come back unchanged.
SPEC_DOCUMENT_CHARS = 262_144
COMPAT_DOCUMENT_CHARS = 1_048_576


def truncation_note(window: LineWindow, max_chars: int) -> str:
    if window.cut_line:
        shown = (
            f"line {window.first} is longer than {max_chars} characters; only its start is shown"
        )
        following = window.first + 1
    else:
        shown = (
            f"lines {window.first}-{window.last} of {window.total} shown "
            f"(at most {max_chars} characters of a document per reply)"
        )
        following = window.last + 1
    more = f"; continue with fromLine: {following}" if following <= window.total else ""
    return f"[TRUNCATED: {shown}{more}]"


def get_body(
    body: str,
    from_line: int | None,
    max_lines: int | None,
    numbered: bool,
    max_chars: int = COMPAT_DOCUMENT_CHARS,
) -> str:
    """`get`: the requested line window, numbered from its first line when asked, cut to
    `max_chars` at a line boundary with a continuation note."""
    first_number = from_line or 1
    window = window_lines(body, from_line, max_lines, max_chars, first_number if numbered else None)
    text = add_line_numbers(window.text, first_number) if numbered else window.text
    return f"{text}\n\n{truncation_note(window, max_chars)}" if window.truncated else text


def multi_get_body(
    body: str,
    max_lines: int | None,
    numbered: bool,
    max_chars: int = COMPAT_DOCUMENT_CHARS,
    number_marker: bool = True,
) -> str:
    """`multi_get`: truncate to `max_lines` with a note, THEN number (the note gets a number,
    as the original does); then cut to `max_chars` like `get_body`. Without `number_marker`
    only the document's own lines are numbered and the note follows them unnumbered
    (REQ-SPEC-MGET-005)."""
    if max_lines:
        lines = body.split("\n")
        if len(lines) > max_lines:
            kept = "\n".join(lines[:max_lines])
            marker = f"[... truncated {len(lines) - max_lines} more lines]"
            if not number_marker:
                return f"{get_body(kept, None, None, numbered, max_chars)}\n\n{marker}"
            body = f"{kept}\n\n{marker}"
    return get_body(body, None, None, numbered, max_chars)


def status_payload(status: IndexStatus, text: str) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": status_structured(status),
    }


def resource_contents(
    uri: str, meta: DocumentMeta, body: str, context: str | None
) -> dict[str, Any]:
    return {
        "contents": [
            {
                "uri": uri,
                "name": meta.display_path,
                "title": meta.title or meta.display_path,
                "mimeType": TEXT_MARKDOWN,
                "text": document_text(body, context),
            }
        ]
    }


def result_item(result: SearchResult, with_line: bool) -> dict[str, Any]:
    item: dict[str, Any] = {
        "docid": f"#{result.docid}",
        "file": result.display_path,
        "title": result.title,
        "score": round_score(result.score),
        "context": result.context,
    }
    if result.partial:  # only the default surface's any-term fill sets it (REQ-SPEC-SEARCH-006)
        item["partial"] = True
    if with_line:
        # The original numbers the `@@` header line too, starting at the best line.
        item["line"] = result.snippet.line
        item["snippet"] = add_line_numbers(result.snippet.text, result.snippet.line)
    else:
        item["snippet"] = numbered_snippet_body(result)
    return item


def results_metadata(
    results: Sequence[SearchResult],
    by_id: Callable[[Sequence[int]], Mapping[int, Mapping[str, MetaValue]]],
) -> dict[int, Mapping[str, MetaValue]]:
    """The metadata of the results shown, by document id (REQ-FILTER-006): as each lexical hit
    carried it, and for the others (vector hits; an index that could not read it with the
    hit) from `by_id` in one call, made only when one lacks it."""
    found: dict[int, Mapping[str, MetaValue]] = {}
    missing: list[int] = []
    for result in results:
        if result.metadata is None:
            missing.append(result.document.meta.id)
        else:
            found[result.document.meta.id] = result.metadata
    if missing:
        found.update(by_id(missing))
    return found


def numbered_snippet_body(result: SearchResult) -> str:
    """Snippet lines with their true line numbers, without the `@@` header (seed 000)."""
    header, _, body = result.snippet.text.partition("\n")
    start = _header_start(header)
    return add_line_numbers(body, start) if body else ""


def _header_start(header: str) -> int:
    # "@@ -{start},{count} @@ (...)"
    try:
        return int(header.split()[1].lstrip("-").split(",")[0])
    except (IndexError, ValueError):
        return 1


def results_payload(results: list[SearchResult], query: str, with_line: bool) -> dict[str, Any]:
    if not results:
        text = f'No results found for "{query}"'
    else:
        plural = "" if len(results) == 1 else "s"
        lines = [f'Found {len(results)} result{plural} for "{query}":\n']
        # seed 000's line exactly; a fill result's `partial` is in the structured item
        lines += [f"#{r.docid} {percent(r.score)}% {r.display_path} - {r.title}" for r in results]
        text = "\n".join(lines)
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"results": [result_item(r, with_line) for r in results]},
    }


def status_structured(status: IndexStatus) -> dict[str, Any]:
    return {
        "totalDocuments": status.total_documents,
        "needsEmbedding": status.needs_embedding,
        "hasVectorIndex": status.has_vector_index,
        "collections": [
            {
                "name": c.name,
                "path": c.path,
                "pattern": c.pattern,
                "documents": c.documents,
                "lastUpdated": c.last_updated,
            }
            for c in status.collections
        ],
    }


def _status_head(status: IndexStatus) -> list[str]:
    return [
        "QMD Index Status:",
        f"  Total documents: {status.total_documents}",
        f"  Needs embedding: {status.needs_embedding}",
        f"  Vector index: {'yes' if status.has_vector_index else 'no'}",
        f"  Collections: {len(status.collections)}",
    ]


def status_text_2_8_3(status: IndexStatus) -> str:
    lines = _status_head(status)
    lines += [f"    - {c.name}: {_js_str(c.path)} ({c.documents} docs)" for c in status.collections]
    return "\n".join(lines)


def status_text_spec(status: IndexStatus) -> str:
    """The summary as seed 000 shows it, one `    - <folder> (<N> docs)` line per collection
    (REQ-SPEC-STATUS-003); the names the `collection` argument takes are in the structured
    result."""
    lines = _status_head(status)
    lines += [f"    - {_js_str(c.path)} ({c.documents} docs)" for c in status.collections]
    return "\n".join(lines)


def _js_str(value: str | None) -> str:
    return "null" if value is None else value


STATUS_EXTRACTION_LISTED = 20


def extraction_status(status: IndexStatus, payload: dict[str, Any]) -> dict[str, Any]:
    """The default surface's `status`: when some files could not be extracted, or were
    indexed without some pages, the text says so and `structuredContent.extraction` lists
    them (the first 20 of each; the counts are complete). Unchanged otherwise, so an index of
    markdown files answers exactly as before (REQ-EXTRACT-005)."""
    report = status.extraction
    if report.empty:
        return payload
    from domain.extraction import report_lines

    content = payload["content"][0]
    lines = report_lines(report, limit=STATUS_EXTRACTION_LISTED)
    content["text"] = content["text"] + "\n  " + "\n  ".join(lines)
    payload["structuredContent"]["extraction"] = {
        "failedCount": len(report.failed),
        "failed": [
            {"file": s.display_path, "reason": s.reason, "detail": s.detail}
            for s in report.failed[:STATUS_EXTRACTION_LISTED]
        ],
        "pagesWithoutTextCount": len(report.scanned),
        "pagesWithoutText": [
            {"file": s.display_path, "pages": list(s.empty_pages)}
            for s in report.scanned[:STATUS_EXTRACTION_LISTED]
        ],
        "notReadCount": len(report.partial),
        "notRead": [
            {"file": s.display_path, "detail": s.detail}
            for s in report.partial[:STATUS_EXTRACTION_LISTED]
        ],
    }
    return payload

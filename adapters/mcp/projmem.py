"""The projmem surface (`qmd mcp --surface projmem`): seed 002's nine tools over chunk rows and
agent sessions, with its recommended workflow as the MCP instructions (docs/spec/projmem.md).

Failures are isError results carrying seed 001's envelope, as on the default surface.
"""

from __future__ import annotations

from typing import Any

from adapters.mcp.formatting import text_result
from adapters.mcp.tools import READ_ONLY, BaseSurface, ToolFacts, tool
from adapters.version import package_version
from domain.errors import INVALID_ARGUMENT, UNAVAILABLE, QmdError
from domain.ports import ChunkRow
from domain.profiles import SEED_000
from domain.sessions import DEFAULT_MAX_TURNS, MAX_TURNS
from domain.usecases.projmem import (
    DEFAULT_TOP_K,
    MAX_TOP_K,
    ChunkHit,
    ChunkSearch,
    DeepOptions,
    SearchReport,
    Stage,
)
from domain.usecases.services import Services
from domain.usecases.sessions import SessionMemory

INSTRUCTIONS = """projmem: project memory over this index, section by section, and over your own \
past agent sessions.

Recommended search workflow:
1. Start with `projmem_search` (BM25 keyword search) to locate exact names quickly: classes, \
functions, config keys.
2. Use `projmem_vector_search` when you need semantic search for a fuzzy natural-language \
question.
3. Use `projmem_deep_search` for complex queries (the full pipeline: BM25, query expansion, \
vectors, fusion, reranking); its report says what each stage did and how long it took.
4. Fetch complete chunk text with `projmem_get` / `projmem_multi_get` (chunk ids look like \
`#123`; a document path gives all of its chunks).

Sessions: `projmem_session_list` lists agent sessions, `projmem_session_transcript` reads one \
page by page, and `projmem_session_update_summary` stores a structured summary, exported as a \
note into the session vault so past sessions are found by every search tool.
Use `projmem_status` for the index's figures and its namespaces (collections) with their ids."""

_QUERY = {"type": "string", "description": "Search query", "minLength": 1}
_TOP_K = {
    "type": "number",
    "description": f"Number of results (default {DEFAULT_TOP_K})",
    "minimum": 1,
    "maximum": MAX_TOP_K,
    "default": DEFAULT_TOP_K,
}
_NAMESPACE = {"type": "number", "description": "Limit to one namespace (see projmem_status)"}


def _search_schema(extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"query": _QUERY, "topK": _TOP_K, "namespaceId": _NAMESPACE, **extra},
        "required": ["query"],
        "additionalProperties": False,  # REQ-SPEC-ARGS-001
    }


_INT64 = 2**63  # the stores' integer range: a bound value beyond it cannot even be compared


def _whole(value: Any, name: str) -> int:
    """A number argument that must be a whole number within the stores' 64-bit range."""
    number = float(value)
    if not number.is_integer():
        raise QmdError(INVALID_ARGUMENT, f"{name} must be a whole number")
    if not -_INT64 <= number < _INT64:
        raise QmdError(INVALID_ARGUMENT, f"{name} is out of range: {value!r}")
    return int(number)


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"


def _hit_line(hit: ChunkHit) -> str:
    chunk = hit.chunk
    ident = f"#{chunk.id}" if chunk else "#?"
    heading = chunk.heading_path if chunk else ""
    return f'{ident} | {hit.collection}/{hit.path} | "{heading}" | score: {hit.score:.2f}'


def _hit_json(hit: ChunkHit, deep: bool) -> dict[str, Any]:
    chunk = hit.chunk
    item: dict[str, Any] = {
        "chunkId": chunk.id if chunk else None,
        "path": f"{hit.collection}/{hit.path}",
        "headingPath": chunk.heading_path if chunk else "",
        "startLine": chunk.start_line if chunk else None,
        "endLine": chunk.end_line if chunk else None,
        "score": round(hit.score, 4),
        "snippet": hit.preview,
    }
    if deep:
        item["rrfScore"] = None if hit.rrf_score is None else round(hit.rrf_score, 6)
        item["rerankerScore"] = None if hit.reranker_score is None else round(hit.reranker_score, 4)
    return item


def _stage_line(stage: Stage) -> str:
    if stage.skipped:
        return f"  {stage.name}: skipped: {stage.note}"
    return f"  {stage.name}: {stage.ms:.1f} ms, in {stage.count_in}, out {stage.count_out}"


def _stage_json(stage: Stage) -> dict[str, Any]:
    if stage.skipped:
        return {"name": stage.name, "skipped": True, "why": stage.note}
    return {
        "name": stage.name,
        "skipped": False,
        "ms": round(stage.ms, 2),
        "in": stage.count_in,
        "out": stage.count_out,
    }


def _report_result(report: SearchReport) -> dict[str, Any]:
    deep = report.mode == "deep"
    lines: list[str] = []
    for hit in report.hits:
        lines.append(_hit_line(hit))
        if deep:
            lines.append(
                f"  rrfScore: {_score(hit.rrf_score)} | rerankerScore: {_score(hit.reranker_score)}"
            )
        if hit.preview:
            lines.append(f"  {hit.preview}")
    footer = [
        f"Mode: {report.mode}",
        f"Time: {report.elapsed_ms:.1f} ms",
        f"Results: {len(report.hits)}",
    ]
    if deep:
        expanded = "; ".join(f"{t}: {q}" for t, q in report.expanded) or "(none)"
        footer += [
            f"Expanded queries: {expanded}",
            f"Strong signal: {'yes' if report.strong_signal else 'no'}",
            f"Re-ranking applied: {'yes' if report.reranked else 'no'}",
            "Pipeline stages:",
            *(_stage_line(s) for s in report.stages),
        ]
    footer += [f"Warning: {w}" for w in report.warnings]
    if not report.hits:
        lines.append("No results found.")
    text = "\n".join(lines) + "\n\n" + "\n".join(footer)
    structured: dict[str, Any] = {
        "mode": report.mode,
        "elapsedMs": round(report.elapsed_ms, 1),
        "count": len(report.hits),
        "results": [_hit_json(h, deep) for h in report.hits],
        "warnings": list(report.warnings),
    }
    if deep:
        structured["expandedQueries"] = [{"type": t, "query": q} for t, q in report.expanded]
        structured["strongSignal"] = bool(report.strong_signal)
        structured["rerankingApplied"] = report.reranked
        structured["stages"] = [_stage_json(s) for s in report.stages]
    result = text_result(text)
    result["structuredContent"] = structured
    return result


def _chunk_json(row: ChunkRow, namespace_id: int | None) -> dict[str, Any]:
    return {
        "chunkId": row.id,
        "path": f"{row.collection}/{row.path}",
        "namespaceName": row.collection,
        "namespaceId": namespace_id,
        "seq": row.seq,
        "headingPath": row.heading_path,
        "startLine": row.start_line,
        "endLine": row.end_line,
        "text": row.text,
    }


def _chunk_text(row: ChunkRow) -> str:
    return (
        f'#{row.id} | {row.collection}/{row.path} | "{row.heading_path}" | '
        f"lines {row.start_line}-{row.end_line} | namespace: {row.collection}\n{row.text}\n"
    )


class ProjmemSurface(BaseSurface):
    name = "projmem"
    answers_shutdown = True  # seed 001's handshake (REQ-SPEC-SHUTDOWN-001)
    instructions_text = INSTRUCTIONS

    def __init__(self, services: Services, version: str | None = None) -> None:
        # qmd's own version, as on every surface but compat (REQ-SPEC-VERSION-001)
        super().__init__(version or package_version())
        if services.chunks is None or services.sessions is None:
            raise QmdError(UNAVAILABLE, "The projmem surface needs chunk rows and sessions")
        if services.sessions.refusal is not None:
            # a session vault outside --force-root: refuse to start, naming the setting
            raise services.sessions.refusal
        self._chunks: ChunkSearch = services.chunks.with_profile(SEED_000)
        self._sessions: SessionMemory = services.sessions
        self._metadata = services.metadata  # front matter `source_kind` (projmem_status)

    # -- search -------------------------------------------------------------------------------

    @staticmethod
    def _query(args: dict[str, Any]) -> tuple[str, int, int | None]:
        query = str(args["query"]).strip()
        namespace = args.get("namespaceId")
        top_k = _whole(args["topK"], "topK")
        return query, top_k, None if namespace is None else _whole(namespace, "namespaceId")

    @tool(
        "projmem_search",
        "Exact keyword search (FTS5 BM25) over chunks: known class names, function names, "
        'config keys. Each result names its chunk: `#id | path | "Heading Path" | score`.',
        title="BM25 keyword search",
        schema=_search_schema({}),
        annotations=READ_ONLY,
        example={"query": "refresh token"},
    )
    def _search(self, args: dict[str, Any]) -> dict[str, Any]:
        return _report_result(self._chunks.search(*self._query(args)))

    @tool(
        "projmem_vector_search",
        "KNN search over chunk embeddings (run `qmd embed` first): fuzzy natural-language "
        "questions.",
        title="Semantic vector search",
        schema=_search_schema({}),
        annotations=READ_ONLY,
        facts=ToolFacts(runs_model=True),
        example={"query": "refresh token"},
    )
    def _vector_search(self, args: dict[str, Any]) -> dict[str, Any]:
        return _report_result(self._chunks.vector_search(*self._query(args)))

    @tool(
        "projmem_deep_search",
        "BM25, LLM query expansion, vectors, reciprocal rank fusion and LLM reranking, with a "
        "report: expanded queries, strong signal, reranking applied, every stage and its "
        "milliseconds, and rrfScore / rerankerScore per result.",
        title="Deep search (full pipeline)",
        schema=_search_schema(
            {
                "skipExpansion": {
                    "type": "boolean",
                    "description": "Skip query expansion",
                    "default": False,
                },
                "skipReranking": {
                    "type": "boolean",
                    "description": "Skip LLM reranking",
                    "default": False,
                },
            }
        ),
        annotations=READ_ONLY,
        facts=ToolFacts(runs_model=True),
        example={"query": "refresh token"},
    )
    def _deep_search(self, args: dict[str, Any]) -> dict[str, Any]:
        options = DeepOptions(bool(args["skipExpansion"]), bool(args["skipReranking"]))
        return _report_result(self._chunks.deep_search(*self._query(args), options))

    # -- retrieval ----------------------------------------------------------------------------

    def _rows_result(self, rows: list[ChunkRow], notes: list[str]) -> dict[str, Any]:
        ids = self._chunks.namespace_ids()
        text = "\n".join(_chunk_text(row) for row in rows)
        text += "".join(f"\nNote: {note}" for note in notes)
        result = text_result(text.strip() + "\n" if text.strip() else "No chunks found.")
        result["structuredContent"] = {
            "count": len(rows),
            "chunks": [_chunk_json(row, ids.get(row.collection)) for row in rows],
            "notes": notes,
        }
        return result

    @tool(
        "projmem_get",
        "A chunk id (`#123` or `123`) gives that chunk; a document path "
        "(`collection/path.md`) gives all of its chunks, with heading paths, line ranges and text.",
        title="Get a chunk or a document's chunks",
        schema={
            "type": "object",
            "properties": {
                "identifier": {"type": "string", "description": "Chunk id or document path"}
            },
            "required": ["identifier"],
            "additionalProperties": False,
        },
        annotations=READ_ONLY,
        example={"identifier": "#1"},
        paths=("identifier",),
    )
    def _get(self, args: dict[str, Any]) -> dict[str, Any]:
        return self._rows_result(self._chunks.get(str(args["identifier"])), [])

    @tool(
        "projmem_multi_get",
        "Chunks by id, by document path, or by a SQL LIKE pattern over "
        "`collection/path` (e.g. `handbook/engineering/%`, at most 20 documents). At least one "
        "of the three is required.",
        title="Get several chunks",
        schema={
            "type": "object",
            "properties": {
                "chunkIds": {"type": "array", "items": {"type": "number"}},
                "docPaths": {"type": "array", "items": {"type": "string"}},
                "pathPattern": {"type": "string"},
            },
            "additionalProperties": False,
        },
        annotations=READ_ONLY,
        example={"pathPattern": "notes/%"},
        paths=("docPaths", "pathPattern"),
    )
    def _multi_get(self, args: dict[str, Any]) -> dict[str, Any]:
        rows, notes = self._chunks.multi_get(
            [_whole(i, "chunkIds") for i in args.get("chunkIds") or []],
            [str(p) for p in args.get("docPaths") or []],
            args.get("pathPattern") or None,
        )
        return self._rows_result(rows, notes)

    @tool(
        "projmem_status",
        "Documents, chunks, namespaces, embedding dimension, LLM cache size, "
        "documents by kind, and the namespace list with ids.",
        title="Index status",
        schema={"type": "object", "properties": {}, "additionalProperties": False},
        annotations=READ_ONLY,
        example={},
    )
    def _status(self, _args: dict[str, Any]) -> dict[str, Any]:
        metadata = self._metadata
        status = self._chunks.status(
            self._sessions.vault_folder, metadata.of if metadata is not None else None
        )
        lines = [
            f"Documents: {status.documents}",
            f"Chunks: {status.chunks}",
            f"Namespaces: {len(status.namespaces)}",
            "Embedding dimension: "
            + (str(status.embedding_dimensions) if status.embedding_dimensions else "none"),
            f"LLM cache entries: {status.llm_cache_entries}",
            "Documents by source_kind:",
            *(f"  {kind}: {count}" for kind, count in status.by_kind.items()),
            "Namespaces:",
            *(
                f"  [{n.id}] {n.name} ({n.kind}, {n.documents} documents)"
                for n in status.namespaces
            ),
        ]
        result = text_result("\n".join(lines) + "\n")
        result["structuredContent"] = {
            "documents": status.documents,
            "chunks": status.chunks,
            "namespaceCount": len(status.namespaces),
            "embeddingDimension": status.embedding_dimensions,
            "llmCacheSize": status.llm_cache_entries,
            "documentsByKind": status.by_kind,
            "namespaces": [
                {"id": n.id, "name": n.name, "type": n.kind, "documents": n.documents}
                for n in status.namespaces
            ],
        }
        return result

    # -- sessions -----------------------------------------------------------------------------

    @tool(
        "projmem_session_list",
        "Agent sessions (Claude Code transcripts), most recent first, with status "
        "(active / compacted / closed), whether a summary exists, turns and last save time.",
        title="List agent sessions",
        schema={
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["active", "compacted", "closed"]},
                "hasSummary": {"type": "boolean"},
                "limit": {"type": "number", "minimum": 1, "maximum": 200, "default": 10},
            },
            "additionalProperties": False,
        },
        annotations=READ_ONLY,
        example={"limit": 5},
    )
    def _session_list(self, args: dict[str, Any]) -> dict[str, Any]:
        has_summary = args.get("hasSummary")
        listed = self._sessions.list_sessions(
            args.get("status"),
            None if has_summary is None else bool(has_summary),
            _whole(args["limit"], "limit"),
        )
        lines = [
            f"{s.ref.session_id} | summary: {'yes' if s.has_summary else 'no'} | {s.status} | "
            f"turns: {s.turns} | last saved: {s.ref.modified_at}"
            for s in listed
        ]
        result = text_result(("\n".join(lines) or "No sessions found.") + "\n")
        result["structuredContent"] = {
            "count": len(listed),
            "sessions": [
                {
                    "sessionId": s.ref.session_id,
                    "project": s.project,
                    "hasSummary": s.has_summary,
                    "status": s.status,
                    "turnCount": s.turns,
                    "lastSavedAt": s.ref.modified_at,
                    "skippedLines": s.skipped_lines,
                }
                for s in listed
            ],
        }
        return result

    @tool(
        "projmem_session_transcript",
        "A session's turns as `--- Turn N [role] timestamp ---` blocks with the "
        "tools used, plus its duration and the files it modified. Long transcripts come in "
        "pages: pass the `fromTurn` the answer names to read on.",
        title="Read a session transcript",
        schema={
            "type": "object",
            "properties": {
                "sessionId": {"type": "string", "description": "Default: the latest session"},
                "fromTurn": {"type": "number", "minimum": 1, "default": 1},
                "maxTurns": {
                    "type": "number",
                    "minimum": 1,
                    "maximum": MAX_TURNS,
                    "default": DEFAULT_MAX_TURNS,
                },
            },
            "additionalProperties": False,
        },
        annotations=READ_ONLY,
        example={"maxTurns": 5},
    )
    def _transcript(self, args: dict[str, Any]) -> dict[str, Any]:
        session_id = args.get("sessionId") or None
        page = self._sessions.transcript(
            session_id, _whole(args["fromTurn"], "fromTurn"), _whole(args["maxTurns"], "maxTurns")
        )
        result = text_result(page.text)
        result["structuredContent"] = {
            "firstTurn": page.first_turn,
            "lastTurn": page.last_turn,
            "nextTurn": page.next_turn,
        }
        return result

    @tool(
        "projmem_session_update_summary",
        "Store a structured summary of a session (written by you, the agent) and "
        "export it as a markdown note into the session vault collection, searchable by every "
        "tool.",
        title="Store a session summary",
        schema={
            "type": "object",
            "properties": {
                "sessionId": {"type": "string"},
                "overview": {"type": "string", "description": "2-3 sentences"},
                "decisions": {"type": "array", "items": {"type": "string"}},
                "outcomes": {"type": "array", "items": {"type": "string"}},
                "openItems": {"type": "array", "items": {"type": "string"}},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["sessionId", "overview", "decisions", "outcomes", "openItems", "tags"],
            "additionalProperties": False,
        },
        annotations={"readOnlyHint": False, "openWorldHint": False},
        facts=ToolFacts(writes=True),
        example={
            "sessionId": "2b9f1c7e-auth-4a1d-9c3e-000000000001",  # a session of the e2e fixture
            "overview": "Refresh tokens now rotate on every use.",
            "decisions": ["rotate refresh tokens"],
            "outcomes": ["login flow documented"],
            "openItems": [],
            "tags": ["auth"],
        },
    )
    def _update_summary(self, args: dict[str, Any]) -> dict[str, Any]:
        saved = self._sessions.summarize(str(args["sessionId"]), args)
        text = (
            f"Summary saved for session {saved.summary.session_id}.\n"
            f"Exported to {saved.note_path} (namespace {saved.collection}).\n"
        )
        result = text_result(text)
        result["structuredContent"] = {
            "sessionId": saved.summary.session_id,
            "notePath": saved.note_path,
            "namespace": saved.collection,
        }
        return result

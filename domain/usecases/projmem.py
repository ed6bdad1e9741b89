"""The projmem use cases: chunk-level search with an explained deep search, chunk retrieval,
index figures and agent session memory (docs/spec/projmem.md, REQ-PROJMEM-*).

Searches run on the engine's own pipelines (`Searcher`); each document found is then named by
the chunk row that holds the matched lines, so a result says which section matched.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from domain.errors import INVALID_ARGUMENT, NOT_FOUND, QmdError
from domain.filters import MetaValue
from domain.model import SearchResult
from domain.ports import ChunkIndex, ChunkRow, DocumentStore, IndexFigures, NamespaceRegistry
from domain.profiles import SearchProfile
from domain.usecases.chunks import chunk_id_of, like_to_regex
from domain.usecases.search import Searcher, SearchRequest
from domain.usecases.trace import SearchTrace

DEFAULT_TOP_K = 10
MAX_TOP_K = 100
PATTERN_CAP = 20
MAX_IDS = 100
PREVIEW_CHARS = 240

# seed 002's eight-stage deep-search pipeline, as the engine's hybrid query runs it and the
# report names its stages (REQ-PROJMEM-DEEP-001).
PIPELINE = (
    "bm25_search",
    "strong_signal",
    "query_expansion",
    "query_embedding",
    "vector_search",
    "rrf_fusion",
    "reranking",
    "blending",
)
# Derived source kinds (REQ-PROJMEM-STATUS-001), for documents whose front matter names none.
SESSION_KIND = "session_summary"
NOTE_KIND = "note"
DOCUMENT_KIND = "document"
NOTE_FORMATS = frozenset({"md", "markdown", "txt"})
DOCUMENT_FORMATS = frozenset({"pdf", "docx", "pptx", "xlsx", "html", "htm"})


@dataclass(frozen=True)
class ChunkHit:
    collection: str
    path: str
    score: float
    preview: str
    chunk: ChunkRow | None
    rrf_score: float | None = None
    reranker_score: float | None = None


@dataclass(frozen=True)
class Stage:
    name: str
    ms: float
    note: str = ""  # why the stage did not run ("" when it ran)
    count_in: int | None = None  # items in and out (None when it did not run)
    count_out: int | None = None

    @property
    def skipped(self) -> bool:
        return self.count_in is None


@dataclass
class SearchReport:
    mode: str
    hits: list[ChunkHit]
    elapsed_ms: float
    warnings: list[str] = field(default_factory=list)
    expanded: list[tuple[str, str]] = field(default_factory=list)
    strong_signal: bool | None = None
    reranked: bool = False
    stages: list[Stage] = field(default_factory=list)


@dataclass(frozen=True)
class DeepOptions:
    skip_expansion: bool = False
    skip_reranking: bool = False


@dataclass(frozen=True)
class Namespace:
    id: int
    name: str
    kind: str
    documents: int


@dataclass(frozen=True)
class ProjmemStatus:
    documents: int
    chunks: int
    namespaces: list[Namespace]
    embedding_dimensions: int | None
    llm_cache_entries: int
    by_kind: dict[str, int]


def _preview(result: SearchResult) -> str:
    lines = result.snippet.text.split("\n")[1:]  # the first line is the `@@ … @@` header
    text = " ".join(line.strip() for line in lines if line.strip())
    return text[:PREVIEW_CHARS] + ("..." if len(text) > PREVIEW_CHARS else "")


def _chunk_at(chunks: Sequence[ChunkRow], line: int) -> ChunkRow | None:
    for chunk in chunks:
        if chunk.start_line <= line <= chunk.end_line:
            return chunk
    return chunks[0] if chunks else None


class ChunkSearch:
    """projmem_search / vector_search / deep_search / get / multi_get / status."""

    def __init__(
        self,
        store: DocumentStore,
        searcher: Searcher,
        chunks: ChunkIndex,
        figures: IndexFigures,
        timer: Callable[[], float],
    ) -> None:
        self._searcher = searcher
        self._store = store
        self._chunks = chunks
        self._namespaces: NamespaceRegistry = figures
        self._figures = figures
        self._timer = timer

    def with_profile(self, profile: SearchProfile) -> ChunkSearch:
        """The same indexes, searched the way `profile` says."""
        searcher = self._searcher.with_profile(profile)
        return ChunkSearch(self._store, searcher, self._chunks, self._figures, self._timer)

    # -- namespaces ---------------------------------------------------------------------------

    def namespace_ids(self) -> dict[str, int]:
        names = [c.name for c in self._store.list_collections()]
        return self._namespaces.namespace_ids(names)

    def _scope(self, namespace_id: int | None) -> list[str]:
        if namespace_id is None:
            return self._searcher.default_collections()
        for name, number in self.namespace_ids().items():
            if number == namespace_id:
                return [name]
        raise QmdError(NOT_FOUND, f"Namespace not found: {namespace_id}")

    @staticmethod
    def _top_k(top_k: int) -> int:
        if not 1 <= top_k <= MAX_TOP_K:
            raise QmdError(INVALID_ARGUMENT, f"topK must be between 1 and {MAX_TOP_K}")
        return top_k

    # -- searches -----------------------------------------------------------------------------

    def _hits(self, results: Sequence[SearchResult], deep: bool) -> tuple[list[ChunkHit], int]:
        hits: list[ChunkHit] = []
        unchunked = 0
        for result in results:
            meta = result.document.meta
            rows = self._chunks.document_chunks(meta.collection, meta.path)
            # the chunk holding the snippet's best line: the text the result shows is the
            # text `projmem_get #id` returns (REQ-PROJMEM-DEEP-004)
            chunk = _chunk_at(rows, result.snippet.line)
            unchunked += chunk is None
            rrf = rerank = None
            if deep and result.explanation is not None:
                rrf = result.explanation.rrf_total_score
                rerank = result.explanation.rerank_score
            hits.append(
                ChunkHit(meta.collection, meta.path, result.score, _preview(result), chunk)
                if not deep
                else ChunkHit(
                    meta.collection, meta.path, result.score, _preview(result), chunk, rrf, rerank
                )
            )
        return hits, unchunked

    def _report(
        self, mode: str, started: float, results: Sequence[SearchResult], trace: SearchTrace
    ) -> SearchReport:
        hits, unchunked = self._hits(results, mode == "deep")
        warnings = [d.note for d in trace.degradations]
        if unchunked:
            warnings.append(
                f"{unchunked} result(s) have no chunk rows yet; run 'qmd update' to cut them"
            )
        elapsed = (self._timer() - started) * 1000.0
        return SearchReport(mode, hits, elapsed, warnings)

    def search(self, query: str, top_k: int, namespace_id: int | None) -> SearchReport:
        started = self._timer()
        trace = SearchTrace(self._timer)
        scope = self._scope(namespace_id)
        request = SearchRequest(limit=self._top_k(top_k), collections=scope, trace=trace)
        results = self._searcher.lex_search(query, request) if scope else []
        return self._report("bm25_only", started, results, trace)

    def vector_search(self, query: str, top_k: int, namespace_id: int | None) -> SearchReport:
        started = self._timer()
        trace = SearchTrace(self._timer)
        scope = self._scope(namespace_id)
        request = SearchRequest(
            limit=self._top_k(top_k), collections=scope, expand=False, trace=trace
        )
        results = self._searcher.vector_search(query, request) if scope else []
        return self._report("vector", started, results, trace)

    def deep_search(
        self, query: str, top_k: int, namespace_id: int | None, options: DeepOptions
    ) -> SearchReport:
        started = self._timer()
        trace = SearchTrace(self._timer)
        scope = self._scope(namespace_id)
        request = SearchRequest(
            limit=self._top_k(top_k),
            collections=scope,
            rerank=not options.skip_reranking,
            expand=not options.skip_expansion,
            explain=True,
            trace=trace,
        )
        results = self._searcher.hybrid_query(query, request) if scope else []
        report = self._report("deep", started, results, trace)
        report.expanded = list(trace.expansions)
        report.strong_signal = trace.strong_signal
        reranking = trace.steps.get("reranking")
        report.reranked = reranking is not None and reranking.ran
        if not report.reranked:  # no reranker score exists: say so rather than 0
            report.hits = [replace(hit, reranker_score=None) for hit in report.hits]
        report.stages = _stages(trace, options, bool(scope))
        return report

    # -- retrieval ---------------------------------------------------------------------------

    def _visible(self, rows: list[ChunkRow]) -> list[ChunkRow]:
        """The rows of documents the store shows (a `--force-root` scope hides the others:
        a chunk id must not reach a document a path could not, seed 001 INV-1)."""
        if not rows:
            return rows
        shown = set(self._store.document_paths())
        return [row for row in rows if (row.collection, row.path) in shown]

    # -- retrieval (by reference) ---------------------------------------------------------

    def _document(self, reference: str) -> tuple[str, str]:
        text = reference.strip()
        if text.startswith("qmd://"):
            text = text[len("qmd://") :]
        for collection, path in self._store.document_paths():
            if f"{collection}/{path}" == text:
                return collection, path
        raise QmdError(NOT_FOUND, f"Document not found: {reference}")

    def get(self, identifier: str) -> list[ChunkRow]:
        """One chunk (`#123` / `123`) or every chunk of a document (`collection/path`)."""
        chunk_id = chunk_id_of(identifier)
        if chunk_id is not None:
            found = self._visible(self._chunks.get_chunks([chunk_id]))
            if not found:
                raise QmdError(NOT_FOUND, f"Chunk not found: #{chunk_id}")
            return found
        if not identifier.strip():
            raise QmdError(INVALID_ARGUMENT, "identifier must not be empty")
        rows = self._chunks.document_chunks(*self._document(identifier))
        if not rows:
            raise QmdError(NOT_FOUND, f"No chunks for {identifier}; run 'qmd update'")
        return rows

    def multi_get(
        self, chunk_ids: Sequence[int], doc_paths: Sequence[str], pattern: str | None
    ) -> tuple[list[ChunkRow], list[str]]:
        """Chunks by id, by document and by a SQL LIKE pattern over `collection/path` (at most
        20 documents); returns the chunks and what was not found or was capped."""
        if not chunk_ids and not doc_paths and not pattern:
            raise QmdError(
                INVALID_ARGUMENT, "Provide at least one of chunkIds, docPaths or pathPattern"
            )
        if len(chunk_ids) > MAX_IDS or len(doc_paths) > MAX_IDS:
            raise QmdError(INVALID_ARGUMENT, f"At most {MAX_IDS} chunkIds and docPaths each")
        notes: list[str] = []
        rows = self._visible(self._chunks.get_chunks(list(chunk_ids)))
        found_ids = {row.id for row in rows}
        notes += [f"Chunk not found: #{i}" for i in chunk_ids if i not in found_ids]
        documents: list[tuple[str, str]] = []
        for reference in doc_paths:
            try:
                documents.append(self._document(reference))
            except QmdError as error:
                notes.append(error.message)
        if pattern:
            matcher = re.compile(like_to_regex(pattern), re.DOTALL)
            matched = [
                (c, p) for c, p in self._store.document_paths() if matcher.fullmatch(f"{c}/{p}")
            ]
            if len(matched) > PATTERN_CAP:
                notes.append(
                    f"pathPattern matched {len(matched)} documents; showing the first {PATTERN_CAP}"
                )
            documents += matched[:PATTERN_CAP]
            if not matched:
                notes.append(f"No documents match pathPattern {pattern!r}")
        seen = set(found_ids)
        for collection, path in dict.fromkeys(documents):
            for row in self._chunks.document_chunks(collection, path):
                if row.id not in seen:
                    seen.add(row.id)
                    rows.append(row)
        return rows, notes

    # -- status -------------------------------------------------------------------------------

    def status(
        self,
        vault_folder: str | None,
        declared: Callable[[Sequence[int]], Mapping[int, Mapping[str, MetaValue]]] | None = None,
    ) -> ProjmemStatus:
        """`declared`: the documents' front matter fields by id, where the index keeps them
        (a `source_kind` there names the document's kind)."""
        counts = {c.name: c.documents for c in self._store.collection_counts()}
        collections = self._store.list_collections()
        ids = self._namespaces.namespace_ids([c.name for c in collections])
        vault = posixpath.normpath(vault_folder) if vault_folder else None
        namespaces = [
            Namespace(
                ids[c.name],
                c.name,
                "sessions" if vault and posixpath.normpath(c.path) == vault else "collection",
                counts.get(c.name, 0),
            )
            for c in collections
        ]
        sessions = {n.name for n in namespaces if n.kind == "sessions"}
        documents = self._store.documents()
        fields = declared([d.id for d in documents]) if declared is not None else {}
        by_kind: dict[str, int] = {}
        for document in documents:
            kind = source_kind(
                fields.get(document.id, {}), document.path, document.collection in sessions
            )
            by_kind[kind] = by_kind.get(kind, 0) + 1
        return ProjmemStatus(
            documents=sum(counts.values()),
            # only the collections the store shows (under --force-root: inside the root)
            chunks=self._chunks.live_chunk_count([c.name for c in collections]),
            namespaces=sorted(namespaces, key=lambda n: n.id),
            embedding_dimensions=self._figures.embedding_dimensions(),
            llm_cache_entries=self._figures.llm_cache_entries(),
            by_kind=dict(sorted(by_kind.items())),
        )


def source_kind(fields: Mapping[str, MetaValue], path: str, in_session_vault: bool) -> str:
    """A document's kind: front matter `source_kind` where it has one, else derived: a
    summary in the session vault is `session_summary`, markdown and text are `note`, an
    extracted format (PDF, Word, ...) is `document`, anything else its file extension."""
    declared = fields.get("source_kind")
    if isinstance(declared, tuple):
        declared = next((v for v in declared if isinstance(v, str)), None)
    if isinstance(declared, str) and declared.strip():
        return declared.strip()
    if in_session_vault:
        return SESSION_KIND
    extension = posixpath.splitext(path)[1].lstrip(".").lower()
    if extension in NOTE_FORMATS:
        return NOTE_KIND
    if extension in DOCUMENT_FORMATS:
        return DOCUMENT_KIND
    return extension or "(none)"


def _stages(trace: SearchTrace, options: DeepOptions, searched: bool) -> list[Stage]:
    """Every stage of the pipeline in order: what it took and how many items went in and
    came out, or why it was skipped."""
    stages: list[Stage] = []
    for name in PIPELINE:
        tally = trace.steps.get(name)
        if tally is not None and tally.ran and searched:
            stages.append(Stage(name, tally.seconds * 1000.0, "", tally.count_in, tally.count_out))
        else:
            stages.append(Stage(name, 0.0, _skipped_why(name, trace, options, searched)))
    return stages


def _skipped_why(name: str, trace: SearchTrace, options: DeepOptions, searched: bool) -> str:
    """Why stage `name` did not run in this search."""
    if not searched:
        return "no namespace to search"
    reasons = {d.stage: d.reason for d in trace.degradations}
    if name == "query_expansion":
        if options.skip_expansion:
            return "skipExpansion"
        if trace.strong_signal:
            return "strong signal"
        return reasons.get("expansion") or reasons.get("vectors") or "not run"
    if name == "reranking":
        if options.skip_reranking:
            return "skipReranking"
        return reasons.get("rerank") or reasons.get("vectors") or "no candidates to rerank"
    if name in ("strong_signal", "query_embedding", "vector_search"):
        return reasons.get("vectors") or "not run"
    return "not run"

"""Lexical, vector, structured and hybrid search (docs/spec/search.md).

One implementation serves every surface. What differs between the original's behaviour and
the default surface is data, a `SearchProfile` (domain/profiles.py); what one call asks for is a
`SearchRequest`; surfaces format the results.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from domain.errors import INVALID_ARGUMENT, MODEL_UNAVAILABLE, UNAVAILABLE, QmdError
from domain.expansions import distinct_expansions
from domain.lexfill import FilledHits, merge_filled
from domain.lexquery import LexQuery, check_query, cjk_fallback_query, parse_lex_query
from domain.model import (
    Collection,
    CollectionCatalog,
    Document,
    ListContribution,
    ListQueryType,
    ListSource,
    ScoreExplanation,
    SearchResult,
    SubQuery,
)
from domain.ports import (
    DocumentStore,
    Embedder,
    LexicalIndex,
    OverBudgetError,
    QueryExpander,
    Reranker,
    TimeBudget,
    VectorIndex,
)
from domain.profiles import ORIGINAL_2_8_3, LexicalRule, ModelFailure, SearchProfile
from domain.text import extract_snippet, resolve_context
from domain.usecases.trace import (
    EMBEDDING,
    EXPANDING,
    RERANKING,
    SEARCHING,
    SearchTrace,
    stepped,
    tallied,
    traced,
)

if TYPE_CHECKING:  # a type only: the filter code loads with the first filter
    from domain.filters import MetaValue

LEG_LIMIT = 20
DEFAULT_CANDIDATE_LIMIT = 40
STRONG_SIGNAL_SCORE = 0.85
STRONG_SIGNAL_GAP = 0.15
TAIL_SCORE_RATIO = 0.99  # the any-term tail's best score, relative to the last all-term score
SNIPPET_CHARS = 300
VECTOR_INDEX_MISSING = "Vector index not found. Run 'qmd embed' first to create embeddings."

_VEC_NEGATION = re.compile(r"(^|\s)-[\w\"]")

DocKey = tuple[str, str]


@dataclass(frozen=True)
class Candidate:
    """A document on its way to a result: its score so far and where it came from."""

    document: Document
    score: float
    chunk_pos: int | None = None
    source: str = "fts"
    partial: bool = False  # from the any-term fill: not every term matched
    metadata: Mapping[str, MetaValue] | None = None  # as its lexical hit carried it


@dataclass(frozen=True)
class _ListOrigin:
    """Which search produced a ranked list (for `explain` traces)."""

    source: ListSource
    query_type: ListQueryType
    query: str


@dataclass
class _Ranked:
    """Ranked lists for fusion plus the documents they name and where each list came from."""

    lists: list[list[DocKey]] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    origins: list[_ListOrigin] = field(default_factory=list)
    backend_scores: list[list[float]] = field(default_factory=list)
    documents: dict[DocKey, Document] = field(default_factory=dict)
    # a document's metadata as a lexical hit carried it, from whichever list had it
    metadata: dict[DocKey, Mapping[str, MetaValue]] = field(default_factory=dict)

    def add(
        self,
        hits: Sequence[Candidate],
        weight: float,
        source: ListSource,
        query_type: ListQueryType,
        query: str,
    ) -> None:
        self.add_shifted(hits, weight, 0, _ListOrigin(source, query_type, query))

    def add_shifted(
        self, hits: Sequence[Candidate], weight: float, rank_offset: int, origin: _ListOrigin
    ) -> None:
        """`add`, with the list's ranks starting `rank_offset` places down."""
        if not hits:
            return  # an empty list contributes nothing and takes no list index
        keys: list[DocKey] = []
        for hit in hits:
            key = _key(hit.document)
            self.documents.setdefault(key, hit.document)
            if hit.metadata is not None:
                self.metadata.setdefault(key, hit.metadata)
            keys.append(key)
        self.lists.append(keys)
        self.weights.append(weight)
        self.offsets.append(rank_offset)
        self.origins.append(origin)
        self.backend_scores.append([hit.score for hit in hits])

    def contributions(self) -> dict[DocKey, list[ListContribution]]:
        """Per document, what each list added to its fused score (in list order)."""
        from domain.fusion import rrf_contributions  # the fused modes only

        traces: dict[DocKey, list[ListContribution]] = {}
        contributions = rrf_contributions(self.lists, self.weights, rank_offsets=self.offsets)
        for key, entries in contributions.items():
            traces[key] = [
                ListContribution(
                    list_index=e.list_index,
                    source=self.origins[e.list_index].source,
                    query_type=self.origins[e.list_index].query_type,
                    query=self.origins[e.list_index].query,
                    rank=e.rank,
                    weight=e.weight,
                    backend_score=self.backend_scores[e.list_index][e.rank - 1],
                    rrf_contribution=e.contribution,
                    rank_offset=self.offsets[e.list_index],
                )
                for e in entries
            ]
        return traces


def _key(document: Document) -> DocKey:
    return (document.meta.collection, document.meta.path)


class _Contexts:
    """Context lookups memoised for one search call (a result page shares a few collections).
    `catalog`: the collections and global context this request has read already; they are not
    read again."""

    def __init__(self, store: DocumentStore, catalog: CollectionCatalog | None = None) -> None:
        self._store = store
        self._global: str | None = catalog.global_context if catalog else None
        self._loaded_global = catalog is not None
        self._by_collection: dict[str, Mapping[str, str]] = {
            collection.name: collection.contexts
            for collection in (catalog.collections if catalog else ())
        }

    def __call__(self, document: Document) -> str | None:
        if not self._loaded_global:
            self._global = self._store.get_global_context()
            self._loaded_global = True
        name = document.meta.collection
        if name not in self._by_collection:
            collection = self._store.get_collection(name)
            self._by_collection[name] = collection.contexts if collection else {}
        return resolve_context(self._global, self._by_collection[name], document.meta.path)


@dataclass(frozen=True)
class SearchRequest:
    """What one search call asks for; every mode reads the fields it needs."""

    limit: int = 10
    collections: Sequence[str] | None = None
    min_score: float = 0.0
    candidate_limit: int = DEFAULT_CANDIDATE_LIMIT
    intent: str | None = None
    rerank: bool = True
    expand: bool = True  # vector search: embed vec/hyde expansions too; hybrid: expand at all
    explain: bool = False  # hybrid/structured: attach a ScoreExplanation to every result
    snippet_chars: int = SNIPPET_CHARS
    # only these document ids are candidates (a metadata filter resolved by
    # domain/usecases/metadata.py), applied inside every index query before its limit
    # (REQ-FILTER-003); None: every document
    within: frozenset[int] | None = None
    # the collections and global context as this request read them (`Searcher.catalog`), so
    # that result contexts come from them instead of more reads; None: read when needed
    catalog: CollectionCatalog | None = field(default=None, compare=False)
    # where the stages and the skipped ones are reported (domain/usecases/trace.py)
    trace: SearchTrace | None = field(default=None, compare=False)


# What a stage bounded by the request's time limit leaves of it for blending and the answer:
# a fifth of the time left, at most 1 s.
STAGE_RESERVE_S = 1.0
STAGE_RESERVE_SHARE = 0.2
# Query expansion comes first: it may take half of the time left (after that reserve), so the
# embedding, the vector searches and the rerank still have the other half
# (REQ-SEARCH-EXPAND-TIME-001).
EXPANSION_SHARE = 0.5

NO_VECTOR_INDEX = "no vector index (run 'qmd embed'); expansion and reranking skipped too"


def _degrade_note(request: SearchRequest, stage: str, reason: str) -> None:
    if request.trace is not None:
        request.trace.degraded(stage, reason)


@dataclass(frozen=True)
class SearchModels:
    """The model adapters a search may use; any may be absent. `budget`: the time left to the
    request being served; a profile that skips failed stages then skips a rerank that would
    run past it (REQ-SEARCH-DEGRADE-001)."""

    embedder: Embedder | None = None
    reranker: Reranker | None = None
    expander: QueryExpander | None = None
    budget: TimeBudget | None = None


@dataclass(frozen=True)
class _Snippet:
    """How result snippets are cut for one call."""

    query: str
    intent: str | None = None
    chars: int = SNIPPET_CHARS


def primary_query(searches: Sequence[SubQuery]) -> str:
    """The query a structured search ranks chunks and snippets by: the first lex sub-query,
    else the first vec one, else the first of any type."""
    for wanted in ("lex", "vec"):
        found = next((s.query for s in searches if s.type == wanted), None)
        if found is not None:
            return found
    return searches[0].query


def validate_sub_queries(searches: Sequence[SubQuery], label: Callable[[int], str]) -> None:
    """The original's structured-search checks, raised with its exact wording."""
    for index, sub in enumerate(searches):
        where = f"{label(index)} ({sub.type})"
        check_query(sub.query, f"{where}: query")
        if "\n" in sub.query or "\r" in sub.query:
            raise QmdError(
                INVALID_ARGUMENT,
                f"{where}: queries must be single-line. Remove newline characters.",
            )
        if sub.type == "lex" and sub.query.count('"') % 2 == 1:
            raise QmdError(
                INVALID_ARGUMENT,
                f'{where}: Lex query has an unmatched double quote ("). '
                "Add the closing quote or remove it.",
            )
        if sub.type in ("vec", "hyde") and _VEC_NEGATION.search(sub.query):
            raise QmdError(
                INVALID_ARGUMENT,
                f"{where}: Negation (-term) is not supported in vec/hyde queries. "
                "Use lex for exclusions.",
            )


def normalize_bm25(raw: float) -> float:
    """FTS5 bm25 (negative, lower is better) to [0, 1): |x| / (1 + |x|), the lexical legs'
    score (as `1 - distance` is the vector legs')."""
    magnitude = abs(raw)
    return magnitude / (1 + magnitude)


def default_names(collections: Sequence[Collection]) -> list[str]:
    """The names of the collections included by default; every one when none is."""
    included = [c.name for c in collections if c.include_by_default]
    return included or [c.name for c in collections]


class Searcher:
    """Every search mode over the lexical and vector indexes, with optional models."""

    def __init__(
        self,
        store: DocumentStore,
        lexical: LexicalIndex,
        vectors: VectorIndex,
        models: SearchModels | None = None,
        profile: SearchProfile = ORIGINAL_2_8_3,
    ) -> None:
        self._store = store
        self._lexical = lexical
        self._vectors = vectors
        self._models = models or SearchModels()
        self._embedder = self._models.embedder
        self._reranker = self._models.reranker
        self._expander = self._models.expander
        self.profile = profile
        self._budget = self._models.budget

    def with_profile(self, profile: SearchProfile) -> Searcher:
        """The same indexes and models, searched the way `profile` says."""
        return Searcher(self._store, self._lexical, self._vectors, self._models, profile)

    @property
    def _degrade(self) -> bool:
        return self.profile.on_model_failure is ModelFailure.SKIP_STAGE

    def _check(self) -> None:
        """Stop here if the request was given up (WorkCancelledError): called before each
        index query and model call, so a search nobody waits for no longer holds its worker,
        its connection or the model lane (REQ-SEARCH-CANCEL-LDIMSCANCEL-001)."""
        if self._budget is not None:
            self._budget.check()

    def _in_time(
        self, stage: Callable[[], T], request: SearchRequest, name: str, share: float = 1.0
    ) -> T | None:
        """Run an optional model stage. Under a profile that skips failed stages, a request
        with a time limit gives the stage `share` of what is left of it (less a reserve for
        the rest): a stage that would run past it is skipped, or left unfinished, and the
        trace says so (REQ-SEARCH-DEGRADE-001, REQ-SEARCH-EXPAND-TIME-001); the results are
        then those of the stages before it. A request without a trace has nowhere to say so:
        its stage is not cut short."""
        budget = self._budget
        says_so = self._degrade and request.trace is not None
        left = budget.seconds_left() if budget is not None and says_so else None
        if budget is None or left is None:
            return _optional_stage(self._degrade, stage, request, name)
        allowed = (left - _stage_reserve(left)) * share
        if allowed <= 0:
            _degrade_note(request, name, "the request's time limit left no time for it")
            return None
        try:
            return _optional_stage(
                self._degrade, lambda: budget.run_within(allowed, stage), request, name
            )
        except OverBudgetError:
            _degrade_note(
                request,
                name,
                f"it did not finish in the {allowed:.1f} s the request's time limit left",
            )
            return None

    def _expand(
        self, expander: QueryExpander, query: str, request: SearchRequest
    ) -> list[SubQuery] | None:
        """The model's expansions of `query`, or None when the stage was skipped: its model
        cannot be had, or (under a time limit) it did not finish in its share of the time
        left, so the search goes on with the caller's query alone (REQ-SEARCH-EXPAND-TIME-001)."""
        return self._in_time(lambda: expander.expand(query), request, "expansion", EXPANSION_SHARE)

    def _searched(self, query: str, expanded: Sequence[SubQuery]) -> list[SubQuery]:
        """The expansions this profile searches: each distinct one once, a few of each kind
        (REQ-SEARCH-EXPAND-DISTINCT-001); under the original's profile, all of them."""
        per_kind = self.profile.expansions_per_kind
        if per_kind is None:
            return list(expanded)
        return distinct_expansions(query, expanded, per_kind)

    # -- collections --------------------------------------------------------------------------

    def default_collections(self) -> list[str]:
        """Collections included by default; every collection when none is."""
        return default_names(self._store.list_collections())

    def catalog(self) -> CollectionCatalog:
        """Every collection and the global context, read once for a request (see
        `SearchRequest.catalog`)."""
        return self._store.read_catalog()

    def has_vector_index(self) -> bool:
        return self._vectors.has_vector_index()

    # -- legs ---------------------------------------------------------------------------------

    # Every leg takes the request's `within` (the documents a metadata filter admits, None:
    # all) and hands it to the index, which applies it before its limit (REQ-FILTER-003).

    def _lex_leg(
        self, text: str, limit: int, collection: str | None, *, within: frozenset[int] | None
    ) -> list[Candidate]:
        return self._lex_query_leg(parse_lex_query(text), limit, collection, within=within)

    def _lex_query_leg(
        self, query: LexQuery, limit: int, collection: str | None, *, within: frozenset[int] | None
    ) -> list[Candidate]:
        if not query.is_searchable:
            return []
        self._check()
        hits = self._lexical.search_lex(query, limit, collection, within)
        return [Candidate(h.document, normalize_bm25(h.bm25), metadata=h.metadata) for h in hits]

    def _lex_merged(
        self,
        text: str | LexQuery,
        limit: int,
        collections: Sequence[str] | None,
        *,
        within: frozenset[int] | None,
    ) -> list[Candidate]:
        """One leg per collection, merged by best score per document (no starvation)."""
        query = parse_lex_query(text) if isinstance(text, str) else text
        if collections is None:
            return self._lex_query_leg(query, limit, None, within=within)
        legs = [self._lex_query_leg(query, limit, c, within=within) for c in collections]
        return _merge_best(legs, limit)

    def _lex_by_rule(
        self,
        text: str | LexQuery,
        limit: int,
        collections: Sequence[str] | None,
        *,
        within: frozenset[int] | None,
    ) -> list[Candidate]:
        """The profile's lexical rule: every term must match, or any-term matches fill up."""
        if self.profile.lexical_rule is LexicalRule.ANY_TERM_FILL:
            return self._lex_relaxed(text, limit, collections, within=within)
        return self._lex_merged(text, limit, collections, within=within)

    def _lex_relaxed(
        self,
        text: str | LexQuery,
        limit: int,
        collections: Sequence[str] | None,
        *,
        within: frozenset[int] | None,
    ) -> list[Candidate]:
        """All-term matches first, then any-term matches to fill the limit (spec surface).

        The original ANDs every term, which leaves natural-language questions with no hits;
        see docs/decisions/0007-multi-term-lexical-ranking.md for the measured choice.
        """
        strict, loose = self._lex_split(text, limit, collections, within=within)
        return (strict + _below(loose, strict))[:limit]

    def _lex_split(
        self,
        text: str | LexQuery,
        limit: int,
        collections: Sequence[str] | None,
        *,
        within: frozenset[int] | None,
    ) -> tuple[list[Candidate], list[Candidate]]:
        """(all-term matches, any-term matches that fill up to `limit`; these are marked
        `partial`)."""
        query = parse_lex_query(text) if isinstance(text, str) else text
        if len(query.positives) < 2 or not query.is_searchable:
            whole = self._lex_merged(query, limit, collections, within=within)
            return self._with_cjk_fallback(query, (whole, []), limit, collections, within=within)
        scopes: list[str | None] = list(collections) if collections is not None else [None]
        parts: list[FilledHits] = []
        for scope in scopes:
            self._check()
            # one call per scope: an index may share work between the two rules (PostgreSQL
            # reads the corpus figures once)
            parts.append(self._lexical.search_lex_filled(query, limit, scope, within))
        every, fill = merge_filled(parts, limit)
        return self._with_cjk_fallback(
            query,
            (
                [Candidate(h.document, normalize_bm25(h.bm25), metadata=h.metadata) for h in every],
                [
                    Candidate(h.document, normalize_bm25(h.bm25), partial=True, metadata=h.metadata)
                    for h in fill
                ],
            ),
            limit,
            collections,
            within=within,
        )

    def _with_cjk_fallback(
        self,
        query: LexQuery,
        hits: tuple[list[Candidate], list[Candidate]],
        limit: int,
        collections: Sequence[str] | None,
        *,
        within: frozenset[int] | None,
    ) -> tuple[list[Candidate], list[Candidate]]:
        """The fill topped up by the words inside the query's CJK runs when the runs as a whole
        leave room (REQ-SPEC-SEARCH-007): documents matching any character pair of a run, not
        already found, after the fill and scored below it, marked partial. `hits`: (all-term
        matches, the fill)."""
        every, fill = hits
        room = limit - len(every) - len(fill)
        fallback = cjk_fallback_query(query) if room > 0 and query.is_searchable else None
        if fallback is None:
            return every, fill
        found = {_key(c.document) for c in (*every, *fill)}
        extra = [
            Candidate(c.document, c.score, c.chunk_pos, c.source, True, c.metadata)
            for c in self._lex_merged(fallback, limit + len(found), collections, within=within)
            if _key(c.document) not in found
        ][:room]
        return every, fill + _below(extra, every + fill)

    def _vec_leg(
        self,
        vector: Sequence[float],
        limit: int,
        collection: str | None,
        *,
        within: frozenset[int] | None,
    ) -> list[Candidate]:
        self._check()
        hits = self._vectors.search_vectors(vector, limit, collection, within)
        return [Candidate(h.document, 1.0 - h.distance, h.chunk_pos, "vec") for h in hits]

    def _vec_merged(
        self,
        vector: Sequence[float],
        limit: int,
        collections: Sequence[str] | None,
        *,
        within: frozenset[int] | None,
    ) -> list[Candidate]:
        if collections is None:
            return self._vec_leg(vector, limit, None, within=within)
        legs = [self._vec_leg(vector, limit, c, within=within) for c in collections]
        return _merge_best(legs, limit)

    def _require_embedder(self) -> Embedder:
        if self._embedder is None:
            raise QmdError(MODEL_UNAVAILABLE, "No embedding model is configured.")
        return self._embedder

    # -- result shaping -----------------------------------------------------------------------

    def _result(
        self,
        contexts: _Contexts,
        candidate: Candidate,
        score: float,
        snippet: _Snippet,
        chunk: tuple[int, int] | None = None,
    ) -> SearchResult:
        self._check()  # each result reads its contexts from the store
        body = candidate.document.body
        start: int | None = candidate.chunk_pos
        length: int | None = None
        if chunk is not None:
            start, length = chunk
        return SearchResult(
            candidate.document,
            score,
            contexts(candidate.document),
            extract_snippet(body, snippet.query, snippet.chars, start, length, snippet.intent),
            candidate.source,
            chunk,
            partial=candidate.partial,
            metadata=candidate.metadata,
        )

    # -- public modes -------------------------------------------------------------------------

    def lex_search(self, query: str, request: SearchRequest) -> list[SearchResult]:
        """BM25 search under the profile's lexical rule; scores are |bm25| / (1 + |bm25|)."""
        parsed = check_query(query)
        hits = self._lex_by_rule(parsed, request.limit, request.collections, within=request.within)
        contexts = _Contexts(self._store, request.catalog)
        snippet = _Snippet(query, chars=request.snippet_chars)
        return [
            self._result(contexts, hit, hit.score, snippet)
            for hit in hits
            if hit.score >= request.min_score
        ][: request.limit]

    def vector_search(self, query: str, request: SearchRequest) -> list[SearchResult]:
        """Embed the query (and its vec/hyde expansions), keep the best score per document.

        When the profile skips failed stages, an expansion model that cannot be had means no
        expansion.
        """
        check_query(query)
        if not self._vectors.has_vector_index():
            raise QmdError(UNAVAILABLE, VECTOR_INDEX_MISSING)
        embedder = self._require_embedder()
        texts = [query]
        expander = self._expander
        if request.expand and expander is None:
            _degrade_note(request, "expansion", "no query-expansion model is available")
        if request.expand and expander is not None:
            self._check()
            with traced(request.trace, EXPANDING):
                expanded = self._expand(expander, query, request) or []
            texts += [s.query for s in self._searched(query, expanded) if s.type in ("vec", "hyde")]
        self._check()
        with traced(request.trace, EMBEDDING):
            vectors = embedder.embed_queries(texts)
        with traced(request.trace, SEARCHING):
            legs = [
                self._vec_merged(v, request.limit, request.collections, within=request.within)
                for v in vectors
            ]
        merged = _merge_best(legs, request.limit)
        contexts = _Contexts(self._store, request.catalog)
        snippet = _Snippet(query, chars=request.snippet_chars)
        return [
            self._result(contexts, c, c.score, snippet)
            for c in merged
            if c.score >= request.min_score
        ]

    def structured_query(
        self,
        searches: Sequence[SubQuery],
        request: SearchRequest,
        *,
        label: Callable[[int], str] = lambda _i: "Structured search",
        primary: str | None = None,
    ) -> list[SearchResult]:
        """Typed sub-queries, no expansion: lex legs first, then vec/hyde, first list x2.

        Sub-queries are validated with the original's wording, `label` naming each one.
        `primary` ranks chunks, snippets and reranking (default: the first lex sub-query).
        """
        validate_sub_queries(searches, label)
        if request.intent:
            check_query(request.intent, "intent")
        scopes: list[str | None] = list(request.collections) if request.collections else [None]
        ranked = _Ranked()
        for sub in searches:
            if sub.type == "lex":
                for scope in scopes:
                    ranked.add(
                        self._lex_leg(sub.query, LEG_LIMIT, scope, within=request.within),
                        1.0,
                        "fts",
                        "lex",
                        sub.query,
                    )
        semantic = [s for s in searches if s.type in ("vec", "hyde")]
        if semantic and not self._vectors.has_vector_index():
            _degrade_note(request, "vectors", "no vector index (run 'qmd embed')")
        if semantic and self._vectors.has_vector_index():
            self._check()
            with traced(request.trace, EMBEDDING):
                vectors = self._require_embedder().embed_queries([s.query for s in semantic])
            for sub, vector in zip(semantic, vectors, strict=True):
                for scope in scopes:
                    ranked.add(
                        self._vec_leg(vector, LEG_LIMIT, scope, within=request.within),
                        1.0,
                        "vec",
                        sub.type,
                        sub.query,
                    )
        if ranked.weights:
            ranked.weights[0] = 2.0
        return self._fuse_and_rank(ranked, primary or primary_query(searches), request)

    def hybrid_query(self, query: str, request: SearchRequest) -> list[SearchResult]:
        """Probe BM25, expand unless the signal is strong, fuse BM25 + vectors, rerank, blend.

        Stages whose adapter is not configured are skipped. Under a profile that skips failed
        stages (the default surface), a missing vector index means BM25 only (no expansion,
        no rerank), and a model that cannot be loaded skips its stage instead of failing the
        call; under the original's profile such a model failure is the answer.
        """
        parsed = check_query(query)
        if request.intent:
            check_query(request.intent, "intent")
        collections, within = request.collections, request.within
        ranked = _Ranked()
        embedder_name = None if self._embedder is None else self._embedder.model_name
        fill = self.profile.fill_fusion_for(embedder_name)
        trace = request.trace
        with traced(trace, SEARCHING), stepped(trace, "bm25_search"):
            if fill is not None and self.profile.lexical_rule is LexicalRule.ANY_TERM_FILL:
                strict, loose = self._lex_split(parsed, LEG_LIMIT, collections, within=within)
                probe = strict + _below(loose, strict)
                origin = _ListOrigin("fts", "original", query)
                if fill.merged:
                    ranked.add_shifted(probe, fill.keyword_weight, fill.keyword_rank_offset, origin)
                else:
                    ranked.add_shifted(
                        strict, fill.keyword_weight, fill.keyword_rank_offset, origin
                    )
                    ranked.add_shifted(loose, fill.weight, fill.rank_offset, origin)
            else:
                probe = self._lex_by_rule(parsed, LEG_LIMIT, collections, within=within)
                ranked.add(probe, 2.0, "fts", "original", query)
        tallied(trace, "bm25_search", 1, len(probe))
        if self.profile.bm25_only_without_vectors and not self._vectors.has_vector_index():
            _degrade_note(request, "vectors", NO_VECTOR_INDEX)
            return self._fuse_and_rank(ranked, query, replace(request, rerank=False))
        expansions: list[SubQuery] = []
        expander = self._expander
        with stepped(trace, "strong_signal"):
            strong = _strong_signal(probe, request.intent)
        tallied(trace, "strong_signal", len(probe), int(strong))
        if request.trace is not None:
            request.trace.strong_signal = strong
        if expander is None and not strong and request.expand:
            _degrade_note(request, "expansion", "no query-expansion model is available")
        if expander is not None and not strong and request.expand:
            self._check()
            with traced(request.trace, EXPANDING), stepped(trace, "query_expansion"):
                expanded = self._expand(expander, query, request)
            expansions = self._searched(query, [s for s in expanded or [] if s.query != query])
            # None: the model could not be had, so the stage did not run (it is skipped, with
            # its reason, not reported as run with nothing out)
            if request.trace is not None and expanded is not None:
                # each distinct expansion once in the report
                request.trace.expansions = list(
                    dict.fromkeys((s.type, s.query) for s in expansions)
                )
                tallied(trace, "query_expansion", 1, len(request.trace.expansions))
        for sub in expansions:
            if sub.type == "lex":
                with stepped(trace, "bm25_search"):
                    hits = self._lex_by_rule(sub.query, LEG_LIMIT, collections, within=within)
                tallied(trace, "bm25_search", 1, len(hits))
                ranked.add(hits, 1.0, "fts", "lex", sub.query)
        embedder = self._embedder
        if embedder is None:
            _degrade_note(request, "vectors", "no embedding model is available")
        if embedder is not None and self._vectors.has_vector_index():
            semantic: list[tuple[ListQueryType, str]] = [("original", query)]
            semantic += [(s.type, s.query) for s in expansions if s.type in ("vec", "hyde")]
            texts = [text for _type, text in semantic]
            self._check()
            # None: the model could not be had and the profile degrades to BM25 only
            with traced(request.trace, EMBEDDING), stepped(trace, "query_embedding"):
                vectors = _optional_stage(
                    self._degrade, lambda: embedder.embed_queries(texts), request, "vectors"
                )
            if vectors is not None:
                tallied(trace, "query_embedding", len(texts), len(vectors))
            for (query_type, text), vector in zip(semantic, vectors or [], strict=False):
                with stepped(trace, "vector_search"):
                    near = self._vec_merged(vector, LEG_LIMIT, collections, within=within)
                tallied(trace, "vector_search", 1, len(near))
                ranked.add(
                    near,
                    2.0 if query_type == "original" else 1.0,
                    "vec",
                    query_type,
                    text,
                )
        return self._fuse_and_rank(ranked, query, request)

    # -- fusion, chunk choice, rerank, blend ---------------------------------------------------

    def _fuse_and_rank(
        self, ranked: _Ranked, primary: str, request: SearchRequest
    ) -> list[SearchResult]:
        from domain.chunking import best_chunk_index, chunk_document  # the fused modes only
        from domain.fusion import reciprocal_rank_fusion

        intent = request.intent
        trace = request.trace
        with stepped(trace, "rrf_fusion"):
            fused = reciprocal_rank_fusion(
                ranked.lists, ranked.weights, rank_offsets=ranked.offsets
            )
            fused = fused[: max(request.candidate_limit, 0)]
            candidates: list[tuple[Candidate, tuple[int, int]]] = []
            for item in fused:
                document = ranked.documents[item.key]
                chunks = chunk_document(document.body)
                best = chunks[best_chunk_index(chunks, primary, intent)] if chunks else None
                chunk = (best.pos, len(best.text)) if best else (0, len(document.body))
                found = ranked.metadata.get(item.key)
                candidates.append((Candidate(document, item.score, metadata=found), chunk))
        tallied(trace, "rrf_fusion", sum(len(keys) for keys in ranked.lists), len(candidates))
        reranker = self._reranker
        rerank_scores: list[float] | None = None
        if request.rerank and reranker is None and candidates:
            _degrade_note(request, "rerank", "no rerank model is available")
        if request.rerank and reranker is not None and candidates:
            rerank_query = f"{intent}\n\n{primary}" if intent else primary
            texts = [c.document.body[pos : pos + length] for c, (pos, length) in candidates]
            self._check()
            with traced(request.trace, RERANKING), stepped(trace, "reranking"):
                rerank_scores = self._in_time(
                    lambda: reranker.rerank(rerank_query, texts), request, "rerank"
                )
            if rerank_scores is not None:
                tallied(trace, "reranking", len(texts), len(rerank_scores))
        with stepped(trace, "blending"):
            results = self._blend(candidates, rerank_scores, ranked, primary, request)
        tallied(trace, "blending", len(candidates), len(results))
        return results

    def _blend(
        self,
        candidates: list[tuple[Candidate, tuple[int, int]]],
        rerank_scores: list[float] | None,
        ranked: _Ranked,
        primary: str,
        request: SearchRequest,
    ) -> list[SearchResult]:
        """Final scores (position blended with the rerank score), snippets and the limit."""
        from domain.fusion import blend

        intent = request.intent
        if rerank_scores is not None:
            scores = [
                blend(position, rerank_scores[position - 1])
                for position in range(1, len(candidates) + 1)
            ]
        else:
            scores = [1.0 / position for position in range(1, len(candidates) + 1)]
        order = sorted(range(len(candidates)), key=lambda i: -scores[i])
        traces = ranked.contributions() if request.explain else {}
        results: list[SearchResult] = []
        contexts = _Contexts(self._store, request.catalog)
        snippet = _Snippet(primary, intent)
        for index in order:
            candidate, chunk = candidates[index]
            if scores[index] < request.min_score:
                continue
            result = self._result(contexts, candidate, scores[index], snippet, chunk)
            if request.explain:
                trace = traces.get(_key(candidate.document), [])
                rerank_score = rerank_scores[index] if rerank_scores is not None else None
                explained = _explanation(trace, index + 1, rerank_score)
                result = replace(result, explanation=explained)
            results.append(result)
            if len(results) >= request.limit:
                break
        return results


T = TypeVar("T")


def _stage_reserve(left: float) -> float:
    """What a bounded stage leaves of the request's time for the stages after it."""
    return min(STAGE_RESERVE_S, left * STAGE_RESERVE_SHARE)


def _optional_stage(
    degrade: bool, stage: Callable[[], T], request: SearchRequest, name: str
) -> T | None:
    """Run a model stage; when degrading, a model that cannot be had skips the stage (and
    the request's trace records why)."""
    try:
        return stage()
    except QmdError as error:
        if degrade and error.code == MODEL_UNAVAILABLE:
            _degrade_note(request, name, unavailable_reason(name, error))
            return None
        raise


# The model each skippable stage needs, as a note names it.
STAGE_MODELS = {"expansion": "query-expansion", "vectors": "embedding", "rerank": "rerank"}


def unavailable_reason(stage: str, error: QmdError) -> str:
    """Why a stage was skipped for want of its model, in one short line a client may see: the
    error's own message (the model cache's folder, a resolver's or llama.cpp's error, hundreds
    of characters) is for the log and `qmd doctor`, not for a note in every result."""
    missing = f"no {STAGE_MODELS.get(stage, stage)} model is available"
    if error.brief:
        return f"{missing} ({error.brief}); 'qmd doctor' says how to get it"
    return f"{missing}; 'qmd doctor' says why"


def _explanation(
    trace: Sequence[ListContribution], rrf_rank: int, rerank_score: float | None
) -> ScoreExplanation:
    """The score breakdown of the candidate at `rrf_rank` (1-based) in the fused list; a
    list's rank offset counts for the top-rank bonus as in the fusion."""
    from domain.fusion import blend, blend_weight, top_rank_bonus

    base = 0.0
    for contribution in trace:  # summed in list order, as the fusion does
        base += contribution.rrf_contribution
    best = min((c.rank + c.rank_offset for c in trace), default=0)
    bonus = top_rank_bonus(best) if trace else 0.0
    position_score = 1.0 / rrf_rank
    if rerank_score is None:  # no reranker ran: the score is the position score alone
        weight, rerank_value, final = 1.0, 0.0, position_score
    else:
        weight, rerank_value = blend_weight(rrf_rank), rerank_score
        final = blend(rrf_rank, rerank_score)
    return ScoreExplanation(
        contributions=tuple(trace),
        rrf_base_score=base,
        top_rank_bonus=bonus,
        rrf_total_score=base + bonus,
        rrf_rank=rrf_rank,
        position_score=position_score,
        blend_weight=weight,
        rerank_score=rerank_value,
        blended_score=final,
    )


def _strong_signal(probe: Sequence[Candidate], intent: str | None) -> bool:
    if intent or not probe:
        return False
    top = probe[0].score
    second = probe[1].score if len(probe) > 1 else 0.0
    return top >= STRONG_SIGNAL_SCORE and top - second >= STRONG_SIGNAL_GAP


def _below(tail: list[Candidate], head: Sequence[Candidate]) -> list[Candidate]:
    """The any-term tail scaled (order kept) so its best score stays under the all-term list's
    lowest: results always come in descending score order and all-term matches stay first
    (REQ-SPEC-SEARCH-005)."""
    if not tail or not head:
        return tail
    floor = min(c.score for c in head)
    top = max(c.score for c in tail)
    if top < floor:
        return tail
    factor = TAIL_SCORE_RATIO * floor / top if top > 0 else 0.0
    # built directly: dataclasses.replace costs more than the rest of the fill's Python
    return [
        Candidate(c.document, c.score * factor, c.chunk_pos, c.source, c.partial, c.metadata)
        for c in tail
    ]


def _merge_best(legs: Sequence[Sequence[Candidate]], limit: int) -> list[Candidate]:
    """Best score per document over several legs, highest first (stable for ties)."""
    best: dict[DocKey, Candidate] = {}
    for leg in legs:
        for candidate in leg:
            key = _key(candidate.document)
            current = best.get(key)
            if current is None or candidate.score > current.score:
                best[key] = candidate
    return sorted(best.values(), key=lambda c: -c.score)[:limit]

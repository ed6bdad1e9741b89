"""`qmd search`, `vsearch` and `query`: the three search modes on the command line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from adapters.cli import formats as fmt
from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable, search_options
from adapters.cli.runtime import (
    JSON_SNIPPET_CHARS,
    SNIPPET_CHARS,
    collections_for,
    err,
    open_app,
    out,
    resolve_format,
    result_path,
)
from domain.profiles import COMMAND_LINE, COMMAND_LINE_STRICT
from domain.usecases.search import Searcher, SearchRequest, primary_query

if TYPE_CHECKING:
    from adapters.bootstrap import App
    from domain.model import SearchResult
    from domain.usecases.trace import SearchTrace


def _query_text(args: argparse.Namespace, command: str) -> str:
    """The words of the query; an empty or blank one is refused as the original refuses an
    empty one (exit 1, its usage line) rather than answered "No results found"."""
    text = " ".join(args.query)
    if not text.strip():
        raise CommandError(f"Usage: qmd {command} [options] <query>\nThe query must not be empty.")
    return text


def _limit(args: argparse.Namespace, kind: str, all_limit: int) -> int:
    if args.all:
        return all_limit
    if args.n is not None:
        return int(args.n)
    return 20 if kind in ("json", "files") else 5


def filter_scope(
    app: App, args: argparse.Namespace, collections: Sequence[str] | None
) -> frozenset[int] | None:
    """The documents `--filter`, `--since`, `--until`, `--type` and `--tag` admit together
    (None: no filter given), REQ-FILTER-008."""
    asked = ("filter", "since", "until", "type", "tag")
    if not any(getattr(args, name, None) for name in asked):
        return None  # no filter: none of its code is needed
    import json

    from domain.errors import INVALID_ARGUMENT, QmdError
    from domain.filters import all_of, of_format, parse_filter, since, tagged, until
    from domain.usecases.metadata import require

    nodes = []
    if getattr(args, "filter", None):
        try:
            raw = json.loads(args.filter)
        except ValueError as error:
            raise QmdError(INVALID_ARGUMENT, f"--filter is not valid JSON: {error}") from None
        nodes.append(parse_filter(raw))
    if getattr(args, "since", None):
        nodes.append(since(args.since, "--since"))
    if getattr(args, "until", None):
        nodes.append(until(args.until, "--until"))
    if getattr(args, "type", None):
        nodes.append(of_format([t for value in args.type for t in value.split(",")]))
    if getattr(args, "tag", None):
        nodes.append(tagged(args.tag))
    node = all_of(nodes)
    if node is None:
        return None
    return require(app.metadata).scope(node, collections)


def cli_searcher(app: App, args: argparse.Namespace | None = None) -> Searcher:
    """The command line's profile; `--strict` keeps only documents with every term."""
    strict = bool(getattr(args, "strict", False))
    return app.searcher.with_profile(COMMAND_LINE_STRICT if strict else COMMAND_LINE)


def search(args: argparse.Namespace) -> int:
    kind = resolve_format(args)
    query = _query_text(args, "search")
    limit = _limit(args, kind, 100000)
    fetch = 100000 if args.all else max(50, limit * 2)
    min_score = args.min_score or 0.0
    chars = JSON_SNIPPET_CHARS if kind == "json" else SNIPPET_CHARS
    _explain_note(args, kind, fused=False)
    with open_app(args) as app:
        names = collections_for(app, args.collection)
        request = SearchRequest(
            limit=fetch,
            collections=names,
            snippet_chars=chars,
            within=filter_scope(app, args, names),
        )
        results = cli_searcher(app, args).lex_search(query, request)
        rows_source = [r for r in results if r.score >= min_score][:limit]
        if not results or not rows_source:
            out(fmt.format_empty_results(kind, below_min_score=bool(results)))
            return 0
        # the searcher cut each snippet as this command would (same query, width, no chunk)
        # unless an intent changes the cut: used as it is, not cut a second time
        reuse = args.intent is None
        rows = _rows(app, rows_source, query, kind, args, chunked=False, reuse_snippets=reuse)
        out(fmt.format_results(rows, kind))
    return 0


def vsearch(args: argparse.Namespace) -> int:
    from domain.errors import UNAVAILABLE, QmdError

    kind = resolve_format(args)
    query = _query_text(args, "vsearch")
    limit = _limit(args, kind, 500)
    min_score = 0.3 if args.min_score is None else args.min_score
    _explain_note(args, kind, fused=False)
    with open_app(args, with_models=True) as app:
        names = collections_for(app, args.collection)
        _warn_pending(app)
        try:
            # A missing expansion model means no expansion, not a failed search.
            trace = _trace(args)
            request = SearchRequest(
                limit=limit,
                collections=names,
                min_score=min_score,
                trace=trace,
                within=filter_scope(app, args, names),
            )
            results = cli_searcher(app, args).vector_search(query, request)
            _say_degradations(trace)
        except QmdError as error:
            if error.code != UNAVAILABLE:
                raise
            err(error.message)
            results = []
        if not results:
            out(fmt.format_empty_results(kind))
            return 0
        out(fmt.format_results(_rows(app, results, query, kind, args, chunked=False), kind))
    return 0


def _trace(args: argparse.Namespace) -> SearchTrace:
    """Stages shown live on a terminal (`expanding… 1.2 s`), nothing when piped or --quiet."""
    import sys
    import time

    from domain.usecases.trace import SearchTrace

    if args.quiet or not sys.stderr.isatty():
        return SearchTrace(time.perf_counter)

    def show(stage: str, seconds: float | None) -> None:
        if seconds is None:
            sys.stderr.write(f"\r\x1b[K{stage}…")
        else:
            sys.stderr.write(f"\r\x1b[K{stage} {seconds:.1f}s\n")
        sys.stderr.flush()

    return SearchTrace(time.perf_counter, show)


def _say_degradations(trace: SearchTrace) -> None:
    """Each skipped stage once on stderr, piped or not: results without it look the same."""
    for degradation in trace.degradations:
        err(f"Note: {degradation.note}")


def _explain_note(args: argparse.Namespace, kind: str, *, fused: bool) -> None:
    """Say on stderr when `--explain` will show nothing, instead of ignoring it silently."""
    if not args.explain:
        return
    if not fused:
        err("Note: --explain traces fused scores; only `qmd query` records them.")
    elif kind not in ("cli", "json"):
        err("Note: --explain traces are shown in the cli and json formats only.")


def _warn_pending(app: App) -> None:
    report = app.status.status()
    if report.needs_embedding and report.total_documents:
        share = round(100 * report.needs_embedding / report.total_documents)
        err(
            f"Warning: {report.needs_embedding} documents ({share}%) need embeddings. "
            "Run 'qmd embed' for better results."
        )


def query(args: argparse.Namespace) -> int:
    from adapters.cli.querydoc import parse_query_document
    from domain.usecases.search import DEFAULT_CANDIDATE_LIMIT

    kind = resolve_format(args)
    text = _query_text(args, "query")
    document = parse_query_document(text)
    limit = _limit(args, kind, 500)
    min_score = args.min_score or 0.0
    intent = args.intent or (document.intent if document else None)
    candidates = args.candidate_limit or DEFAULT_CANDIDATE_LIMIT
    with open_app(args, with_models=True) as app:
        names = collections_for(app, args.collection)
        _warn_pending(app)
        request = SearchRequest(
            limit=limit,
            collections=names,
            min_score=min_score,
            candidate_limit=candidates,
            intent=intent,
            rerank=not args.no_rerank,
            explain=args.explain,
            trace=_trace(args),
            within=filter_scope(app, args, names),
        )
        if document is not None and document.searches:
            labels = "+".join(s.type for s in document.searches)
            err(f"Structured search: {len(document.searches)} queries ({labels})")
            if intent:
                err(f"├─ intent: {intent}")
            for sub in document.searches:
                preview = sub.query if len(sub.query) <= 72 else sub.query[:69] + "..."
                err(f"├─ {sub.type}: {preview}")
            err("└─ Searching...")
            results = cli_searcher(app, args).structured_query(
                document.searches, request, label=lambda i: f"Line {document.lines[i]}"
            )
            display = primary_query(document.searches)
        else:
            plain = document.expand if document is not None and document.expand else text
            results = cli_searcher(app, args).hybrid_query(plain, request)
            display = plain
        if request.trace is not None:
            _say_degradations(request.trace)
        if not results:
            out(fmt.format_empty_results(kind))
            return 0
        kept = [r for r in results if r.score >= min_score]
        if not kept:
            out(fmt.format_empty_results(kind, below_min_score=True))
            return 0
        _explain_note(args, kind, fused=True)
        out(fmt.format_results(_rows(app, kept, display, kind, args, chunked=True), kind))
    return 0


def _rows(
    app: App,
    results: Sequence[SearchResult],
    query: str,
    kind: str,
    args: argparse.Namespace,
    *,
    chunked: bool,
    reuse_snippets: bool = False,
) -> list[fmt.ResultRow]:
    from domain.text import add_line_numbers, extract_snippet

    chars = JSON_SNIPPET_CHARS if kind == "json" else SNIPPET_CHARS
    intent: str | None = args.intent
    rows: list[fmt.ResultRow] = []
    for result in results:
        body = result.document.body
        meta = result.document.meta
        chunk_pos: int | None = None
        chunk_len: int | None = None
        if chunked and result.chunk is not None:  # the chunk the search chose for this hit
            chunk_pos, chunk_len = result.chunk
        snippet = (
            result.snippet
            if reuse_snippets
            else extract_snippet(body, query, chars, chunk_pos, chunk_len, intent)
        )
        text = body if args.full else snippet.text
        if args.line_numbers and text:
            start = 1 if args.full or kind not in ("cli", "csv") else snippet.line
            text = add_line_numbers(text, start)
        rows.append(
            fmt.ResultRow(
                docid=meta.docid,
                score=result.score,
                file=result_path(app, args, meta.collection, meta.path),
                title=meta.title,
                context=result.context,
                line=snippet.line,
                text=text,
                full=bool(args.full),
                line_matched=fmt.line_matched(snippet.text, query),
                explain=result.explanation if args.explain else None,
                partial=result.partial,
            )
        )
    return rows


def register(table: CommandTable) -> None:
    keyword = table.command("search", search, "BM25 full-text search")
    search_options(keyword)
    search_options(table.command("vsearch", vsearch, "vector search", "vector-search"))
    hybrid = table.command("query", query, "hybrid search", "deep-search")
    search_options(hybrid)
    for parser in (keyword, hybrid):
        parser.add_argument(
            "--strict",
            action="store_true",
            help="only documents with every term (the original's rule; default: documents "
            "with every term first, then those with some)",
        )

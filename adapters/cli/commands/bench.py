"""`qmd bench <fixture.json>`: search quality per backend against a fixture of queries and the
files that should come back, in the original's fixture format and with its metrics:

    {"description": "...", "version": 1, "collection": "docs",            # collection optional
     "queries": [{"id": "q1", "query": "...", "type": "semantic", "description": "...",
                  "expected_files": ["guide/install.md"], "expected_in_top_k": 3}]}

Backends: bm25 (`search`), vector (`vsearch`), hybrid (`query --no-rerank`), full (`query`).
A backend that cannot run (no embeddings, no model) scores 0 for that query, as the original.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable
from adapters.cli.runtime import err, open_app, out

if TYPE_CHECKING:
    from domain.usecases.search import Searcher


@dataclass(frozen=True)
class BenchQuery:
    id: str
    query: str
    type: str
    expected_files: tuple[str, ...]
    expected_in_top_k: int


@dataclass
class BackendScore:
    precision_at_k: float = 0.0
    recall: float = 0.0
    recall_at_1: float = 0.0
    recall_at_3: float = 0.0
    recall_at_5: float = 0.0
    mrr: float = 0.0
    f1: float = 0.0
    hits_at_k: int = 0
    total_expected: int = 0
    latency_ms: float = 0.0
    top_files: list[str] = field(default_factory=list)
    matched_files: list[str] = field(default_factory=list)
    unmatched_expected_files: list[str] = field(default_factory=list)


def normalize_path(path: str) -> str:
    """`qmd://collection/a/b.md` → `a/b.md`, lower-cased, without outer slashes."""
    if path.startswith("qmd://"):
        rest = path[len("qmd://") :]
        path = rest.partition("/")[2] if "/" in rest else rest
    return path.lower().strip("/")


def paths_match(result: str, expected: str) -> bool:
    found, wanted = normalize_path(result), normalize_path(expected)
    return found == wanted or found.endswith(wanted) or wanted.endswith(found)


def _hits_within(found: Sequence[str], expected: Sequence[str], k: int) -> int:
    top = found[:k]
    return sum(1 for e in expected if any(paths_match(r, e) for r in top))


def score_results(found: Sequence[str], expected: Sequence[str], top_k: int) -> BackendScore:
    """The original's metrics: precision@k over min(k, |expected|), recall, R@1/3/5, MRR, F1."""
    hits = _hits_within(found, expected, top_k)
    matched = [e for e in expected if any(paths_match(r, e) for r in found)]
    mrr = next(
        (1.0 / rank for rank, r in enumerate(found, 1) if any(paths_match(r, e) for e in expected)),
        0.0,
    )
    total = len(expected)
    denominator = min(top_k, total)
    precision = hits / denominator if denominator else 0.0
    recall = len(matched) / total if total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return BackendScore(
        precision_at_k=precision,
        recall=recall,
        recall_at_1=_hits_within(found, expected, 1) / total if total else 0.0,
        recall_at_3=_hits_within(found, expected, 3) / total if total else 0.0,
        recall_at_5=_hits_within(found, expected, 5) / total if total else 0.0,
        mrr=mrr,
        f1=f1,
        hits_at_k=hits,
        total_expected=total,
        top_files=list(found[:10]),
        matched_files=matched,
        unmatched_expected_files=[e for e in expected if e not in matched],
    )


def load_fixture(path: str) -> tuple[dict[str, Any], list[BenchQuery]]:
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except OSError as error:
        raise CommandError(f"Cannot read fixture {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise CommandError(f"Fixture {path} is not valid JSON: {error}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("queries"), list):
        raise CommandError(f"Fixture {path} needs a \"queries\" list (see 'qmd bench --help').")
    queries = []
    for number, item in enumerate(raw["queries"], 1):
        if not isinstance(item, dict) or not isinstance(item.get("query"), str):
            raise CommandError(f'Fixture {path}: query {number} needs a "query" string.')
        expected = item.get("expected_files") or []
        if not isinstance(expected, list) or not all(isinstance(e, str) for e in expected):
            raise CommandError(f"Fixture {path}: query {number}: expected_files must be strings.")
        top_k = item.get("expected_in_top_k", len(expected) or 1)
        if not isinstance(top_k, int) or top_k < 1:
            raise CommandError(f"Fixture {path}: query {number}: expected_in_top_k must be >= 1.")
        queries.append(
            BenchQuery(
                str(item.get("id") or f"q{number}"),
                item["query"],
                str(item.get("type") or ""),
                tuple(expected),
                top_k,
            )
        )
    return raw, queries


Backend = Callable[["Searcher", str, int, "list[str] | None"], list[str]]


def _files(results: Sequence[Any]) -> list[str]:
    return [f"qmd://{r.document.meta.collection}/{r.document.meta.path}" for r in results]


def _bm25(searcher: Searcher, query: str, limit: int, names: list[str] | None) -> list[str]:
    from domain.usecases.search import SearchRequest

    return _files(searcher.lex_search(query, SearchRequest(limit=limit, collections=names)))


def _vector(searcher: Searcher, query: str, limit: int, names: list[str] | None) -> list[str]:
    from domain.usecases.search import SearchRequest

    request = SearchRequest(limit=limit, collections=names, expand=False)
    return _files(searcher.vector_search(query, request))


def _hybrid(rerank: bool) -> Backend:
    def run(searcher: Searcher, query: str, limit: int, names: list[str] | None) -> list[str]:
        from domain.usecases.search import SearchRequest

        request = SearchRequest(limit=limit, collections=names, rerank=rerank)
        return _files(searcher.hybrid_query(query, request))

    return run


BACKENDS: tuple[tuple[str, Backend], ...] = (
    ("bm25", _bm25),
    ("vector", _vector),
    ("hybrid", _hybrid(False)),
    ("full", _hybrid(True)),
)


def _summary(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    summary: dict[str, dict[str, float]] = {}
    for name, _backend in BACKENDS:
        rows = [r["backends"][name] for r in results if name in r["backends"]]
        if not rows:
            continue
        summary[name] = {
            f"avg_{key}": sum(row[source] for row in rows) / len(rows)
            for key, source in (
                ("precision", "precision_at_k"),
                ("recall", "recall"),
                ("recall_at_1", "recall_at_1"),
                ("recall_at_3", "recall_at_3"),
                ("recall_at_5", "recall_at_5"),
                ("mrr", "mrr"),
                ("f1", "f1"),
                ("latency_ms", "latency_ms"),
            )
        }
    return summary


def bench(args: argparse.Namespace) -> int:
    from domain.errors import QmdError
    from domain.profiles import COMMAND_LINE

    raw, queries = load_fixture(args.fixture)
    chosen = (args.collection or [None])[0] or raw.get("collection")
    with open_app(args, with_models=True) as app:
        counts = {c.name: c.documents for c in app.store.collection_counts()}
        if chosen is not None and chosen not in counts:
            available = ", ".join(sorted(counts)) or "none"
            raise CommandError(f"Collection not found: {chosen}\nAvailable: {available}.")
        if sum(counts.values()) == 0 or (chosen is not None and counts[chosen] == 0):
            raise CommandError(
                "No indexed documents to benchmark.\n"
                "Index a collection with 'qmd collection add' / 'qmd update' first."
            )
        searcher = app.searcher.with_profile(COMMAND_LINE)
        names = [chosen] if chosen else searcher.default_collections()
        results: list[dict[str, Any]] = []
        for query in queries:
            limit = max(query.expected_in_top_k, 10)
            per_backend: dict[str, Any] = {}
            for name, backend in BACKENDS:
                started = time.perf_counter()
                try:
                    found = backend(searcher, query.query, limit, names)
                except QmdError:
                    found = []  # this backend cannot run here: it scores 0, as the original
                score = score_results(found, query.expected_files, query.expected_in_top_k)
                score.latency_ms = (time.perf_counter() - started) * 1000
                per_backend[name] = asdict(score)
            results.append(
                {"id": query.id, "query": query.query, "type": query.type, "backends": per_backend}
            )
    summary = _summary(results)
    if args.json:
        report = {
            "timestamp": datetime.now(UTC).isoformat(),
            "fixture": args.fixture,
            "results": results,
            "summary": summary,
        }
        out(json.dumps(report, indent=2) + "\n")
        return 0
    out(_table(results))
    out("\nSummary:\n")
    for name, row in summary.items():
        out(
            f"  {name:<8} P@k {row['avg_precision']:.2f}  R@5 {row['avg_recall_at_5']:.2f}  "
            f"MRR {row['avg_mrr']:.2f}  F1 {row['avg_f1']:.2f}  {row['avg_latency_ms']:.0f}ms\n"
        )
    if summary and all(
        s["avg_precision"] == s["avg_recall"] == s["avg_mrr"] == 0 for s in summary.values()
    ):
        err("Every backend scored 0: check the expected paths with 'qmd ls'.")
    return 0


def _table(results: list[dict[str, Any]]) -> str:
    def num(value: float) -> str:
        return f"{value:.2f}".rjust(5)

    header = ["Query".ljust(25), "Backend".ljust(8)]
    header += [h.ljust(6) for h in ("P@k", "R@1", "R@3", "R@5", "MRR", "F1")] + ["ms".ljust(8)]
    lines = [" ".join(header), "-" * 88]
    for result in results:
        for name, row in result["backends"].items():
            cells = [result["id"][:25].ljust(25), name.ljust(8)]
            cells += [num(row[k]) for k in ("precision_at_k", "recall_at_1", "recall_at_3")]
            cells += [num(row[k]) for k in ("recall_at_5", "mrr", "f1")]
            cells.append(f"{round(row['latency_ms']):>7}ms")
            lines.append(" ".join(cells))
        lines.append("")
    return "\n".join(lines) + "\n"


def register(table: CommandTable) -> None:
    command = table.command("bench", bench, "measure search quality against a fixture file")
    command.add_argument("fixture", help="JSON fixture: queries and their expected files")
    command.add_argument("--json", action="store_true", help="the full report as JSON")
    command.add_argument(
        "-c", "--collection", action="append", metavar="NAME", help="search only this collection"
    )

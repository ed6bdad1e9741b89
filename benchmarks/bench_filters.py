"""What does a metadata filter cost a search?

    .venv/bin/python -m benchmarks.bench_filters                  # 5,000 documents
    .venv/bin/python -m benchmarks.bench_filters --docs 500       # smoke size
    .venv/bin/python -m benchmarks.bench_filters --rare-every 100 --backend postgres --pg-url URL

A real SQLite index (in a temporary folder) gets `--docs` documents, each with front matter
metadata (a date, two tags, an author; one in `--rare-every` (7) tagged `rare`); with
`--backend postgres` a fresh schema on `--pg-url` instead. It prints, as medians over
`--repeats` runs:

* `scope`: resolving a filter (`tags all [rare]` and `since 2024-06-01`) into the set of
  admitted document ids: reading the metadata of the documents the index of metadata values
  names (REQ-FILTER-009) and evaluating it;
* `search` / `filtered search`: `Searcher.lex_search` for a common word, limit 10, without and
  with that filter (the filtered figure includes `scope`).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from adapters.postgres.store import PostgresIndex
from adapters.sqlite.store import SqliteIndex
from domain.filters import all_of, since, tagged
from domain.usecases.metadata import MetadataService
from domain.usecases.search import Searcher, SearchRequest

T0 = "2025-01-01T00:00:00.000Z"


def build(index: SqliteIndex | PostgresIndex, docs: int, rare_every: int) -> None:
    for start in range(0, docs, 1000):
        with index.transaction():
            add(index, range(start, min(docs, start + 1000)), rare_every)


def add(index: SqliteIndex | PostgresIndex, numbers: range, rare_every: int) -> None:
    for i in numbers:
        body = f"# Note {i}\n\nrelease notes number {i} about the deploy pipeline\n"
        digest = hashlib.sha256(body.encode()).hexdigest()
        path = f"notes/n{i:05d}.md"
        index.upsert_document("c", path, f"Note {i}", digest, body, T0, T0)
        index.put_metadata(
            "c",
            path,
            {
                "format": "md",
                "size": len(body),
                "modified": T0,
                "date": f"2024-{1 + i % 12:02d}-01",
                "tags": ("rare",) if i % rare_every == 0 else ("ops", "notes"),
                "author": f"author{i % 13}",
            },
        )


def median_ms(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def open_index(args: argparse.Namespace, folder: str) -> SqliteIndex | PostgresIndex:
    if args.backend == "sqlite":
        return SqliteIndex.open(Path(folder) / "index.sqlite")
    import psycopg

    with psycopg.connect(args.pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema_name(args)} CASCADE")
    return PostgresIndex.open(f"{args.pg_url}?schema={schema_name(args)}")


def schema_name(args: argparse.Namespace) -> str:
    return f"bench_filters_{args.docs}_{args.rare_every}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--rare-every", type=int, default=7, help="one document in N is rare")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-url", help="postgres: the server (a schema is made and dropped)")
    args = parser.parse_args(argv)
    if args.backend == "postgres" and not args.pg_url:
        parser.error("--backend postgres needs --pg-url")
    with tempfile.TemporaryDirectory() as folder:
        index = open_index(args, folder)
        try:
            build(index, args.docs, args.rare_every)
            if isinstance(index, PostgresIndex):
                with index.connection() as conn:
                    conn.execute("ANALYZE")
            service = MetadataService(index)
            searcher = Searcher(index, index, index)
            node = all_of([tagged(["rare"]), since("2024-06-01")])
            admitted = service.scope(node, ["c"]) or frozenset()

            def filtered() -> object:
                within = service.scope(node, ["c"])
                return searcher.lex_search("release", SearchRequest(limit=10, within=within))

            scope = median_ms(lambda: service.scope(node, ["c"]), args.repeats)
            plain = median_ms(
                lambda: searcher.lex_search("release", SearchRequest(limit=10)), args.repeats
            )
            both = median_ms(filtered, args.repeats)
        finally:
            index.close()
            if args.backend == "postgres":
                import psycopg

                with psycopg.connect(args.pg_url, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema_name(args)} CASCADE")
    print(f"{args.backend}: documents {args.docs}  (filter admits {len(admitted)})")
    print(f"scope            {scope:8.1f} ms")
    print(f"search           {plain:8.1f} ms")
    print(f"filtered search  {both:8.1f} ms  ({both / max(plain, 1e-9):.2f}x search)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

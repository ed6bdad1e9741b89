"""What does a metadata filter cost a search?

    .venv/bin/python -m benchmarks.bench_filters                  # 5,000 documents
    .venv/bin/python -m benchmarks.bench_filters --docs 500       # smoke size

A real SQLite index (in a temporary folder) gets `--docs` documents, each with front matter
metadata (a date, two tags, an author; one in seven tagged `rare`). It prints, as medians over
`--repeats` runs:

* `scope`: resolving a filter (`tags all [rare]` and `since 2024-06-01`) into the set of
  admitted document ids: reading and decoding every document's metadata and evaluating it;
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

from adapters.sqlite.store import SqliteIndex
from domain.filters import all_of, since, tagged
from domain.usecases.metadata import MetadataService
from domain.usecases.search import Searcher, SearchRequest

T0 = "2025-01-01T00:00:00.000Z"


def build(index: SqliteIndex, docs: int) -> None:
    with index.transaction():
        for i in range(docs):
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
                    "tags": ("rare",) if i % 7 == 0 else ("ops", "notes"),
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        index = SqliteIndex.open(Path(folder) / "index.sqlite")
        try:
            build(index, args.docs)
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
    print(f"documents        {args.docs}  (filter admits {len(admitted)})")
    print(f"scope            {scope:8.1f} ms")
    print(f"search           {plain:8.1f} ms")
    print(f"filtered search  {both:8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

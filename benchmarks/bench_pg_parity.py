"""BM25 on PostgreSQL against BM25 on SQLite (FTS5), on BEIR SciFact (issue 36).

Both backends get the same 5,183 abstracts (as `bench_scifact.py` writes them: `# {title}`, a
blank line, the abstract), written straight through each index's DocumentStore in this process
(no CLI, no models), and answer the 300 judged test queries with the spec surface's lexical
rule (every-term hits, then the any-term hits that fill the limit: `search_lex_filled`).

It prints, per backend, nDCG@10 (BEIR's definition, bench_scifact.evaluate) and, between them,
the share of queries whose top-5 SETS agree and whose top-5 ORDERS agree, the mean overlap of
the top 10, and the queries that differ most. Targets (issue 36): top-5 sets agree on at least
90 % of queries, nDCG@10 within 0.005.

    .venv/bin/python -m benchmarks.bench_pg_parity [--pg-url URL] [--queries N] [--show 5]
    .venv/bin/python -m benchmarks.bench_pg_parity --docs 300 --queries 10   # smoke size
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from adapters.postgres.store import PostgresIndex
from adapters.sqlite.store import SqliteIndex
from benchmarks.bench_scifact import (
    Run,
    doc_id_of,
    evaluate,
    find_data,
    load_corpus,
    load_qrels,
    load_queries,
    pg_url,
)
from benchmarks.harness import BenchError, load_average, machine
from domain.lexquery import parse_lex_query
from domain.ports import DocumentStore, DocumentWrite, LexicalIndex
from domain.text import content_hash, extract_title

COLLECTION = "scifact"
T0 = "2025-01-01T00:00:00.000Z"
TOP = 5
LIMIT = 10
TARGET_AGREE = 0.90
TARGET_NDCG = 0.005


def _load(store: DocumentStore, docs: list[dict[str, str]]) -> float:
    """Written 1,000 documents a batch, as `qmd update` writes them (REQ-INDEX-BATCH-001)."""
    started = time.perf_counter()
    writes: list[DocumentWrite] = []
    for doc in docs:
        title = " ".join(doc["title"].split())
        body = f"# {title}\n\n{doc['text']}\n"
        path = f"{doc['_id']}.md"
        writes.append(
            DocumentWrite(path, extract_title(body, path), content_hash(body), body, T0, T0)
        )
    for start in range(0, len(writes), 1000):
        with store.transaction():
            store.upsert_documents(COLLECTION, writes[start : start + 1000])
    return time.perf_counter() - started


def _ranked(index: LexicalIndex, queries: dict[str, str]) -> Run:
    run: Run = {}
    for qid, text in queries.items():
        every, fill = index.search_lex_filled(parse_lex_query(text), LIMIT, None)
        run[qid] = [doc_id_of(hit.document.meta.path) for hit in [*every, *fill]][:LIMIT]
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--queries", type=int, default=0, help="only the first N (0: all)")
    parser.add_argument("--docs", type=int, default=0, help="only the first N (0: all; smoke)")
    parser.add_argument("--show", type=int, default=5, help="queries that differ, listed")
    args = parser.parse_args(argv)
    data = find_data(args.data)
    docs = load_corpus(data)
    if args.docs:
        docs = docs[: args.docs]
    qrels = load_qrels(data)
    queries = {q: t for q, t in load_queries(data).items() if q in qrels}
    if args.queries:
        queries = dict(list(queries.items())[: args.queries])
    qrels = {q: r for q, r in qrels.items() if q in queries}
    print(f"BM25 parity on SciFact: {len(docs):,} documents, {len(queries)} queries; {machine()}")
    server = pg_url(args.pg_url)
    schema = "bench_parity_" + uuid.uuid4().hex[:12]
    with tempfile.TemporaryDirectory(prefix="qmd-parity-") as work:
        sqlite = SqliteIndex.open(Path(work) / "index.sqlite")
        pg = PostgresIndex.open(f"{server}?schema={schema}", env={})
        try:
            with sqlite.transaction():
                sqlite_s = _load(sqlite, docs)
            with pg.transaction():
                pg_s = _load(pg, docs)
            print(f"  indexed: sqlite {sqlite_s:.1f} s, postgres {pg_s:.1f} s")
            runs = {"sqlite": _ranked(sqlite, queries), "postgres": _ranked(pg, queries)}
        finally:
            sqlite.close()
            pg.close()
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    ndcg = {name: evaluate(run, qrels)["ndcg@10"] for name, run in runs.items()}
    a, b = runs["sqlite"], runs["postgres"]
    same_set = [q for q in queries if set(a[q][:TOP]) == set(b[q][:TOP])]
    same_order = [q for q in queries if a[q][:TOP] == b[q][:TOP]]
    overlap = statistics.fmean(
        len(set(a[q]) & set(b[q])) / max(1, len(set(a[q]) | set(b[q]))) for q in queries
    )
    agree = len(same_set) / len(queries)
    gap = abs(ndcg["sqlite"] - ndcg["postgres"])
    for name in runs:
        print(f"  {name:<9} nDCG@10 {ndcg[name]:.4f}")
    print(
        f"  top-{TOP} sets agree {len(same_set)}/{len(queries)} ({agree:.0%}, target >= "
        f"{TARGET_AGREE:.0%}: {'PASS' if agree >= TARGET_AGREE else 'FAIL'}); orders agree "
        f"{len(same_order)}/{len(queries)}; top-{LIMIT} Jaccard mean {overlap:.3f}"
    )
    print(
        f"  nDCG@10 gap {gap:.4f} (target <= {TARGET_NDCG}: "
        f"{'PASS' if gap <= TARGET_NDCG else 'FAIL'}); load average now {load_average():.1f}"
    )
    differing = [q for q in queries if q not in same_set][: args.show]
    for q in differing:
        print(f"  differs: {queries[q][:70]!r}")
        print(f"    sqlite   {a[q][:TOP]}\n    postgres {b[q][:TOP]}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchError as error:
        print(f"error: {error}")
        raise SystemExit(2) from error

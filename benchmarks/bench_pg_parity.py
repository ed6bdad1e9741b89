"""BM25 on PostgreSQL against BM25 on SQLite (FTS5), on two judged sets (issue 36).

- `scifact`: BEIR SciFact, 5,183 abstracts (as `bench_scifact.py` writes them: `# {title}`, a
  blank line, the abstract) and its 300 judged test queries (graded qrels).
- `tldr`: the 716 tldr pages and 54 plain-words questions of `benchmarks/data/tldr-common`
  (the `bench_judged.py` set; binary relevance, the page(s) that answer each question).

Both backends get the same documents, written straight through each index's DocumentStore in
this process (no CLI, no models), and answer with the spec surface's lexical rule (every-term
hits, then the any-term hits that fill the limit: `search_lex_filled`).

It prints, per set and backend, nDCG@10 (BEIR's definition, bench_scifact.evaluate) and, between
the backends, the share of queries whose top-5 SETS agree and whose top-5 ORDERS agree, the
mean overlap of the top 10, and the queries that differ. Targets (issue 36): top-5 sets agree
on at least 90 % of queries, nDCG@10 within 0.005, on each set; it exits 1 when one is missed.

    .venv/bin/python -m benchmarks.bench_pg_parity [--set both|scifact|tldr] [--pg-url URL]
    .venv/bin/python -m benchmarks.bench_pg_parity --docs 300 --queries 10   # smoke size
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg

from adapters.postgres.store import PostgresIndex
from adapters.sqlite.store import SqliteIndex
from benchmarks.bench_scifact import (
    Qrels,
    Run,
    doc_id_of,
    evaluate,
    find_data,
    load_corpus,
    load_qrels,
    load_queries,
    pg_url,
)
from benchmarks.harness import load_average, machine, run_main
from domain.lexquery import parse_lex_query
from domain.ports import DocumentStore, DocumentWrite, LexicalIndex
from domain.text import content_hash, extract_title

REPO = Path(__file__).resolve().parent.parent
TLDR = REPO / "benchmarks" / "data" / "tldr-common"
T0 = "2025-01-01T00:00:00.000Z"
TOP = 5
LIMIT = 10
TARGET_AGREE = 0.90
TARGET_NDCG = 0.005


@dataclass(frozen=True)
class JudgedSet:
    """One collection's documents (path, body) and its judged queries."""

    name: str
    docs: list[tuple[str, str]]
    queries: dict[str, str]
    qrels: Qrels


def scifact_set(data_dir: Path | None, docs_limit: int, queries_limit: int) -> JudgedSet:
    data = find_data(data_dir)
    corpus = load_corpus(data)[: docs_limit or None]
    docs = []
    for doc in corpus:
        title = " ".join(doc["title"].split())
        docs.append((f"{doc['_id']}.md", f"# {title}\n\n{doc['text']}\n"))
    qrels = load_qrels(data)
    queries = {q: t for q, t in load_queries(data).items() if q in qrels}
    queries = dict(list(queries.items())[: queries_limit or None])
    return JudgedSet("scifact", docs, queries, {q: r for q, r in qrels.items() if q in queries})


def tldr_set(docs_limit: int, queries_limit: int) -> JudgedSet:
    fixture = json.loads((TLDR / "judged.json").read_text(encoding="utf-8"))
    judged = fixture["queries"][: queries_limit or None]
    pages = sorted((TLDR / "pages").glob("*.md"))
    if docs_limit:
        # A smoke run still holds every page a kept question is judged against.
        wanted = {name for q in judged for name in q["expected_files"]}
        pages = [p for i, p in enumerate(pages) if i < docs_limit or p.name in wanted]
    docs = [(p.name, p.read_text(encoding="utf-8")) for p in pages]
    queries = {q["id"]: q["query"] for q in judged}
    qrels = {q["id"]: {doc_id_of(name): 1 for name in q["expected_files"]} for q in judged}
    return JudgedSet("tldr", docs, queries, qrels)


def _load(store: DocumentStore, collection: str, docs: list[tuple[str, str]]) -> float:
    """Written 1,000 documents a batch, as `qmd update` writes them (REQ-INDEX-BATCH-001)."""
    started = time.perf_counter()
    writes = [
        DocumentWrite(path, extract_title(body, path), content_hash(body), body, T0, T0)
        for path, body in docs
    ]
    for start in range(0, len(writes), 1000):
        store.upsert_documents(collection, writes[start : start + 1000])
    return time.perf_counter() - started


def _ranked(index: LexicalIndex, queries: dict[str, str]) -> Run:
    run: Run = {}
    for qid, text in queries.items():
        every, fill = index.search_lex_filled(parse_lex_query(text), LIMIT, None)
        run[qid] = [doc_id_of(hit.document.meta.path) for hit in [*every, *fill]][:LIMIT]
    return run


def compare(judged: JudgedSet, server: str, show: int) -> bool:
    """Index the set on both backends, print the figures; True when both targets are met."""
    queries = judged.queries
    print(f"{judged.name}: {len(judged.docs):,} documents, {len(queries)} queries")
    schema = "bench_parity_" + uuid.uuid4().hex[:12]
    with tempfile.TemporaryDirectory(prefix="qmd-parity-") as work:
        sqlite = SqliteIndex.open(Path(work) / "index.sqlite")
        pg = PostgresIndex.open(f"{server}?schema={schema}", env={})
        try:
            with sqlite.transaction():
                sqlite_s = _load(sqlite, judged.name, judged.docs)
            with pg.transaction():
                pg_s = _load(pg, judged.name, judged.docs)
            print(f"  indexed: sqlite {sqlite_s:.1f} s, postgres {pg_s:.1f} s")
            runs = {"sqlite": _ranked(sqlite, queries), "postgres": _ranked(pg, queries)}
        finally:
            sqlite.close()
            pg.close()
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    ndcg = {name: evaluate(run, judged.qrels)["ndcg@10"] for name, run in runs.items()}
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
    for q in [q for q in queries if q not in same_set][:show]:
        print(f"  differs: {queries[q][:70]!r}")
        print(f"    sqlite   {a[q][:TOP]}\n    postgres {b[q][:TOP]}")
    return agree >= TARGET_AGREE and gap <= TARGET_NDCG


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--set", choices=("both", "scifact", "tldr"), default="both")
    parser.add_argument("--data", type=Path, default=None, help="SciFact's folder")
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--queries", type=int, default=0, help="only the first N (0: all)")
    parser.add_argument("--docs", type=int, default=0, help="only the first N (0: all; smoke)")
    parser.add_argument("--show", type=int, default=5, help="queries that differ, listed")
    args = parser.parse_args(argv)
    print(f"BM25 parity, SQLite against PostgreSQL; {machine()}")
    server = pg_url(args.pg_url)
    passed = True
    if args.set in ("both", "tldr"):
        passed &= compare(tldr_set(args.docs, args.queries), server, args.show)
    if args.set in ("both", "scifact"):
        judged = scifact_set(args.data, args.docs, args.queries)
        passed &= compare(judged, server, args.show)
    print(f"  all targets {'met' if passed else 'NOT met'}")
    return 0 if passed else 1


if __name__ == "__main__":
    run_main(main)

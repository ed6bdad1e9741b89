"""The index file is shared with the original QMD 2.8.3, in both directions.

* original → ours: the original indexes a corpus; SqliteIndex opens it without changing it and
  reports the same documents, titles, hashes, BM25 results and collection counts as the
  original's own CLI (`qmd ls`, `qmd search --format json`, `qmd status`).
* ours → original: SqliteIndex + an `index.yml` we wrote; the original lists the collections,
  serves `qmd get` / `qmd search --format json` from it with the same results, and its own
  `qmd update` finds every document unchanged.

Needs the original (scripts/install_original.sh); a missing install fails, it never skips.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from adapters.config.yaml_config import (
    QmdConfig,
    config_hash,
    load_config,
    save_config,
    sync_config_to_store,
)
from adapters.fs.content_source import FileSystemSource
from adapters.sqlite.driver import connect, dbapi
from adapters.sqlite.stamps import SqliteFileStamps
from adapters.sqlite.store import SqliteIndex
from domain.lexquery import parse_lex_query
from domain.model import Collection
from domain.stamps import RecordedStamp
from domain.text import content_hash, extract_title
from tests.original import MISSING_MODELS, OriginalQmd, original_qmd

pytestmark = pytest.mark.original

NOTES = {
    "api/authentication.md": "# Authentication\n\nTokens are signed with HMAC. Rotate the "
    "signing key every quarter.\nThe rate limiter rejects bursts.\n",
    "api/rate-limits.md": "# Rate Limits\n\nThe rate limiter allows 100 requests per minute.\n"
    "Bursts above the limit get HTTP 429.\n",
    "ops/redis.md": "# Redis Cache\n\nSessions live in redis. Eviction policy: allkeys-lru.\n"
    "See the incident timeline for the 2024 outage.\n",
    "ops/deploy.md": "## Deploy Runbook\n\nDeploys run through the pipeline. Version 2.8.3 "
    "added canary steps.\n",
    "journal/2024-03-01.md": "# Notes\n\nrandom thoughts\n\n## Kickoff Day\n\nThe project "
    "timeline starts today. Multi-agent planning.\n",
    "journal/2024-03-02.md": "No heading here, just a timeline remark and some redis talk.\n",
    "recipes/ramen.md": "# 東京ラーメン\n\n東京の醤油ラーメンの作り方。timeline なし。\n",
    "recipes/curry.md": "# Curry\n\nA mild curry with rice. Serve hot.\n",
    "meetings/weekly.md": "# Weekly Meeting\n\nAgenda: redis migration, deploy freeze, "
    "rate limits review.\n",
    "meetings/copy.md": "# Curry\n\nA mild curry with rice. Serve hot.\n",
    "Mixed Case/Read Me.md": "# Read Me\n\nC++ performance notes and templates.\n",
    "blank.md": "   \n\n",
    ".hidden/secret.md": "# Secret\n\nredis\n",
    "node_modules/pkg/readme.md": "# Pkg\n\nredis\n",
}
EXTRA = {
    "guide.md": "# Guide\n\nThe redis guide for the archive, with a timeline.\n",
    "old/legacy.md": "# Legacy Timeline\n\nArchived notes about deploy history.\n",
}
QUERIES = [
    "redis",
    "timeline",
    "rate limiter",
    "rate-limiter",
    '"rate limiter"',
    "redis -timeline",
    "2.8.3",
    "東京",
    "curry",
    "C++",
    "deploy",
    "multi-agent",
    "nothing-matches-this",
]


def write_corpus(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def snapshot(db_path: Path) -> dict[str, Any]:
    """Everything logical in the index file (schema, pragmas, rows of every table)."""
    conn = dbapi.connect(str(db_path))
    try:
        schema = sorted(
            conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
            key=repr,
        )
        out: dict[str, Any] = {
            "schema": schema,
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
        }
        for table in (
            "content",
            "documents",
            "llm_cache",
            "content_vectors",
            "store_collections",
            "store_config",
        ):
            out[table] = sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
        out["fts"] = conn.execute(
            "SELECT rowid, filepath, title, body FROM documents_fts ORDER BY rowid"
        ).fetchall()
        return out
    finally:
        conn.close()


def our_search(index: SqliteIndex, query: str, collection: str) -> list[dict[str, Any]]:
    hits = index.search_lex(parse_lex_query(query), 20, collection)
    return [
        {
            "file": h.document.meta.virtual_path,
            "docid": "#" + h.document.meta.docid,
            "title": h.document.meta.title,
            "score": abs(h.bm25) / (1 + abs(h.bm25)),
        }
        for h in hits
    ]


def original_search(qmd: OriginalQmd, query: str, collection: str) -> list[dict[str, Any]]:
    out = qmd.run("search", "--format", "json", "-n", "20", "-c", collection, "--", query)
    text = out.strip()
    if not text.startswith("["):
        # "No results found." variants are printed as text even in json mode
        return []
    return [
        {"file": r["file"], "docid": r["docid"], "title": r["title"], "score": r["score"]}
        for r in json.loads(text)
    ]


def original_searches(qmd: OriginalQmd) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every query in both collections; the processes run side by side (each is slow to start)."""
    keys = [(q, c) for q in QUERIES for c in ("notes", "extra")]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda key: original_search(qmd, *key), keys))
    return dict(zip(keys, results, strict=True))


def assert_same_results(
    ours: list[dict[str, Any]], theirs: list[dict[str, Any]], query: str
) -> None:
    assert [(r["file"], r["docid"], r["title"]) for r in ours] == [
        (r["file"], r["docid"], r["title"]) for r in theirs
    ], query
    for mine, original in zip(ours, theirs, strict=True):
        assert mine["score"] == pytest.approx(original["score"], abs=0.0051), (query, mine)


def status_counts(qmd: OriginalQmd) -> dict[str, int]:
    """Collection → file count, from `qmd status`."""
    text = qmd.run("status")
    counts: dict[str, int] = {}
    for match in re.finditer(
        r"^  (\S+) \(qmd://[^)]*\)\n(?:    .*\n)*?    Files:\s+(\d+)", text, re.M
    ):
        counts[match.group(1)] = int(match.group(2))
    return counts


def index_with_our_adapters(index: SqliteIndex, collection: Collection) -> dict[str, int]:
    """What the update use case does, with the adapters only (file stamps too, so the
    original sees the table of our own that they live in, REQ-INDEX-NOOP-001)."""
    source = FileSystemSource()
    kinds: dict[str, int] = {}
    scan = source.scan(collection)
    stamps: dict[str, RecordedStamp] = {}
    for found in scan.files:
        text = source.read_text(found.absolute_path)
        if not isinstance(text, str) or not text.strip():
            continue
        outcome = index.upsert_document(
            collection.name,
            found.relative_path,
            extract_title(text, found.relative_path),
            content_hash(text),
            text,
            found.created_at,
            found.modified_at,
        )
        kinds[outcome.kind] = kinds.get(outcome.kind, 0) + 1
        if found.stamp is not None and scan.started_ns is not None:
            title = extract_title(text, found.relative_path)
            stamps[found.relative_path] = RecordedStamp(
                found.stamp, scan.started_ns, content_hash(text), title
            )
    SqliteFileStamps(index.connection).record_file_stamps(collection.name, stamps)
    return kinds


def test_index_written_by_the_original_reads_the_same(tmp_path: Path) -> None:
    qmd = original_qmd(tmp_path / "home")
    notes, extra = tmp_path / "notes", tmp_path / "extra"
    write_corpus(notes, NOTES)
    write_corpus(extra, EXTRA)
    qmd.run("collection", "add", str(notes), "--name", "notes")
    qmd.run("collection", "add", str(extra), "--name", "extra")
    qmd.run("context", "add", "qmd://notes/api", "HTTP API documentation")

    listed = {
        line.split("qmd://", 1)[1].strip()
        for line in qmd.run("ls", "notes").splitlines()
        if "qmd://" in line
    }
    expected_paths = {
        "notes/" + rel
        for rel, text in NOTES.items()
        if text.strip() and not rel.startswith((".", "node_modules"))
    }
    assert listed == expected_paths
    theirs = original_searches(qmd)
    counts = status_counts(qmd)
    assert counts == {"notes": len(expected_paths), "extra": len(EXTRA)}

    before = snapshot(qmd.db_path)
    # a fresh index of ours has exactly the original's schema text, pragmas and markers
    fresh_path = tmp_path / "fresh" / "index.sqlite"
    SqliteIndex.open(fresh_path).close()
    fresh = snapshot(fresh_path)
    assert fresh["schema"] == before["schema"]
    assert fresh["user_version"] == before["user_version"] == 1
    assert ("fts_cjk_normalized_version", "1") in fresh["store_config"]
    assert ("fts_cjk_normalized_version", "1") in before["store_config"]

    index = SqliteIndex.open(qmd.db_path)
    try:
        assert snapshot(qmd.db_path) == before, "opening the original's index changed it"
        metas = index.documents("notes")
        assert {m.display_path for m in metas} == expected_paths
        for meta in metas:
            body = NOTES[meta.path]
            assert meta.hash == content_hash(body)
            assert meta.title == extract_title(body, meta.path)
            assert index.body(meta.hash) == body
        assert [c.name for c in index.list_collections()] == ["notes", "extra"]
        # the YAML the original wrote reads back, and hashes to the value it stored
        written = load_config(qmd.config_path)
        assert list(written.collections) == ["notes", "extra"]
        assert written.collections["notes"].path == str(notes)
        assert dict(written.collections["notes"].contexts) == {"api": "HTTP API documentation"}
        assert index.get_config_value("config_hash") == config_hash(written)
        assert sync_config_to_store(written, index) is False
        assert dict(index.get_collection("notes").contexts) == {  # type: ignore[union-attr]
            "api": "HTTP API documentation"
        }
        assert {c.name: c.documents for c in index.collection_counts()} == counts
        for (query, collection), results in theirs.items():
            assert_same_results(
                our_search(index, query, collection), results, f"{collection}: {query}"
            )
        assert any(theirs.values()), "the original found nothing at all"
        # re-scanning with our adapters finds nothing to change
        kinds = index_with_our_adapters(index, index.get_collection("notes"))  # type: ignore[arg-type]
        assert kinds == {"unchanged": len(expected_paths)}
    finally:
        index.close()


def test_index_written_by_us_is_served_by_the_original(tmp_path: Path) -> None:
    qmd = original_qmd(tmp_path / "home")
    notes, extra = tmp_path / "notes", tmp_path / "extra"
    write_corpus(notes, NOTES)
    write_corpus(extra, EXTRA)
    config = QmdConfig(
        collections={
            "notes": Collection(
                name="notes",
                path=str(notes),
                contexts={"": "Team notes", "api": "HTTP API documentation"},
            ),
            "extra": Collection(
                name="extra", path=str(extra), ignore=("old/**",), include_by_default=False
            ),
        },
        global_context="Everything we wrote down",
        models={
            "embed": MISSING_MODELS["QMD_EMBED_MODEL"],
            "generate": MISSING_MODELS["QMD_GENERATE_MODEL"],
            "rerank": MISSING_MODELS["QMD_RERANK_MODEL"],
        },
    )
    save_config(qmd.config_path, config)
    index = SqliteIndex.open(qmd.db_path)
    try:
        sync_config_to_store(load_config(qmd.config_path), index)
        for collection in config.collections.values():
            index_with_our_adapters(index, collection)
        ours = {(q, c): our_search(index, q, c) for q in QUERIES for c in ("notes", "extra")}
        docs = index.documents()
    finally:
        index.close()
    assert len(docs) == 11 + 1

    listing = qmd.run("collection", "list")
    assert "notes (qmd://notes/)" in listing and "extra (qmd://extra/)" in listing
    assert "[excluded]" in listing
    assert status_counts(qmd) == {"notes": 11, "extra": 1}

    got = qmd.run("get", "qmd://notes/api/rate-limits.md")
    assert "Folder Context: " in got or "Context" in got
    assert "2: \n3: The rate limiter allows 100 requests per minute." in got
    by_docid = qmd.run("get", "#" + content_hash(NOTES["ops/redis.md"])[:6])
    assert "qmd://notes/ops/redis.md" in by_docid
    assert "Sessions live in redis." in by_docid

    theirs = original_searches(qmd)
    for key, results in ours.items():
        assert_same_results(results, theirs[key], f"{key[1]}: {key[0]}")
    assert any(ours.values())

    # the original's own re-index agrees with every row we wrote
    update = qmd.run("update")
    assert "0 new, 0 updated, 11 unchanged, 0 removed" in update, update
    assert "0 new, 0 updated, 1 unchanged, 0 removed" in update, update


def test_vectors_we_store_are_maintained_by_the_original(tmp_path: Path) -> None:
    qmd = original_qmd(tmp_path / "home")
    notes = tmp_path / "notes"
    write_corpus(notes, NOTES)
    collection = Collection(name="notes", path=str(notes))
    save_config(
        qmd.config_path,
        QmdConfig(collections={"notes": collection}, models={"embed": "/nonexistent/e.gguf"}),
    )
    redis = content_hash(NOTES["ops/redis.md"])
    curry = content_hash(NOTES["recipes/curry.md"])
    deploy = content_hash(NOTES["ops/deploy.md"])
    index = SqliteIndex.open(qmd.db_path)
    try:
        sync_config_to_store(load_config(qmd.config_path), index)
        index_with_our_adapters(index, collection)
        when = "2025-01-01T00:00:00.000Z"
        index.store_chunk_vectors(
            redis, [(0, 0, [1.0, 0.0, 0.0, 0.0]), (1, 60, [0.0, 1.0, 0.0, 0.0])], "m", "f", when
        )
        index.store_chunk_vectors(curry, [(0, 0, [0.0, 0.0, 1.0, 0.0])], "m", "f", when)
        index.store_chunk_vectors(deploy, [(0, 0, [0.0, 0.0, 0.0, 1.0])], "m", "f", when)
        index.deactivate_documents("notes", ["ops/deploy.md"])
        index.put("cache-key", "cached")
    finally:
        index.close()

    status = qmd.run("status")
    assert "Vectors:  4 embedded" in status, status
    assert "Orphaned: 1 embedding chunks" in status, status
    cleanup = qmd.run("cleanup")
    assert "Cleared 1 cached API responses" in cleanup, cleanup
    assert "Removed 1 orphaned embedding chunks" in cleanup, cleanup
    assert "Removed 1 inactive document records" in cleanup, cleanup
    assert "Removed 1 orphaned content hashes" in cleanup, cleanup

    # the prefilter forced on: the original's cleanup left our bits behind (REQ-VEC-PREFILTER-003)
    index = SqliteIndex(connect(qmd.db_path), prefilter_min_vectors=0)
    try:
        assert index.has_vector_index() and index.vector_dimensions() == 4
        assert index.vector_count() == 3
        hits = index.search_vectors([0.1, 0.9, 0.0, 0.0], 10, "notes")
        assert [(h.document.meta.path, h.chunk_pos) for h in hits[:1]] == [("ops/redis.md", 60)]
        assert {h.document.meta.path for h in hits} == {
            "ops/redis.md",
            "recipes/curry.md",
            "meetings/copy.md",
        }
        assert index.pending_hashes("m", "f") != [] and redis not in index.pending_hashes("m", "f")
    finally:
        index.close()


def test_a_missing_original_fails_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QMD_ORIGINAL_BIN", str(tmp_path / "nowhere" / "qmd"))
    with pytest.raises(pytest.fail.Exception, match=r"scripts/install_original\.sh"):
        original_qmd(tmp_path / "home")

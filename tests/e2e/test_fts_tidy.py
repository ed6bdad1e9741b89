"""An indexing run that rewrote a large share of the index leaves FTS5 in one segment
(REQ-INDEX-FTS-TIDY-001); a small run leaves the merging to FTS5. Real `qmd` processes over
a corpus large enough that one run flushes FTS5's write buffer several times.

Whether the index is in one segment is read through FTS5's documented interface: a
`('merge', -1)` command that does no work changes `total_changes()` by less than 2.
"""

from __future__ import annotations

import random
from pathlib import Path

from adapters.sqlite.driver import connect
from tests.e2e.conftest import Qmd

DOCUMENTS = 1200
WORDS = [f"w{n:04d}" for n in range(4000)]  # FTS5's buffer holds about 1 MB of postings


def _write_corpus(folder: Path, count: int) -> None:
    rng = random.Random(7)
    folder.mkdir(parents=True)
    for n in range(count):
        body = " ".join(rng.choice(WORDS) for _ in range(300))
        (folder / f"note{n:04d}.md").write_text(f"# Note {n}\n\n{body}\n", encoding="utf-8")


def _segments_merged(db: Path) -> bool:
    """True when the FTS5 index is one segment (a full merge finds nothing to do). Rolled
    back: the check leaves the index as it was."""
    conn = connect(str(db))
    try:
        raw = conn.raw
        raw.execute("BEGIN")
        before = raw.total_changes
        raw.execute("INSERT INTO documents_fts(documents_fts, rank) VALUES('merge', -1)")
        did_work = raw.total_changes - before >= 2
        raw.execute("ROLLBACK")
        return not did_work
    finally:
        conn.close()


def _search(qmd: Qmd, query: str) -> str:
    return qmd.ok("search", query, "-n", "20", "--format", "json")


def test_a_bulk_run_leaves_one_segment_and_a_small_one_leaves_the_merge_to_fts5(
    tmp_path: Path,
) -> None:
    (tmp_path / "home").mkdir()
    corpus = tmp_path / "notes"
    _write_corpus(corpus, DOCUMENTS)
    qmd = Qmd(tmp_path, corpus)
    qmd.ok("collection", "add", str(corpus), "--name", "notes")
    assert _segments_merged(qmd.db), "the first run wrote every document: one segment"

    # one document changed of 1,200: below 1/20, no full merge (FTS5 adds a segment)
    (corpus / "note0000.md").write_text("# Note 0\n\nchanged w0003\n", encoding="utf-8")
    qmd.ok("update")
    assert not _segments_merged(qmd.db), "a one-document run must not rewrite the index"

    # merging changes no search answer (scores included)
    answers = {q: _search(qmd, q) for q in ("w0001 w0002", "w0003", "w0010 w3999 w2000")}
    conn = connect(str(qmd.db))
    try:
        conn.raw.execute("INSERT INTO documents_fts(documents_fts) VALUES('optimize')")
    finally:
        conn.close()
    assert _segments_merged(qmd.db)
    assert {q: _search(qmd, q) for q in answers} == answers
    assert "note0000.md" in answers["w0003"]  # the changed note is what is indexed

    # a run that rewrites more than 1/20 of the documents merges again
    for n in range(1, 1 + DOCUMENTS // 10):
        path = corpus / f"note{n:04d}.md"
        path.write_text(path.read_text(encoding="utf-8") + "\nw0004\n", encoding="utf-8")
    (corpus / "note0000.md").write_text("# Note 0\n\nagain w0005\n", encoding="utf-8")
    qmd.ok("update")
    assert _segments_merged(qmd.db)


def test_an_update_that_rewrites_many_small_collections_merges_once_at_its_end(
    tmp_path: Path,
) -> None:
    """The share is the whole run's: `qmd update` indexes collection by collection, each in
    a transaction of its own (and each commit leaves an FTS5 segment), so an update that
    rewrote every document of 21 collections, none of them 1/20 of the index, must still
    end in one segment."""
    (tmp_path / "home").mkdir()
    folders = [tmp_path / "notes" / f"c{k:02d}" for k in range(21)]
    rng = random.Random(11)
    for folder in folders:
        folder.mkdir(parents=True)
        for n in range(10):
            body = " ".join(rng.choice(WORDS) for _ in range(50))
            (folder / f"n{n}.md").write_text(f"# {folder.name} {n}\n\n{body}\n", encoding="utf-8")
    qmd = Qmd(tmp_path, folders[0])
    qmd.config_dir.mkdir(parents=True)
    entries = "".join(
        f"  {folder.name}:\n    path: {folder}\n    pattern: '**/*.md'\n" for folder in folders
    )
    (qmd.config_dir / "index.yml").write_text(f"collections:\n{entries}", encoding="utf-8")
    qmd.ok("update")
    conn = connect(str(qmd.db))
    try:  # start from one segment, whatever the first run left
        conn.raw.execute("INSERT INTO documents_fts(documents_fts) VALUES('optimize')")
    finally:
        conn.close()
    assert _segments_merged(qmd.db)

    for folder in folders:
        for note in folder.iterdir():
            note.write_text(note.read_text(encoding="utf-8") + "\nw0006\n", encoding="utf-8")
    qmd.ok("update")
    assert "w0006" in _search(qmd, "w0006")
    assert _segments_merged(qmd.db), "the run rewrote every document: one segment"

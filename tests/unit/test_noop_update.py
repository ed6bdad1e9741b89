"""A `qmd update` that changes nothing reads no file (REQ-INDEX-NOOP-001): it decides from each
file's stamp (size, times, inode) against the one recorded when the file was last read, and
still finds every change the stamp or the racy-window rule can reveal (domain/stamps.py)."""

from __future__ import annotations

from adapters.bootstrap import App
from domain.indexing import FileStamp
from domain.stamps import RACY_WINDOW_NS
from tests.fakes import (
    FakeContentSource,
    FakeExtractor,
    FixedClock,
    InMemoryConfigRepository,
    InMemoryExtractionLedger,
    InMemoryFileStamps,
    InMemoryStore,
)

ROOT = "/notes"
SECOND = 1_000_000_000
T0 = 1_700_000_000 * SECOND  # when the files were last written
A, B = f"{ROOT}/a.md", f"{ROOT}/b.md"


def _setup(stamps: InMemoryFileStamps | None = None) -> tuple[App, FakeContentSource]:
    source = FakeContentSource({A: "# A\nalpha\n", B: "# B\nbeta\n"})
    source.clock_ns = T0 + 60 * SECOND  # a minute after the last write
    source.stamps = {A: FileStamp(10, T0, T0, 1), B: FileStamp(9, T0, T0, 2)}
    store = InMemoryStore()
    app = App(
        store, store, store, store, InMemoryConfigRepository(), source, FixedClock(),
        stamps=stamps if stamps is not None else InMemoryFileStamps(),
    )  # fmt: skip
    app.collections.add(ROOT, "n")
    source.reads.clear()
    return app, source


def _rewrite(source: FakeContentSource, path: str, text: str, stamp: FileStamp) -> None:
    source.files[path] = text
    source.stamps[path] = stamp


def test_an_update_of_unchanged_files_reads_none_of_them() -> None:
    app, source = _setup()
    counts = app.collections.update(["n"])["n"]
    assert source.reads == []
    assert (counts.unchanged, counts.updated, counts.indexed, counts.removed) == (2, 0, 0, 0)
    assert sorted(m.path for m in app.store.documents("n")) == ["a.md", "b.md"]


def test_a_file_rewritten_with_the_same_size_is_read_by_its_new_times() -> None:
    app, source = _setup()
    later = T0 + 30 * SECOND
    _rewrite(source, A, "# A\nomega\n", FileStamp(10, later, later, 1))
    counts = app.collections.update(["n"])["n"]
    assert source.reads == [A]
    assert counts.updated == 1 and counts.unchanged == 1
    assert "omega" in app.retrieval.fetch(app.retrieval.find("n/a.md")).body


def test_a_write_that_restores_the_modification_time_is_caught_by_the_change_time() -> None:
    app, source = _setup()
    _rewrite(source, A, "# A\nomega\n", FileStamp(10, T0, T0 + 30 * SECOND, 1))
    app.collections.update(["n"])
    assert source.reads == [A]
    assert "omega" in app.retrieval.fetch(app.retrieval.find("n/a.md")).body


def test_a_file_changed_just_before_a_scan_is_read_again_even_if_its_stamp_stays() -> None:
    """Coarse file times: a second write right after the scan read the file can leave every
    field of the stamp as it was. Such a file is read on the next update too."""
    app, source = _setup()
    racy = source.clock_ns or 0
    source.clock_ns = racy + SECOND  # this scan starts one second after the write below
    _rewrite(source, A, "# A\nfirst\n", FileStamp(10, racy, racy, 1))
    app.collections.update(["n"])
    assert source.reads == [A]
    source.reads.clear()
    source.files[A] = "# A\nlater\n"  # same size, same stamp: invisible to the stat
    source.clock_ns += 60 * SECOND
    app.collections.update(["n"])
    assert source.reads == [A]  # racy: read again, and the second write is found
    assert "later" in app.retrieval.fetch(app.retrieval.find("n/a.md")).body
    source.reads.clear()
    app.collections.update(["n"])
    assert source.reads == []  # now the stamp is older than the window before the last scan


def test_the_window_is_two_seconds() -> None:
    assert RACY_WINDOW_NS == 2 * SECOND


def test_a_document_rewritten_by_another_program_is_read_again() -> None:
    """The original QMD shares the index: a row it changed no longer matches the stamp."""
    app, source = _setup()
    meta = app.store.document_by_path("n", "a.md")
    assert meta is not None
    app.store.upsert_document("n", "a.md", "Other", "f" * 64, "other", "x", "x")
    app.collections.update(["n"])
    assert source.reads == [A]
    assert app.store.document_by_path("n", "a.md") == meta


def test_a_source_without_stamps_reads_every_file_as_before() -> None:
    app, source = _setup()
    source.clock_ns = None
    app.collections.update(["n"])
    assert sorted(source.reads) == [A, B]


def test_deleted_files_are_still_removed_and_forget_their_stamps() -> None:
    stamps = InMemoryFileStamps()
    app, source = _setup(stamps)
    del source.files[B]
    counts = app.collections.update(["n"])["n"]
    assert counts.removed == 1 and source.reads == []
    assert sorted(stamps.file_stamps("n")) == ["a.md"]


def test_removing_or_renaming_a_collection_carries_its_stamps_along() -> None:
    stamps = InMemoryFileStamps()
    app, _ = _setup(stamps)
    app.collections.rename("n", "m")
    assert stamps.file_stamps("n") == {} and sorted(stamps.file_stamps("m")) == ["a.md", "b.md"]
    app.collections.remove("m")
    assert stamps.rows == {}


def test_an_extracted_file_is_extracted_again_when_the_extractor_version_changes() -> None:
    """Unchanged bytes, a new extractor: the text indexed before may be wrong (tracked changes
    dropped, a junk title), so the stamp alone does not vouch for it."""
    pdf = f"{ROOT}/report.pdf"
    files: dict[str, str | None] = {pdf: "turbine figures\fsecond page"}
    source = FakeContentSource()
    source.files = files
    source.clock_ns = T0 + 60 * SECOND
    source.stamps = {pdf: FileStamp(27, T0, T0, 3)}
    extractor = FakeExtractor(files)
    store = InMemoryStore()
    app = App(
        store, store, store, store, InMemoryConfigRepository(), source, FixedClock(),
        maintenance=store, extractor=extractor, ledger=InMemoryExtractionLedger(),
        stamps=InMemoryFileStamps(),
    )  # fmt: skip
    app.collections.add(ROOT, "n", "**/*.pdf")
    assert extractor.calls == [pdf]
    app.collections.update(["n"])
    assert extractor.calls == [pdf]  # same extractor, same stamp: not even hashed again
    extractor.version = "fake-extraction 2"
    counts = app.collections.update(["n"])["n"]
    assert extractor.calls == [pdf, pdf]
    assert counts.unchanged == 1  # same text, so the document itself is unchanged
    extractor.calls.clear()
    app.collections.update(["n"])
    assert extractor.calls == []  # recorded under the new version: trusted again

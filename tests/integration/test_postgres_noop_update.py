"""A `qmd update` that changes nothing reads no file on PostgreSQL either (REQ-INDEX-NOOP-001):
the backend hands its file stamps (migration 11) to the update, as SQLite's does. Before
issue 36 it had none, and every update read every file."""

from __future__ import annotations

import pytest

from adapters.bootstrap import App
from adapters.postgres.backend import open_backend
from domain.indexing import FileStamp
from tests.fakes import FakeContentSource, FixedClock, InMemoryConfigRepository
from tests.postgres_server import drop_schema, fresh_schema_url

pytestmark = pytest.mark.postgres

ROOT = "/notes"
SECOND = 1_000_000_000
T0 = 1_700_000_000 * SECOND
A, B = f"{ROOT}/a.md", f"{ROOT}/b.md"


def test_a_noop_update_on_postgres_reads_no_file_and_a_changed_one_is_read() -> None:
    url, schema = fresh_schema_url()
    backend = open_backend(url)
    try:
        source = FakeContentSource({A: "# A\nalpha\n", B: "# B\nbeta\n"})
        source.clock_ns = T0 + 60 * SECOND  # a minute after the last write
        source.stamps = {A: FileStamp(10, T0, T0, 1), B: FileStamp(9, T0, T0, 2)}
        index = backend.index
        app = App(
            index, index, index, index, InMemoryConfigRepository(), source, FixedClock(),
            stamps=backend.stamps,
        )  # fmt: skip
        app.collections.add(ROOT, "n")
        assert sorted(source.reads) == [A, B]
        source.reads.clear()

        counts = app.collections.update(["n"])["n"]
        assert source.reads == []
        assert (counts.unchanged, counts.updated, counts.indexed, counts.removed) == (2, 0, 0, 0)

        later = T0 + 30 * SECOND
        source.files[A] = "# A\nomega\n"
        source.stamps[A] = FileStamp(10, later, later, 1)
        counts = app.collections.update(["n"])["n"]
        assert source.reads == [A]
        assert counts.updated == 1 and counts.unchanged == 1
        assert "omega" in app.retrieval.fetch(app.retrieval.find("n/a.md")).body
    finally:
        backend.close()
        drop_schema(schema)

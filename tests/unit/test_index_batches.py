"""An indexing run hands its documents to the index in batches (REQ-INDEX-BATCH-001): each
`upsert_documents` call holds up to WRITE_BATCH_DOCUMENTS documents, every document is
written once, and each one's metadata (recorded after its batch) is there at the end."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.bootstrap import App
from domain.ports import DocumentWrite, UpsertOutcome
from domain.usecases.collections import WRITE_BATCH_DOCUMENTS
from tests.fakes import FakeContentSource, FixedClock, InMemoryConfigRepository, InMemoryStore

ROOT = "/notes"


class BatchCountingStore(InMemoryStore):
    """The in-memory store, noting the size of each batch it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def upsert_documents(
        self, collection: str, documents: Sequence[DocumentWrite]
    ) -> list[UpsertOutcome]:
        self.batches.append(len(documents))
        return super().upsert_documents(collection, documents)


def test_a_collection_is_written_in_batches_with_its_metadata() -> None:
    files = WRITE_BATCH_DOCUMENTS * 2 + 7
    source = FakeContentSource(
        {
            f"{ROOT}/d{n:05d}.md": f"---\ntags: [t{n % 3}]\n---\n# Doc {n}\nword{n}\n"
            for n in range(files)
        }
    )
    store = BatchCountingStore()
    app = App(
        store,
        store,
        store,
        store,
        InMemoryConfigRepository(),
        source,
        FixedClock(),
        metadata_index=store,
    )
    _, counts = app.collections.add(ROOT, "n")
    assert store.batches == [WRITE_BATCH_DOCUMENTS, WRITE_BATCH_DOCUMENTS, 7]
    assert counts.indexed == files
    metadata = dict(store.active_metadata(["n"]))
    assert len(metadata) == files and all(m.get("tags") for m in metadata.values())
    # a second run: every document unchanged, in the same batches
    store.batches.clear()
    again = app.collections.update(["n"])["n"]
    assert again.unchanged == files and store.batches == [WRITE_BATCH_DOCUMENTS] * 2 + [7]

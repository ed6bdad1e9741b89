"""The update use case (with fakes): what it cannot see this time is kept, what it refuses is
removed, and both are reported."""

from __future__ import annotations

from adapters.bootstrap import App
from tests.fakes import FakeContentSource, FixedClock, InMemoryConfigRepository, InMemoryStore

ROOT = "/notes"


def _app(source: FakeContentSource) -> App:
    store = InMemoryStore()
    return App(store, store, store, store, InMemoryConfigRepository(), source, FixedClock())


def test_a_denied_file_keeps_its_indexed_version_and_is_reported() -> None:
    source = FakeContentSource({f"{ROOT}/a.md": "# A\nalpha\n", f"{ROOT}/b.md": "# B\nbeta\n"})
    app = _app(source)
    app.collections.add(ROOT, "n")
    source.files[f"{ROOT}/b.md"] = None  # permission denied now
    counts = app.collections.update(["n"])["n"]
    assert counts.removed == 0
    assert [(p.path, p.reason) for p in counts.problems] == [
        ("b.md", "cannot be read: Permission denied (the indexed version is kept)")
    ]
    assert sorted(m.path for m in app.store.documents("n")) == ["a.md", "b.md"]


def test_a_missing_collection_folder_removes_nothing() -> None:
    source = FakeContentSource({f"{ROOT}/a.md": "# A\nalpha\n", f"{ROOT}/b.md": "# B\nbeta\n"})
    app = _app(source)
    app.collections.add(ROOT, "n")
    source.files.clear()  # the drive is unmounted
    counts = app.collections.update(["n"])["n"]
    assert counts.removed == 0
    assert [p.path for p in counts.problems] == ["(collection folder)"]
    assert "not found" in counts.problems[0].reason
    assert sorted(m.path for m in app.store.documents("n")) == ["a.md", "b.md"]

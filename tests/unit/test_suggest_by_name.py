""" "Did you mean" as a person means it (issue 36, REQ-SPEC-GET-NAME-001): a miss is compared
with a path's last segments too, so a file name typed without its folders, or with a version
segment left out, finds the file; the compat surface keeps the original's whole-path rule."""

from __future__ import annotations

import pytest

from domain.errors import DocumentNotFoundError
from domain.suggest import NameIndex, near_names, tail
from domain.usecases.retrieval import Retrieval
from tests.fakes import InMemoryStore

# the Node.js blog's release notes, as the trial's collection held them
RELEASES = [
    "release/v16.0.0.md",
    "release/v18.0.0.md",
    "release/v18.1.0.md",
    "release/v18.10.0.md",
    "release/v20.0.0.md",
    "announcements/v18-release-candidate.md",
    "v8.md",
]


def _retrieval(paths: list[str]) -> Retrieval:
    store = InMemoryStore()
    for number, path in enumerate(paths):
        store.upsert_document("blog", path, path, f"{number:064x}", "body", "t", "t")
    return Retrieval(store)


def _suggestions(retrieval: Retrieval, target: str, *, by_name: bool) -> list[str]:
    with pytest.raises(DocumentNotFoundError) as missed:
        retrieval.find(target, own_suggestions=by_name)
    return missed.value.suggestions


def test_a_file_name_without_its_folder_and_a_segment_finds_the_release() -> None:
    retrieval = _retrieval(RELEASES)
    for _ in range(2):  # the one-off scan and the warm index
        found = _suggestions(retrieval, "v18.0.md", by_name=True)
        assert found[0] == "release/v18.0.0.md"
        assert "release/v18.1.0.md" in found
    # the original's rule (compat): whole paths only, where the release is 10 edits away
    assert "release/v18.0.0.md" not in _suggestions(retrieval, "v18.0.md", by_name=False)


def test_a_continued_name_wins_a_tie_over_an_earlier_path() -> None:
    """`v18.0` -> `v18.0.0` and `v18.0` -> `v18.1.0` are both two edits; the one whose name
    continues what was typed comes first, though the other sorts first by path."""
    retrieval = _retrieval(["archive/v18.1.0.md", "release/v18.0.0.md"])
    assert _suggestions(retrieval, "v18.0.md", by_name=True) == [
        "release/v18.0.0.md",
        "archive/v18.1.0.md",
    ]


def test_folders_typed_are_compared_as_typed() -> None:
    retrieval = _retrieval(["blog/release/v18.0.0.md", "blog/other/v18.0.0.md"])
    assert _suggestions(retrieval, "release/v18.0.md", by_name=True)[0] == (
        "blog/release/v18.0.0.md"
    )


def test_the_original_answer_is_kept_when_the_names_add_nothing() -> None:
    """Where every path has no more segments than the miss, the answer is the original's."""
    paths = ["engineering/api/authentication.md", "engineering/api/pagination.md"]
    retrieval = _retrieval(paths)
    assert _suggestions(retrieval, "engineering/api/authentcation.md", by_name=True) == [
        "engineering/api/authentication.md"
    ]
    whole = NameIndex(paths)
    assert near_names("engineering/api/authentcation.md", whole, None, 5, 5) == whole.similar(
        "engineering/api/authentcation.md", 5, 5
    )


def test_tail() -> None:
    assert tail("a/b/c.md", 1) == "c.md"
    assert tail("a/b/c.md", 2) == "b/c.md"
    assert tail("c.md", 3) == "c.md"

"""A document's metadata in its JSON form (domain/model.py) and as the stores keep it
(adapters/storage/sql_rows.py): what is written reads back the same, in one key order, and
stored text that is not a metadata object reads as none (REQ-FILTER-006)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from adapters.storage.sql_rows import metadata_from_text, metadata_text
from domain.filters import MetaValue
from domain.model import metadata_as_json, metadata_from_json

_SCALARS = st.one_of(
    st.text(max_size=8),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
_METADATA = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.one_of(_SCALARS, st.lists(_SCALARS, max_size=4).map(tuple)),
    max_size=6,
)


@given(_METADATA)
def test_what_a_store_writes_reads_back_the_same(metadata: dict[str, MetaValue]) -> None:
    assert metadata_from_text(metadata_text(metadata)) == metadata


def test_the_json_form_sorts_keys_and_lists_tuples() -> None:
    shown = metadata_as_json({"tags": ("b", "a"), "size": 3, "author": "Ann"})
    assert list(shown) == ["author", "size", "tags"]
    assert shown["tags"] == ["b", "a"]
    assert json.loads(metadata_text({"tags": ("x",), "a": True})) == {"a": True, "tags": ["x"]}


def test_values_no_filter_can_compare_are_dropped() -> None:
    raw = {"nested": {"a": 1}, "none": None, "mixed": [1, {"b": 2}, "c", None], "ok": 1.5}
    assert metadata_from_json(raw) == {"mixed": (1, "c"), "ok": 1.5}


def test_stored_text_that_is_not_an_object_reads_as_none() -> None:
    for text in ("not json", "[1, 2]", '"text"', "null", ""):
        assert metadata_from_text(text) == {}

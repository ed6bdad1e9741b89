"""The metadata filter AST (domain/filters.py): parsing, exact typing, evaluation laws.

REQ-FILTER-001 (parse/validate), REQ-FILTER-002 (semantics), REQ-FILTER-004 (bounds),
REQ-FILTER-008 (shorthands).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import INVALID_ARGUMENT, QmdError
from domain.filters import (
    MAX_DEPTH,
    Condition,
    FilterNode,
    Group,
    Not,
    matches,
    narrowing,
    of_format,
    parse_filter,
    since,
    tagged,
    to_json,
    until,
)

KEYS = ["tags", "date", "author", "size", "draft", "missing"]
scalars = st.one_of(
    st.text(max_size=6),
    st.integers(-5, 5),
    st.floats(-5, 5, allow_nan=False),
    st.booleans(),
)
values = st.one_of(scalars, st.lists(scalars, max_size=3).map(tuple))
metadata_st = st.dictionaries(st.sampled_from(KEYS), values, max_size=5)


def _condition_json(draw: st.DrawFn) -> dict[str, Any]:
    operator = draw(
        st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "all", "exists"])
    )
    key = draw(st.sampled_from(KEYS))
    if operator == "exists":
        value: Any = draw(st.booleans())
    elif operator in ("in", "nin", "all"):
        value = draw(st.lists(scalars, min_size=1, max_size=3))
    elif operator in ("gt", "gte", "lt", "lte"):
        value = draw(st.one_of(st.text(max_size=6), st.integers(-5, 5)))
    else:
        value = draw(scalars)
    return {"key": key, "operator": operator, "value": value}


@st.composite
def filters_json(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    kind = draw(st.sampled_from(["cond", "cond", "and", "or", "not"] if depth < 3 else ["cond"]))
    if kind == "cond":
        return _condition_json(draw)
    if kind == "not":
        return {"operator": "not", "operand": draw(filters_json(depth + 1))}
    operands = draw(st.lists(filters_json(depth + 1), min_size=1, max_size=3))
    return {"operator": kind, "operands": operands}


@settings(max_examples=100, deadline=None)
@given(filters_json())
def test_valid_filters_round_trip(raw: dict[str, Any]) -> None:
    node = parse_filter(raw)
    assert parse_filter(to_json(node)) == node


@settings(max_examples=100, deadline=None)
@given(filters_json(), metadata_st)
def test_not_negates_and_groups_combine(raw: dict[str, Any], metadata: dict[str, Any]) -> None:
    node = parse_filter(raw)
    assert matches(Not(node), metadata) is (not matches(node, metadata))
    assert matches(Group("and", (node, node)), metadata) is matches(node, metadata)
    assert matches(Group("or", (node, Not(node))), metadata) is True
    assert matches(Group("and", (node, Not(node))), metadata) is False


@settings(max_examples=100, deadline=None)
@given(filters_json(), metadata_st)
def test_missing_key_matches_only_exists_false(
    raw: dict[str, Any], metadata: dict[str, Any]
) -> None:
    cond = _condition_json_from(raw)
    if cond is None:
        return
    absent = {k: v for k, v in metadata.items() if k != cond.key}
    expected = cond.operator == "exists" and cond.value is False
    assert matches(cond, absent) is expected


def _condition_json_from(raw: dict[str, Any]) -> Condition | None:
    node: FilterNode = parse_filter(raw)
    return node if isinstance(node, Condition) else None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_any_json_parses_or_is_invalid_argument(raw: Any) -> None:
    try:
        node = parse_filter(raw)
    except QmdError as error:
        assert error.code == INVALID_ARGUMENT
        assert error.message.startswith("Invalid filter: filter")
        return
    matches(node, {"tags": ("a",), "size": 3})  # a parsed filter always evaluates


def test_exact_typing() -> None:
    meta = {"n": 1, "s": "1", "b": True, "tags": ("a", "b"), "date": "2024-03-01"}
    eq = lambda k, v: parse_filter({"key": k, "operator": "eq", "value": v})  # noqa: E731
    assert matches(eq("n", 1), meta) and matches(eq("n", 1.0), meta)
    assert not matches(eq("n", "1"), meta) and not matches(eq("n", True), meta)
    assert matches(eq("s", "1"), meta) and not matches(eq("s", 1), meta)
    assert matches(eq("b", True), meta) and not matches(eq("b", 1), meta)
    assert matches(eq("tags", "a"), meta)  # a list field equals each of its items
    gte = parse_filter({"key": "date", "operator": "gte", "value": "2024-02-15"})
    assert matches(gte, meta)  # ISO dates compare as strings
    assert not matches(parse_filter({"key": "n", "operator": "gt", "value": "0"}), meta)
    assert matches(parse_filter({"key": "tags", "operator": "all", "value": ["b", "a"]}), meta)
    assert not matches(parse_filter({"key": "tags", "operator": "all", "value": ["a", "c"]}), meta)
    assert matches(parse_filter({"key": "tags", "operator": "nin", "value": ["c"]}), meta)
    assert not matches(parse_filter({"key": "gone", "operator": "ne", "value": "x"}), meta)
    assert not matches(parse_filter({"key": "gone", "operator": "nin", "value": ["x"]}), meta)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"operator": "like", "key": "a", "value": 1}, "filter.operator: unknown operator 'like'"),
        ({"operator": "and", "operands": []}, "filter.operands: 'and' needs a non-empty array"),
        ({"operator": "eq", "value": 1}, "filter.key"),
        ({"operator": "in", "key": "a", "value": 1}, "'in' needs a non-empty array, got number"),
        # an empty array is said as such (it read "needs a non-empty array, got array")
        ({"operator": "all", "key": "a", "value": []}, "non-empty array, got an empty array"),
        ({"operator": "gt", "key": "a", "value": True}, "compares numbers or strings"),
        ({"operator": "exists", "key": "a", "value": "yes"}, "'exists' needs true or false"),
        ({"operator": "eq", "key": "a", "value": None}, "got null"),
        ({"operator": "eq", "key": "a", "value": {"x": 1}}, "got object"),
        ({"operator": "not", "operand": [1]}, "filter.operand: expected an object"),
        (
            {"operator": "or", "operands": [{"key": "a", "operator": "eq", "value": 1}, 3]},
            "filter.operands[1]: expected an object",
        ),
        ({"operator": "eq", "key": "a", "value": 1, "extra": 2}, "unexpected field 'extra'"),
    ],
)
def test_invalid_filters_say_what_is_wrong(raw: Any, fragment: str) -> None:
    with pytest.raises(QmdError) as caught:
        parse_filter(raw)
    assert caught.value.code == INVALID_ARGUMENT
    assert fragment in caught.value.message


def test_depth_is_bounded() -> None:
    raw: dict[str, Any] = {"key": "a", "operator": "exists", "value": True}
    for _ in range(MAX_DEPTH + 1):
        raw = {"operator": "not", "operand": raw}
    with pytest.raises(QmdError, match="nest at most"):
        parse_filter(raw)


def test_shorthands() -> None:
    dated = {"date": "2024-01-31", "modified": "2026-01-01T00:00:00Z"}
    undated = {"modified": "2024-01-31T23:00:00Z"}
    assert matches(until("2024-01-31"), dated) and matches(until("2024-01-31"), undated)
    assert not matches(until("2024-01-30"), undated)
    assert matches(since("2024-01-31"), dated) and not matches(since("2024-02-01"), dated)
    assert matches(since("2025-01-01"), {"created": "2025-06-01", "modified": "2020-01-01"})
    assert matches(of_format([".PDF", "md"]), {"format": "pdf"})
    assert matches(tagged(["a"]), {"tags": ("a", "b")}) and not matches(
        tagged(["c"]), {"tags": "a"}
    )
    for bad in ("yesterday", "2024-02-30", "2024/01/01"):
        with pytest.raises(QmdError) as caught:
            since(bad, "--since")
        assert caught.value.code == INVALID_ARGUMENT and "--since" in caught.value.message


def test_tag_shorthand_reads_categories_too() -> None:
    """REQ-FILTER-TAG-001: `--tag` finds a label in `tags`, `category` or `categories`, as a
    list item or as the value itself; several tags must all be found, in any of them."""
    assert matches(tagged(["ops"]), {"category": "ops"})
    assert matches(tagged(["ops"]), {"categories": ("blog", "ops")})
    assert matches(tagged(["ops"]), {"tags": "ops"})
    assert matches(tagged(["ops", "blog"]), {"tags": ("ops",), "categories": ("blog",)})
    assert not matches(tagged(["ops", "blog"]), {"categories": ("ops",)})
    assert not matches(tagged(["ops"]), {"title": "ops", "categorie": "ops"})
    # what a store reads first still holds every passing document (REQ-FILTER-009)
    assert narrowing(tagged(["ops"])) is not None


def test_narrowing_is_a_necessary_condition_an_index_can_answer() -> None:
    """REQ-FILTER-009: values where the filter names them, keys where it only needs them, and
    nothing under a negation or `exists: false`; an and-group keeps its value parts only."""
    from domain.filters import AllOf, AnyOf, HasKey, HasValue, narrowing

    def of(raw: object) -> object:
        return narrowing(parse_filter(raw))

    assert of({"key": "tags", "operator": "eq", "value": "x"}) == HasValue("tags", "x")
    assert of({"key": "n", "operator": "in", "value": [1, True]}) == AnyOf(
        (HasValue("n", 1), HasValue("n", True))
    )
    assert of({"key": "t", "operator": "all", "value": ["a", "b"]}) == AllOf(
        (HasValue("t", "a"), HasValue("t", "b"))
    )
    assert of({"key": "n", "operator": "gt", "value": 3}) == HasKey("n")
    assert of({"key": "n", "operator": "ne", "value": 3}) == HasKey("n")
    assert of({"key": "n", "operator": "exists", "value": True}) == HasKey("n")
    assert of({"key": "n", "operator": "exists", "value": False}) is None
    assert of({"key": "n", "operator": "eq", "value": 2**60}) == HasKey("n")  # past float
    assert of({"operator": "not", "operand": {"key": "n", "operator": "eq", "value": 1}}) is None
    both = {
        "operator": "and",
        "operands": [
            {"key": "d", "operator": "gte", "value": "2024"},
            {"key": "t", "operator": "eq", "value": "x"},
        ],
    }
    assert of(both) == AllOf((HasValue("t", "x"),))
    either = {
        "operator": "or",
        "operands": [
            {"key": "t", "operator": "eq", "value": "x"},
            {"key": "d", "operator": "exists", "value": False},
        ],
    }
    assert of(either) is None

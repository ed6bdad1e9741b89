"""Metadata filters: the JSON AST of the original's next version (tobi/qmd PR #910), parsed,
validated and evaluated here (docs/spec/filters.md, REQ-FILTER-*).

A filter is a group `{operator: and|or, operands: [...]}`, a negation
`{operator: not, operand: {...}}` or a condition `{key, operator, value}` with one of
`eq ne gt gte lt lte in nin all exists`. Values are typed exactly: `1` never equals `"1"` and
`true` is not `1`; ISO dates are strings and compare as strings. A missing key matches only
`exists: false` (and a `not` around a condition that needs the key).

Pure: parsing returns immutable nodes or raises `QmdError(invalid-argument)` naming the path of
the bad part; evaluation never raises.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from domain.errors import INVALID_ARGUMENT, QmdError

Scalar = str | int | float | bool
MetaValue = Scalar | tuple[Scalar, ...]
Metadata = Mapping[str, MetaValue]

ConditionOperator = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "all", "exists"]
CONDITION_OPERATORS: tuple[str, ...] = (
    "eq",
    "ne",
    "gt",
    "gte",
    "lt",
    "lte",
    "in",
    "nin",
    "all",
    "exists",
)
GROUP_OPERATORS: tuple[str, ...] = ("and", "or")
MAX_DEPTH = 16  # REQ-FILTER-004: a filter is bounded in depth and size
MAX_NODES = 256
MAX_LIST = 256


@dataclass(frozen=True)
class Condition:
    key: str
    operator: ConditionOperator
    value: MetaValue


@dataclass(frozen=True)
class Group:
    operator: Literal["and", "or"]
    operands: tuple[FilterNode, ...]


@dataclass(frozen=True)
class Not:
    operand: FilterNode


FilterNode = Condition | Group | Not


def _fail(path: str, message: str) -> QmdError:
    return QmdError(INVALID_ARGUMENT, f"Invalid filter: {path}: {message}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _scalar(value: object, path: str) -> Scalar:
    if isinstance(value, str | bool):
        return value
    if _is_number(value):
        assert isinstance(value, int | float)
        if isinstance(value, float) and not math.isfinite(value):
            raise _fail(path, "numbers must be finite")
        return value
    raise _fail(path, f"expected a string, number or boolean, got {_kind(value)}")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if _is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


class _Budget:
    def __init__(self) -> None:
        self.nodes = 0

    def take(self, path: str) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _fail(path, f"a filter may have at most {MAX_NODES} nodes")


def parse_filter(raw: object) -> FilterNode:
    """The filter `raw` (parsed JSON) as nodes; `invalid-argument` naming what is wrong."""
    return _parse(raw, "filter", 0, _Budget())


def _parse(raw: object, path: str, depth: int, budget: _Budget) -> FilterNode:
    if not isinstance(raw, Mapping):
        raise _fail(path, f"expected an object, got {_kind(raw)}")
    if depth >= MAX_DEPTH:
        raise _fail(path, f"filters nest at most {MAX_DEPTH} levels deep")
    budget.take(path)
    operator = raw.get("operator")
    if not isinstance(operator, str):
        raise _fail(f"{path}.operator", "missing or not a string")
    if operator in GROUP_OPERATORS:
        _only(raw, ("operator", "operands"), path)
        operands = raw.get("operands")
        if not isinstance(operands, list) or not operands:
            raise _fail(f"{path}.operands", f"'{operator}' needs a non-empty array of filters")
        return Group(
            "and" if operator == "and" else "or",
            tuple(
                _parse(item, f"{path}.operands[{index}]", depth + 1, budget)
                for index, item in enumerate(operands)
            ),
        )
    if operator == "not":
        _only(raw, ("operator", "operand"), path)
        if "operand" not in raw:
            raise _fail(f"{path}.operand", "'not' needs one filter in 'operand'")
        return Not(_parse(raw["operand"], f"{path}.operand", depth + 1, budget))
    if operator not in CONDITION_OPERATORS:
        known = ", ".join((*GROUP_OPERATORS, "not", *CONDITION_OPERATORS))
        raise _fail(f"{path}.operator", f"unknown operator {operator!r}; expected one of {known}")
    _only(raw, ("key", "operator", "value"), path)
    key = raw.get("key")
    if not isinstance(key, str) or not key:
        raise _fail(f"{path}.key", "a condition needs a non-empty string 'key'")
    if "value" not in raw:
        raise _fail(f"{path}.value", f"'{operator}' needs a 'value'")
    return Condition(key, operator, _value(operator, raw["value"], f"{path}.value"))  # type: ignore[arg-type]


def _only(raw: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
    extra = sorted(k for k in raw if k not in allowed)
    if extra:
        raise _fail(path, f"unexpected field {extra[0]!r} (allowed: {', '.join(allowed)})")


def _value(operator: str, value: object, path: str) -> MetaValue:
    if operator == "exists":
        if not isinstance(value, bool):
            raise _fail(path, f"'exists' needs true or false, got {_kind(value)}")
        return value
    if operator in ("in", "nin", "all"):
        if not isinstance(value, list) or not value:
            got = "an empty array" if value == [] else _kind(value)
            raise _fail(path, f"'{operator}' needs a non-empty array, got {got}")
        if len(value) > MAX_LIST:
            raise _fail(path, f"arrays hold at most {MAX_LIST} values")
        return tuple(_scalar(item, f"{path}[{index}]") for index, item in enumerate(value))
    scalar = _scalar(value, path)
    if operator in ("gt", "gte", "lt", "lte") and isinstance(scalar, bool):
        raise _fail(path, f"'{operator}' compares numbers or strings, got boolean")
    return scalar


# -- evaluation ---------------------------------------------------------------------------


def _same(a: Scalar, b: Scalar) -> bool:
    """Equal with exact typing: booleans, numbers and strings never equal each other."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a == b


def _compare(stored: Scalar, operator: str, wanted: Scalar) -> bool:
    if isinstance(stored, bool) or isinstance(wanted, bool):
        return False
    if isinstance(stored, str) != isinstance(wanted, str):
        return False
    a: Any = stored
    b: Any = wanted
    if operator == "gt":
        return bool(a > b)
    if operator == "gte":
        return bool(a >= b)
    if operator == "lt":
        return bool(a < b)
    return bool(a <= b)


def _items(value: MetaValue) -> tuple[Scalar, ...]:
    return value if isinstance(value, tuple) else (value,)


def _condition(node: Condition, metadata: Metadata) -> bool:
    present = node.key in metadata
    if node.operator == "exists":
        return present == node.value
    if not present:
        return False
    stored = metadata[node.key]
    wanted = node.value
    op = node.operator
    if op in ("eq", "ne"):
        assert not isinstance(wanted, tuple)
        hit = any(_same(item, wanted) for item in _items(stored))
        return hit if op == "eq" else not hit
    if op in ("in", "nin"):
        assert isinstance(wanted, tuple)
        hit = any(_same(item, w) for item in _items(stored) for w in wanted)
        return hit if op == "in" else not hit
    if op == "all":
        assert isinstance(wanted, tuple)
        return all(any(_same(item, w) for item in _items(stored)) for w in wanted)
    assert not isinstance(wanted, tuple)
    if isinstance(stored, tuple):
        return any(_compare(item, op, wanted) for item in stored)
    return _compare(stored, op, wanted)


def matches(node: FilterNode, metadata: Metadata) -> bool:
    """Whether a document with `metadata` passes the filter (REQ-FILTER-002)."""
    if isinstance(node, Condition):
        return _condition(node, metadata)
    if isinstance(node, Not):
        return not matches(node.operand, metadata)
    if node.operator == "and":
        return all(matches(operand, metadata) for operand in node.operands)
    return any(matches(operand, metadata) for operand in node.operands)


def to_json(node: FilterNode) -> dict[str, Any]:
    """The node back as the JSON AST (parse_filter(to_json(n)) == n)."""
    if isinstance(node, Condition):
        value: Any = list(node.value) if isinstance(node.value, tuple) else node.value
        return {"key": node.key, "operator": node.operator, "value": value}
    if isinstance(node, Not):
        return {"operator": "not", "operand": to_json(node.operand)}
    return {"operator": node.operator, "operands": [to_json(o) for o in node.operands]}


def all_of(nodes: Sequence[FilterNode]) -> FilterNode | None:
    """Several filters that must all pass, as one (None when there are none)."""
    if not nodes:
        return None
    if len(nodes) == 1:
        return nodes[0]
    return Group("and", tuple(nodes))


# -- shorthands (CLI --since/--until/--type/--tag, LDIMS dateFrom/dateTo/documentType) -----

_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ][0-9:.]+(?:Z|[+-]\d{2}:?\d{2})?)?$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def check_iso_date(value: str, name: str) -> str:
    """`value` if it is an ISO 8601 date or date-time, else `invalid-argument`."""
    text = value.strip()
    if not _ISO.match(text):
        raise QmdError(
            INVALID_ARGUMENT,
            f"{name} must be an ISO 8601 date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ), got {value!r}",
        )
    if _DAY.match(text[:10]):
        try:
            _dt.date.fromisoformat(text[:10])
        except ValueError as error:
            raise QmdError(INVALID_ARGUMENT, f"{name}: {error}") from None
    return text


DATE_KEYS = ("date", "created", "modified")


def document_date(metadata: Metadata) -> str | None:
    """A document's date: front matter `date`, else an extractor's `created`, else the file's
    `modified` (the first of DATE_KEYS that holds a string)."""
    for key in DATE_KEYS:
        value = metadata.get(key)
        if isinstance(value, str):
            return value
    return None


def _document_date(operator: ConditionOperator, value: str) -> FilterNode:
    """The document's date (see `document_date`) compared with `value`."""
    branches: list[FilterNode] = []
    for index, key in enumerate(DATE_KEYS):
        earlier = [Not(Condition(k, "exists", True)) for k in DATE_KEYS[:index]]
        branches.append(all_of([*earlier, Condition(key, operator, value)]) or Group("and", ()))
    return Group("or", tuple(branches))


def since(value: str, name: str = "since") -> FilterNode:
    """Documents dated on or after `value` (REQ-FILTER-008)."""
    return _document_date("gte", check_iso_date(value, name))


def until(value: str, name: str = "until") -> FilterNode:
    """Documents dated on or before `value`; a bare day includes that whole day."""
    text = check_iso_date(value, name)
    if _DAY.match(text):
        after = _dt.date.fromisoformat(text) + _dt.timedelta(days=1)
        return _document_date("lt", after.isoformat())
    return _document_date("lte", text)


def of_format(types: Sequence[str]) -> FilterNode:
    """Documents whose `format` is one of `types` (extensions, any case, dot optional)."""
    wanted = tuple(dict.fromkeys(t.strip().lstrip(".").lower() for t in types if t.strip()))
    if not wanted:
        raise QmdError(INVALID_ARGUMENT, "type must name at least one file type (md, pdf, ...)")
    return Condition("format", "in", wanted)


# Front matter names a document's labels in more than one way: `tags` (Obsidian, Hugo),
# `category`/`categories` (Jekyll, Hugo, WordPress exports); a person asking for a tag means
# any of them (REQ-FILTER-TAG-001).
TAG_KEYS = ("tags", "category", "categories")


def tagged(tags: Sequence[str]) -> FilterNode:
    """Documents labelled with every one of `tags`, each in `tags`, `category` or
    `categories` (a list holding it, or the value itself)."""
    wanted = tuple(dict.fromkeys(t.strip() for t in tags if t.strip()))
    if not wanted:
        raise QmdError(INVALID_ARGUMENT, "tag must not be empty")
    each = [Group("or", tuple(Condition(key, "eq", tag) for key in TAG_KEYS)) for tag in wanted]
    return each[0] if len(each) == 1 else Group("and", tuple(each))


# ---------------------------------------------------------------- narrowing (REQ-FILTER-009)


@dataclass(frozen=True)
class HasValue:
    """The key holds this value, alone or as a list item (equal as `eq` compares)."""

    key: str
    value: Scalar


@dataclass(frozen=True)
class HasKey:
    key: str


@dataclass(frozen=True)
class AllOf:
    probes: tuple[Probe, ...]


@dataclass(frozen=True)
class AnyOf:
    """Any of the probes; no probes: no document."""

    probes: tuple[Probe, ...]


Probe = HasValue | HasKey | AllOf | AnyOf

# integers past float precision are looked up by their key only: an index may hold them as
# floats, and a necessary condition must never leave out a document that passes
_EXACT_INT = 2**53


def _has_value(key: str, value: Scalar) -> Probe:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _EXACT_INT:
        return HasKey(key)
    return HasValue(key, value)


def _by_value(probe: Probe) -> bool:
    if isinstance(probe, HasValue):
        return True
    if isinstance(probe, HasKey):
        return False
    if isinstance(probe, AllOf):
        return any(_by_value(part) for part in probe.probes)
    return all(_by_value(part) for part in probe.probes)


def narrowing(node: FilterNode) -> Probe | None:
    """A condition every document passing `node` meets, that an index of (key, value) pairs
    can answer; None when there is none (a negation, `exists: false`). Documents failing it
    fail `node`, so a store may read only those meeting it before `matches` decides."""
    if isinstance(node, Not):
        return None
    if isinstance(node, Group):
        parts = [narrowing(operand) for operand in node.operands]
        if node.operator == "and":
            known = tuple(part for part in parts if part is not None)
            # a key alone narrows little (most documents may hold it): when a value narrows,
            # the key-only parts are left to the evaluation, so the index reads fewer rows
            valued = tuple(part for part in known if _by_value(part))
            return AllOf(valued or known) if known else None
        if any(part is None for part in parts):
            return None
        return AnyOf(tuple(part for part in parts if part is not None))
    if node.operator == "exists":
        return HasKey(node.key) if node.value is True else None
    value = node.value
    if node.operator == "eq" and not isinstance(value, tuple):
        return _has_value(node.key, value)
    if node.operator == "in" and isinstance(value, tuple):
        return AnyOf(tuple(_has_value(node.key, item) for item in value))
    if node.operator == "all" and isinstance(value, tuple) and value:
        return AllOf(tuple(_has_value(node.key, item) for item in value))
    # ne, nin, all [], and the comparisons all need the key to be present
    return HasKey(node.key)

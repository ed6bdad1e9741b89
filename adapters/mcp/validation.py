"""Tool-argument validation against the tools' JSON Schemas.

Issues are worded the way the original's schema library words them (so the compat surface
answers byte-for-byte), e.g. `file: Invalid input: expected string, received number`.
Unknown properties are ignored, as there, unless the schema is closed
(`additionalProperties: false`, the surfaces other than compat): then each one is an issue
naming it (REQ-SPEC-ARGS-001).
"""

from __future__ import annotations

import math
from typing import Any


def js_type(value: Any) -> str:
    """The name JavaScript-side validators give a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


_MISSING = object()


def _check(schema: dict[str, Any], value: Any, path: list[str], issues: list[str]) -> None:
    where = ".".join(path)
    expected = schema.get("type")
    got = "undefined" if value is _MISSING else js_type(value)
    if "enum" in schema:
        if value is _MISSING or value not in schema["enum"] or got != expected:
            options = "|".join(f'"{option}"' for option in schema["enum"])
            issues.append(f"{where}: Invalid option: expected one of {options}")
        return
    if expected is not None and got != expected:
        issues.append(f"{where}: Invalid input: expected {expected}, received {got}")
        return
    if isinstance(value, float) and not math.isfinite(value):
        # 1e999 decodes to infinity; the original's validator refuses it in these words.
        issues.append(f"{where}: Invalid input: expected number, received number")
        return
    if expected == "array":
        max_items = schema.get("maxItems")
        if max_items is not None and len(value) > max_items:
            issues.append(f"{where}: Too big: expected array to have <={max_items} items")
            return
        item_schema = schema.get("items")
        if item_schema:
            for index, item in enumerate(value):
                _check(item_schema, item, [*path, str(index)], issues)
    elif expected == "object":
        _check_object(schema, value, path, issues)


def _check_object(
    schema: dict[str, Any], value: dict[str, Any], path: list[str], issues: list[str]
) -> None:
    required = set(schema.get("required", []))
    properties: dict[str, Any] = schema.get("properties", {})
    for name, prop in properties.items():
        if name in value:
            _check(prop, value[name], [*path, name], issues)
        elif name in required:
            _check(prop, _MISSING, [*path, name], issues)
    if schema.get("additionalProperties") is False:
        # an agent that misspells an argument must learn it, not believe it was applied
        known = ", ".join(properties) or "none"
        for name in value:
            if name not in properties:
                where = ".".join([*path, name])
                issues.append(f"{where}: Unknown argument (known: {known})")


def validate_arguments(schema: dict[str, Any], arguments: Any) -> list[str]:
    """Return the issues (empty when valid); `arguments` absent is treated as `{}`."""
    issues: list[str] = []
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return [f": Invalid input: expected object, received {js_type(arguments)}"]
    _check_object(schema, arguments, [], issues)
    return issues


def with_defaults(schema: dict[str, Any], arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Fill schema defaults for absent properties; drop properties the schema doesn't name."""
    given = arguments or {}
    result: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if name in given:
            result[name] = given[name]
        elif "default" in prop:
            result[name] = prop["default"]
    return result


def optional_int(value: Any) -> int | None:
    """A validated numeric argument as an integer (truncated, like JavaScript), or None."""
    return None if value is None else int(value)

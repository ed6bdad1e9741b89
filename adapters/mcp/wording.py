"""How a surface words protocol-level parameter errors (`tools/call` without a name,
`resources/read` without a uri): the Session detects them, the surface's wording answers.

* `OriginalWording`: the original 2.8.3 (its SDK's zod issue lists; a bad `resources/read`
  is -32603, as its SDK lets a zod error escape the handler).
* `JsonRpcWording`: the default surface, plain JSON-RPC -32602 "Invalid params" (seed 001).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class JsonRpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class ProtocolWording(Protocol):
    def bad_param(self, method: str, path: list[str], expected: str, got: str) -> JsonRpcError:
        """`path` (e.g. ["params", "uri"]) is not the `expected` JSON type; `got` is what it
        is, in JavaScript's `typeof` words ("undefined" when absent)."""
        ...


def zod_issue_message(prefix: str, issues: list[dict[str, Any]]) -> str:
    """`{prefix}` + the issue list pretty-printed the way JavaScript's JSON.stringify does."""
    return prefix + json.dumps(issues, indent=2, ensure_ascii=False)


class OriginalWording:
    def bad_param(self, method: str, path: list[str], expected: str, got: str) -> JsonRpcError:
        issue = {
            "expected": expected,
            "code": "invalid_type",
            "path": path,
            "message": f"Invalid input: expected {expected}, received {got}",
        }
        if method == "resources/read":
            return JsonRpcError(INTERNAL_ERROR, zod_issue_message("", [issue]))
        return JsonRpcError(
            INVALID_PARAMS, zod_issue_message(f"Invalid {method} request: ", [issue])
        )


class JsonRpcWording:
    def bad_param(self, method: str, path: list[str], expected: str, got: str) -> JsonRpcError:
        where = ".".join(path)
        shown = "missing" if got == "undefined" else f"a {got}"
        return JsonRpcError(
            INVALID_PARAMS,
            f"Invalid params: {where} must be a {expected}, got {shown}",
            {"method": method, "path": path, "expected": expected},
        )

"""Normalisation asserts a volatile field is present and well-formed before replacing it."""

from __future__ import annotations

from typing import Any

from conformance.normalize import Rule, builtin_rules, normalize

ROOT = "/srv/scratch/fixtures"


def _status(
    path: str = f"{ROOT}/corpora/handbook",
    stamp: Any = "2026-03-01T00:00:00.000Z",
    text: str = f"  - handbook: {ROOT}/corpora/handbook (22 docs)",
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {
            "content": [{"type": "text", "text": text}],
            "structuredContent": {
                "collections": [
                    {"name": "handbook", "path": path, "lastUpdated": stamp, "documents": 22}
                ]
            },
        },
    }


STATUS_CALL = {"method": "tools/call", "params": {"name": "status", "arguments": {}}}


def test_status_fields_are_replaced_and_nothing_else() -> None:
    msg = _status()
    fixed, problems = normalize(msg, builtin_rules("2025", STATUS_CALL, msg), [ROOT])
    assert problems == []
    coll = fixed["result"]["structuredContent"]["collections"][0]
    assert coll == {
        "name": "handbook",
        "path": "${FIXTURE_ROOT}/corpora/handbook",
        "lastUpdated": "${TIMESTAMP}",
        "documents": 22,
    }
    assert (
        fixed["result"]["content"][0]["text"]
        == "  - handbook: ${FIXTURE_ROOT}/corpora/handbook (22 docs)"
    )
    assert msg["result"]["structuredContent"]["collections"][0]["path"].startswith(ROOT)


def test_missing_timestamp_is_a_problem_not_a_pass() -> None:
    msg = _status()
    del msg["result"]["structuredContent"]["collections"][0]["lastUpdated"]
    _, problems = normalize(msg, builtin_rules("2025", STATUS_CALL, msg), [ROOT])
    assert [p.path for p in problems] == ["$.result.structuredContent.collections[*].lastUpdated"]
    assert "missing" in problems[0].message


def test_malformed_timestamp_is_not_replaced() -> None:
    msg = _status(stamp="yesterday")
    fixed, problems = normalize(msg, builtin_rules("2025", STATUS_CALL, msg), [ROOT])
    assert problems and "ISO 8601" in problems[0].message
    assert fixed["result"]["structuredContent"]["collections"][0]["lastUpdated"] == "yesterday"


def test_path_outside_the_fixture_root_is_a_problem() -> None:
    msg = _status(path="/somewhere/else")
    _, problems = normalize(msg, builtin_rules("2025", STATUS_CALL, msg), [ROOT])
    assert any(p.path.endswith(".path") and "fixture root" in p.message for p in problems)


def test_initialize_version_must_exist() -> None:
    req = {"method": "initialize", "params": {}}
    good = {"jsonrpc": "2.0", "id": 1, "result": {"serverInfo": {"name": "qmd", "version": "9"}}}
    fixed, problems = normalize(good, builtin_rules("2025", req, good), [ROOT])
    assert problems == [] and fixed["result"]["serverInfo"] == {
        "name": "qmd",
        "version": "${SERVER_VERSION}",
    }
    bad = {"jsonrpc": "2.0", "id": 1, "result": {"serverInfo": {"name": "qmd"}}}
    _, problems = normalize(bad, builtin_rules("2025", req, bad), [ROOT])
    assert [p.path for p in problems] == ["$.result.serverInfo.version"]


ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def test_2026_results_must_name_the_server() -> None:
    req = {"method": "tools/list", "params": {"_meta": ENVELOPE}}
    meta = {"io.modelcontextprotocol/serverInfo": {"name": "qmd", "version": "2.8.3"}}
    good = {"jsonrpc": "2.0", "id": 2, "result": {"tools": [], "_meta": meta}}
    fixed, problems = normalize(good, builtin_rules("2026-07-28", req, good), [ROOT])
    assert problems == []
    assert (
        fixed["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["version"]
        == "${SERVER_VERSION}"
    )
    bare = {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}
    _, problems = normalize(bare, builtin_rules("2026-07-28", req, bare), [ROOT])
    assert len(problems) == 1


def test_errors_and_2025_results_get_no_implicit_rules() -> None:
    err = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "x"}}
    assert builtin_rules("2026-07-28", {"method": "x"}, err) == []
    ok = {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert builtin_rules("2025", {"method": "ping"}, ok) == []


def test_duration_rule() -> None:
    rules = [Rule("$.uptime", "duration")]
    fixed, problems = normalize({"uptime": 12}, rules, [])
    assert problems == [] and fixed == {"uptime": "${DURATION}"}
    _, problems = normalize({"uptime": -1}, rules, [])
    assert problems


def test_envelope_less_requests_get_2025_rules_even_in_2026() -> None:
    # The original answers them the 2025 way (no _meta), so nothing may be demanded.
    ok = {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
    assert builtin_rules("2026-07-28", {"method": "tools/list"}, ok) == []


def test_a_missing_volatile_field_names_the_field_what_was_sent_and_the_requirement() -> None:
    msg = _status()
    del msg["result"]["structuredContent"]["collections"][0]["lastUpdated"]
    _fixed, problems = normalize(msg, builtin_rules("2025", STATUS_CALL, msg), [ROOT])
    (problem,) = problems
    assert problem.path == "$.result.structuredContent.collections[*].lastUpdated"
    assert problem.message.startswith("missing: the answer has no")
    assert "ISO 8601" in problem.message and problem.requirement == "REQ-TOOL-STATUS-001"
    bad = _status(stamp="yesterday")
    _fixed, problems = normalize(bad, builtin_rules("2025", STATUS_CALL, bad), [ROOT])
    assert [(p.value, p.requirement) for p in problems] == [("yesterday", "REQ-TOOL-STATUS-001")]

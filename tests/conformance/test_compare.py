"""Structural diff and matchers: parsed JSON is compared, and failures name a JSON path."""

from __future__ import annotations

from conformance.compare import MISSING, check_matcher, diff, tolerances


def test_identical_documents_have_no_difference() -> None:
    doc = {"result": {"content": [{"type": "text", "text": "a"}]}, "id": 1}
    assert diff(doc, {"id": 1, "result": {"content": [{"text": "a", "type": "text"}]}}) == []


def test_a_changed_character_is_reported_at_its_path() -> None:
    exp = {"result": {"content": [{"type": "text", "text": "Found 3 results"}]}}
    got = {"result": {"content": [{"type": "text", "text": "Found 4 results"}]}}
    (d,) = diff(exp, got)
    assert d.path == "$.result.content[0].text"
    assert "char 6" in d.note
    rendered = d.render()
    assert '"Found 3 results"' in rendered and '"Found 4 results"' in rendered


def test_missing_and_unexpected_members() -> None:
    found = {d.path: d for d in diff({"a": 1, "b": 2}, {"a": 1, "c": 3})}
    assert found["$.b"].actual is MISSING and found["$.b"].note == "missing"
    assert found["$.c"].expected is MISSING and found["$.c"].note == "unexpected"


def test_numbers_compare_by_value_but_booleans_are_not_numbers() -> None:
    assert diff({"score": 1}, {"score": 1.0}) == []
    assert diff({"n": 1}, {"n": True})
    assert diff({"id": "1"}, {"id": 1})


def test_odd_keys_are_quoted_in_paths() -> None:
    exp = {"_meta": {"io.modelcontextprotocol/serverInfo": {"name": "qmd"}}}
    got = {"_meta": {"io.modelcontextprotocol/serverInfo": {"name": "other"}}}
    (d,) = diff(exp, got)
    assert d.path == '$._meta["io.modelcontextprotocol/serverInfo"].name'


def test_array_length_differences() -> None:
    paths = [d.path for d in diff([1, 2], [1])]
    assert paths == ["$[1]"]


def test_matchers() -> None:
    msg = {
        "result": {
            "isError": True,
            "content": [{"type": "text", "text": "Document not found"}],
            "items": ["a", "b"],
        }
    }
    assert check_matcher(msg, {"path": "$.result.isError", "equals": True}) == []
    assert check_matcher(msg, {"path": "$.result.content[0].text", "startsWith": "Document"}) == []
    assert check_matcher(msg, {"path": "$.result.content[0].text", "regex": "not found$"}) == []
    assert check_matcher(msg, {"path": "$.result.items", "length": 2}) == []
    assert check_matcher(msg, {"path": "$.result.items", "contains": "b"}) == []
    assert check_matcher(msg, {"path": "$.result.items[*]", "oneOf": ["a", "b"]}) == []
    assert check_matcher(msg, {"path": "$.result.structuredContent", "absent": True}) == []
    assert check_matcher(msg, {"path": "$.result.isError", "type": "boolean"}) == []
    (miss,) = check_matcher(msg, {"path": "$.result.nothing", "equals": 1})
    assert miss.note == "no such node"
    (bad,) = check_matcher(msg, {"path": "$.result.isError", "absent": True})
    assert bad.path == "$.result.isError"
    assert check_matcher(msg, {"path": "$.result.items[*]", "oneOf": ["a"]})
    assert check_matcher(msg, {"path": "$.result.content[0].text", "notContains": "found"})


def test_tolerance_rules_allow_close_numbers_only_where_they_point() -> None:
    golden = {"results": [{"score": 0.8812, "line": 3}, {"score": 0.5, "line": 7}]}
    rules = [{"path": "$.results[*].score", "abs": 0.005, "why": "model floats"}]
    close = {"results": [{"score": 0.8849, "line": 3}, {"score": 0.5, "line": 7}]}
    assert diff(golden, close, tolerant=tolerances(close, rules)) == []
    far = {"results": [{"score": 0.8912, "line": 3}, {"score": 0.5, "line": 7}]}
    assert [d.path for d in diff(golden, far, tolerant=tolerances(far, rules))] == [
        "$.results[0].score"
    ]
    # only the named numbers are tolerant; a missing or non-numeric score is still a failure
    off_by_line = {"results": [{"score": 0.8812, "line": 4}, {"score": 0.5, "line": 7}]}
    assert diff(golden, off_by_line, tolerant=tolerances(off_by_line, rules))
    gone = {"results": [{"line": 3}, {"score": "0.5", "line": 7}]}
    found = diff(golden, gone, tolerant=tolerances(gone, rules))
    assert [(d.path, d.note) for d in found] == [
        ("$.results[0].score", "missing"),
        ("$.results[1].score", ""),
    ]


def test_descending_by_checks_the_order_of_a_key() -> None:
    msg = {"results": [{"score": 0.9}, {"score": 0.5}, {"score": 0.5}]}
    assert check_matcher(msg, {"path": "$.results", "descendingBy": "score"}) == []
    msg["results"].append({"score": 0.7})
    [problem] = check_matcher(msg, {"path": "$.results", "descendingBy": "score"})
    assert problem.path == "$.results[3].score"
    by_score = {"path": "$.results", "descendingBy": "score"}
    assert check_matcher({"results": [{"score": "x"}]}, by_score)
    assert check_matcher({"results": 3}, by_score)


def test_in_json_checks_nodes_inside_a_string_holding_json() -> None:
    """Seed 003's LDIMS answers are JSON inside a text content item: `inJson` reaches in."""
    text = '{"results": [{"relevanceScore": 0.492}, {"relevanceScore": 0.696}]}'
    msg = {"result": {"content": [{"type": "text", "text": text}]}}
    outer = "$.result.content[0].text"
    ordered = {"path": outer, "inJson": "$.results", "descendingBy": "relevanceScore"}
    [problem] = check_matcher(msg, ordered)
    assert problem.path == f"{outer} $.results[1].relevanceScore" and problem.actual == 0.696
    score = {"path": outer, "inJson": "$.results[*].relevanceScore", "type": "number"}
    assert check_matcher(msg, score) == []
    [missing] = check_matcher(msg, {"path": outer, "inJson": "$.total", "equals": 2})
    assert missing.note == "no such node"
    not_json = {"result": {"content": [{"type": "text", "text": "Found 2"}]}}
    [bad] = check_matcher(not_json, score)
    assert bad.note == "not JSON" and bad.path == outer


def test_a_long_string_diff_shows_both_sides_around_the_first_difference() -> None:
    # The change sits at char 408 of a 900-character text: both sides show it, escaped,
    # with 80 characters of context each way and the cut ends marked.
    head, tail = "x" * 400 + "line one\n", "\t" + "y" * 490
    exp = {"text": head + "Found 3 results" + tail}
    got = {"text": head + "Found 4 results" + tail}
    (d,) = diff(exp, got)
    assert d.at == 415 and "char 415" in d.note
    expected_line, got_line = d.render().splitlines()[1:]
    assert expected_line.strip().startswith('expected …"') and expected_line.endswith("…")
    assert "line one\\nFound 3 results\\t" in expected_line
    assert "line one\\nFound 4 results\\t" in got_line
    shown = expected_line.split('"', 1)[1].rsplit('"', 1)[0]
    assert len(shown.replace("\\n", "\n").replace("\\t", "\t")) == 160


def test_differences_have_a_kind_to_group_root_causes_by() -> None:
    kinds = {d.path: d.kind for d in diff({"a": "x", "b": 1, "c": 2}, {"a": "y", "b": "1"})}
    assert kinds == {"$.a": "strings differ", "$.b": "string where integer was expected",
                     "$.c": "missing"}  # fmt: skip

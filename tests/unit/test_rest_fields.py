"""REST `POST /query` on the default surface refuses numbers and collections it cannot use
(REQ-HTTP-REST-FIELDS-001); the compat server keeps the original's silent coercion."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.http.rest import rest_query
from domain.profiles import ORIGINAL_2_8_3, SEED_000
from tests.fakes import InMemoryStore, app_over

T0 = "2025-01-01T00:00:00.000Z"
LEX = [{"type": "lex", "query": "kumquat"}]


@pytest.fixture
def services() -> Any:
    store = InMemoryStore()
    for i in range(12):
        body = f"# Note {i}\n\nkumquat harvest {i}\n"
        store.upsert_document("notes", f"n{i}.md", f"Note {i}", f"h{i:02d}", body, T0, T0)
    return app_over(store).services()


def _ask(services: Any, body: dict[str, Any], strict: bool = False) -> tuple[int, Any]:
    profile = ORIGINAL_2_8_3 if strict else SEED_000
    reply = rest_query(services, profile, body, strict)
    return reply.status, json.loads(reply.body)


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("limit", -5, "limit (must be a number at least 1)"),
        ("limit", 0, "limit (must be a number at least 1)"),
        ("limit", "abc", "limit (must be a number at least 1)"),
        ("candidateLimit", -1, "candidateLimit (must be a number at least 1)"),
        ("minScore", "x", "minScore (must be a number between 0 and 1)"),
        ("minScore", 2, "minScore (must be a number between 0 and 1)"),
        ("collections", "notes", "collections (must be an array of collection names)"),
        ("collections", [1], "collections (must be an array of collection names)"),
    ],
)
def test_a_field_it_cannot_use_is_a_400_naming_it(
    services: Any, field: str, value: Any, said: str
) -> None:
    status, answer = _ask(services, {"searches": LEX, field: value})
    assert (status, answer) == (400, {"error": f"Invalid field: {said}"})


def test_good_and_null_fields_still_search(services: Any) -> None:
    status, answer = _ask(services, {"searches": LEX, "limit": 3, "minScore": 0})
    assert status == 200 and len(answer["results"]) == 3
    status, answer = _ask(services, {"searches": LEX, "limit": None, "collections": None})
    assert status == 200 and len(answer["results"]) == 10


def test_the_compat_server_keeps_the_originals_coercion(services: Any) -> None:
    """2.8.3 slices with a negative limit (all but the last five) and ignores the rest."""
    status, answer = _ask(services, {"searches": LEX, "limit": -5}, strict=True)
    assert status == 200 and len(answer["results"]) == 7
    status, answer = _ask(services, {"searches": LEX, "collections": "notes"}, strict=True)
    assert status == 200 and len(answer["results"]) == 10

"""schemathesis against the REST routes of a real `qmd mcp --http` server on the fixture index,
on both surfaces, from the OpenAPI document in docs/spec/rest-openapi.yaml (loaded from the
file: the server has no route for it, an unknown path is 404 as in the original).

Checks: no server error (default surface), every status documented, content types and bodies
conform to the document. On `--compat 2.8.3` a failing search is the original's bare 500
(REQ-MCP-HTTP-005; documented): there the check is that every 500 is exactly that answer and
that the default surface, which runs the same code, never answers 500.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.fuzz import driver
from tests.http_harness import REPO, HttpServer, send

# The plugin that turns `SCHEMA.parametrize()` into tests; pyproject keeps it from autoloading
# (with it, hypothesis, about a second) into every other pytest run.
pytest_plugins = ["schemathesis.pytest.plugin"]

SCHEMA = schemathesis.openapi.from_path(REPO / "docs" / "spec" / "rest-openapi.yaml")
SCHEMA.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
CONFORMANCE = [
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
EXAMPLES = 25  # per operation and surface: about 20 s for the six in all
SURFACES = {"spec": [], "compat": ["--compat", "2.8.3"]}
TALLY: dict[str, dict[int, int]] = {}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return driver.fuzz_env(tmp_path_factory.mktemp("rest"))


@pytest.fixture(scope="module", params=sorted(SURFACES))
def server(env: dict[str, str], request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    args = ["mcp", "--http", "--port", "0", *SURFACES[request.param]]
    running = HttpServer(args, dict(env, PYTHONPATH=str(REPO))).start()
    yield request.param, running.port
    assert running.stop() == 0
    print(f"schemathesis REST {request.param}: statuses {TALLY.get(request.param)}")


def _bare_500(response: Any, compat: bool) -> None:
    """The only 500 there may be: the compat surface's copy of the original's."""
    if response.status_code != 500:
        return
    assert compat, f"the default surface answered 500: {response.text[:200]}"
    assert response.text == "Internal Server Error"
    assert "content-type" not in {k.lower() for k in response.headers}


@SCHEMA.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_rest_routes_conform_to_their_openapi_document(
    case: schemathesis.Case, server: tuple[str, int]
) -> None:
    surface, port = server
    compat = surface == "compat"
    checks = CONFORMANCE if compat else [not_a_server_error, *CONFORMANCE]
    response = case.call_and_validate(base_url=f"http://127.0.0.1:{port}", checks=checks)
    _bare_500(response, compat)
    counts = TALLY.setdefault(surface, {})
    counts[response.status_code] = counts.get(response.status_code, 0) + 1


def test_the_document_is_not_served(server: tuple[str, int]) -> None:
    """Unknown paths stay 404 `Not Found` (the original's answer), the document included."""
    _, port = server
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for path in ("/openapi.json", "/openapi.yaml", "/docs"):
        reply = send(connection, "GET", path)
        assert (reply.status, reply.body) == (404, b"Not Found"), path
    connection.close()
    assert Path(REPO / "docs" / "spec" / "rest-openapi.yaml").is_file()

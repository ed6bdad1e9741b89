"""One contract for every DocumentBackend (seed 003's LDIMS backend, REQ-LDIMS-DEPLOY-*): this
index through the LDIMS surface (`IndexBackend`), and a real `qmd` HTTP service over the same
index reached through the backend API (`HttpDocumentBackend`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.bootstrap import App, build_app
from adapters.ldims_api.client import HttpDocumentBackend
from adapters.mcp.ldims import LdimsSurface
from adapters.mcp.ldims_backend import IndexBackend
from domain.document_backend import BackendError, BackendSearch, DocumentBackend
from tests.http_harness import HttpServer
from tests.mcp_harness import fixture_env

DOCS = {
    "a.md": "---\nauthor: Ana\n---\n# Alpha plan\n\nThe alpha plan covers renewals.\n",
    "b.txt": "beta notes on renewals and pricing\n",
}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("backend-contract")
    for name, text in DOCS.items():
        (root / "docs").mkdir(exist_ok=True)
        (root / "docs" / name).write_text(text, encoding="utf-8")
    env = fixture_env(root)
    app = build_app(env=env, with_models=False)
    try:
        app.collections.add(str(root / "docs"), "c", "**/*.{md,txt}")
    finally:
        app.close()
    return env


@pytest.fixture(scope="module")
def served(indexed: dict[str, str]) -> Iterator[HttpServer]:
    server = HttpServer(["mcp", "--http", "--port", "0"], indexed).start()
    yield server
    server.stop()


@pytest.fixture(params=["index", "http"])
def backend(
    request: pytest.FixtureRequest, indexed: dict[str, str], tmp_path: Path
) -> Iterator[DocumentBackend]:
    if request.param == "http":
        server: HttpServer = request.getfixturevalue("served")
        yield HttpDocumentBackend(f"http://127.0.0.1:{server.port}/api/", 30)
        return
    app: App = build_app(env=indexed, with_models=False)
    try:
        services = app.services()
        yield IndexBackend(LdimsSurface(services, services.extraction, env={}))
    finally:
        app.close()


def test_search_answers_the_seed_payload(backend: DocumentBackend) -> None:
    found = backend.search(BackendSearch("renewals", 5, {"searchMode": "exact"}))
    assert found["isError"] is False
    assert {r["documentId"] for r in found["results"]} == {"c/a.md", "c/b.txt"}
    assert found["totalMatches"] == 2
    first = found["results"][0]
    assert set(first) == {
        "documentId",
        "documentName",
        "relevanceScore",
        "matchedContext",
        "metadata",
    }
    one = backend.search(BackendSearch("renewals", 1, {"submitter": "Ana"}))
    assert [r["documentId"] for r in one["results"]] == ["c/a.md"]


def test_no_match_is_an_empty_success(backend: DocumentBackend) -> None:
    found = backend.search(BackendSearch("zebra", 5, {"searchMode": "exact"}))
    assert found["results"] == [] and found["totalMatches"] == 0


def test_bad_input_is_invalid_input(backend: DocumentBackend) -> None:
    with pytest.raises(BackendError) as refused:
        backend.search(BackendSearch("renewals", 5, {"dateTo": "not a date"}))
    assert refused.value.code == "INVALID_INPUT"
    assert refused.value.details["field"] == "filters.dateTo"
    with pytest.raises(BackendError) as empty:
        backend.search(BackendSearch("  ", 5))
    assert empty.value.code == "INVALID_INPUT"


def test_a_file_answers_its_extracted_content(backend: DocumentBackend) -> None:
    found = backend.document_file("c/a.md")
    assert found.status == "completed" and found.name == "a.md" and found.format == "md"
    assert "The alpha plan covers renewals." in found.extracted_content
    assert found.extracted_at.endswith("Z")


def test_an_unknown_file_is_not_found(backend: DocumentBackend) -> None:
    assert backend.document_file("c/none.md").status == "not_found"
    assert backend.document_file("nothing").status == "not_found"

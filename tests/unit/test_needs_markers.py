"""The markers a bare dev install deselects by are kept by the code, not by memory
(tests/needs.py): a parameter that names PostgreSQL marks its test, and a helper that hands
out PostgreSQL, models or the original fails a running test that lacks the marker."""

from __future__ import annotations

import pytest

from tests import needs


@pytest.mark.parametrize("backend", ["sqlite", "markdown-postgres", "postgresql-like"])
def test_a_parameter_naming_postgres_marks_its_test(
    request: pytest.FixtureRequest, backend: str
) -> None:
    marked = request.node.get_closest_marker("postgres") is not None
    assert needs.markers_for(request.node) == ({"postgres"} if marked else set())
    assert marked == (backend == "markdown-postgres")  # a whole word, not a prefix


@pytest.mark.parametrize("marker", ["models", "original", "node"])
def test_an_unmarked_test_that_reaches_for_a_resource_fails(marker: str) -> None:
    with pytest.raises(pytest.fail.Exception, match=f"is not marked `{marker}`"):
        needs.require(marker, "the resource")


def test_an_unmarked_test_that_reaches_for_postgresql_fails() -> None:
    # (not a parameter of the test above: a `postgres` parameter marks its test)
    with pytest.raises(pytest.fail.Exception, match="is not marked `postgres`"):
        needs.require("postgres", "the local PostgreSQL")


@pytest.mark.official_suite
def test_the_official_suite_implies_node(request: pytest.FixtureRequest) -> None:
    assert "node" in needs.markers_for(request.node)
    assert request.node.get_closest_marker("node") is not None
    needs.require("node", "Node")  # marked (by the collection hook): no failure


def test_an_unmarked_test_that_reaches_for_the_real_model_set_fails() -> None:
    # the real set is opt-in: its tests must carry the marker a default run deselects
    from tests.model_fakes import real_prepared_model

    with pytest.raises(pytest.fail.Exception, match="is not marked `real_models`"):
        real_prepared_model("embed")
    assert needs.IMPLIED_MARKERS["real_models"] == "models"

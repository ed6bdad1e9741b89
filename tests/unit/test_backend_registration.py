"""A backend kind registered at run time (the tests' in-memory backend, tests/memory_backend)
is opened, labelled and told apart by its scheme like a production one, without joining
`KINDS`; a second kind of the same name, or one that would take every location, is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.storage.registry import (
    KINDS,
    BackendKind,
    is_server,
    kind_of,
    open_backend,
    redacted,
    register_kind,
)
from tests.backend_locations import LOCATIONS
from tests.memory_backend.backend import forget


@pytest.fixture(autouse=True)
def _forget_the_indexes() -> Iterator[None]:
    yield
    for name in ("shared-rows", "other-rows", "staged"):
        forget(f"memory:{name}")


def test_the_fake_kind_takes_its_scheme_and_no_other() -> None:
    assert "fake" in LOCATIONS  # importing the locations registered it
    assert kind_of("memory:one").name == "fake"
    assert kind_of("index-memory:one.sqlite").name == "sqlite"
    assert kind_of("postgresql://h/db").name == "postgresql"
    assert redacted("memory:one") == "memory:one"
    assert "fake" not in {kind.name for kind in KINDS}


def test_two_openings_of_one_location_share_its_rows() -> None:
    first = open_backend("memory:shared-rows")
    first.index.set_config_value("k", "v")
    second = open_backend("memory:shared-rows")
    assert second.index.get_config_value("k") == "v"
    assert open_backend("memory:other-rows").index.get_config_value("k") is None


def test_a_staged_index_replaces_the_location_on_publish() -> None:
    live = open_backend("memory:staged")
    staged = open_backend("memory:staged", staged=True)
    staged.index.set_config_value("k", "new")
    assert live.index.get_config_value("k") is None and not live.replaced()
    staged.dump.publish()
    assert live.replaced()
    assert open_backend("memory:staged").index.get_config_value("k") == "new"


def test_registering_is_refused_for_a_taken_name_or_no_scheme() -> None:
    fake = kind_of("memory:x")
    register_kind(fake)  # the same kind again: nothing changes
    assert kind_of("memory:x") is fake
    with pytest.raises(ValueError, match="registered already"):
        register_kind(BackendKind("sqlite", ("other:",), "x.backend", "X", "-", "-"))
    with pytest.raises(ValueError, match="its own scheme"):
        register_kind(BackendKind("catch-all", (), "x.backend", "X", "-", "-"))
    assert not is_server("notes/index.sqlite") and is_server("memory:x")

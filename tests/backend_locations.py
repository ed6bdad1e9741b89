"""A fresh, empty location for each registered storage backend, by `BackendKind.name`: what
the contract tests open through `adapters.storage.registry.open_backend`. A new backend adds
its own here (tests/contract/test_backend_contract.py checks every kind has one). The tests'
in-memory backend (tests/memory_backend) is registered here, for this process only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from adapters.storage.backend import Backend
from adapters.storage.registry import BackendKind, open_backend, register_kind
from tests.memory_backend.backend import forget
from tests.postgres_server import drop_schema, fresh_schema_url

register_kind(
    BackendKind("fake", ("memory:",), "tests.memory_backend.backend", "in memory", "none", "-")
)


@contextmanager
def _sqlite_location(tmp_path: Path) -> Iterator[str]:
    yield str(tmp_path / "cache" / "qmd" / "index.sqlite")


@contextmanager
def _postgres_location(tmp_path: Path) -> Iterator[str]:
    url, schema = fresh_schema_url()
    try:
        yield url
    finally:
        drop_schema(schema)


@contextmanager
def _memory_location(tmp_path: Path) -> Iterator[str]:
    location = f"memory:{tmp_path}"
    try:
        yield location
    finally:
        forget(location)


LOCATIONS: dict[str, Callable[[Path], AbstractContextManager[str]]] = {
    "fake": _memory_location,
    "sqlite": _sqlite_location,
    "postgresql": _postgres_location,
}


# contract fixture ids (`postgres` carries the marker, tests/needs.py) -> registered names
BACKENDS = {"fake": "fake", "sqlite": "sqlite", "postgres": "postgresql"}


@contextmanager
def opened_backend(fixture_id: str, tmp_path: Path) -> Iterator[Backend]:
    """The backend registered under a contract fixture's id, opened through the registry at a
    new location, and closed after."""
    with LOCATIONS[BACKENDS[fixture_id]](tmp_path) as location:
        backend = open_backend(location)
        try:
            yield backend
        finally:
            backend.close()

"""Which backend package opens an index location: one line per backend, keyed by URL scheme
(anything else is a SQLite file). A package is imported only when a location of its kind is
opened (the PostgreSQL driver costs a `qmd` start about 0.2 s)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from adapters.backend import Backend, Opener


@dataclass(frozen=True)
class BackendKind:
    name: str
    schemes: tuple[str, ...]  # location prefixes; () matches any location (a file path)
    module: str  # has `open_backend(location, env=None, *, staged=False) -> Backend`

    def handles(self, location: str) -> bool:
        return not self.schemes or location.startswith(self.schemes)


# First match wins; the file backend last.
KINDS: tuple[BackendKind, ...] = (
    BackendKind("postgresql", ("postgresql://", "postgres://"), "adapters.postgres.backend"),
    BackendKind("sqlite", (), "adapters.sqlite.backend"),
)


def kind_of(location: str) -> BackendKind:
    return next(kind for kind in KINDS if kind.handles(location))


def open_backend(
    location: str, env: Mapping[str, str] | None = None, *, staged: bool = False
) -> Backend:
    """The index at `location` (a SQLite file path or a database URL), opened by its
    backend. `staged`: a new, empty index written aside that appears at `location` only on
    `backend.dump.publish()` (what `qmd index copy` writes into)."""
    module = importlib.import_module(kind_of(location).module)
    opener = cast(Opener, module.open_backend)
    return opener(location, env, staged=staged)

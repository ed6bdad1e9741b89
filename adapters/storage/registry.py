"""Which backend package opens an index location: one line per backend, keyed by URL scheme
(anything else is a SQLite file). A package is imported only when a location of its kind is
opened or labelled (the PostgreSQL driver costs a `qmd` start about 0.2 s). The registry names
each package by a string, here and nowhere else outside it (tests/unit/test_backend_guard.py):
what the rest of the program knows of a backend, it asks its kind."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, cast

from adapters.redaction import redact
from adapters.storage.backend import Backend, Leftover, Opener


@dataclass(frozen=True)
class BackendKind:
    """One backend as the rest of the program may know it: how its locations look, where its
    package is, and the words `status` and `doctor` use for it (the CLI reads these, never a
    backend's name)."""

    name: str  # `App.backend`
    schemes: tuple[str, ...]  # location prefixes; () matches any location (a file path)
    module: str  # has `open_backend(location, env=None, *, staged=False) -> Backend`
    label: str  # for people: `status`'s "Backend:" line, `doctor`
    vector_extension: str  # what gives it vector search, and the word for "it works"
    vector_ready: str
    # a server's location rules, imported only for a location of this kind:
    # `index_label(location)` and `config_label(location)`; None for a file backend
    location_rules: str | None = None

    def handles(self, location: str) -> bool:
        return not self.schemes or location.startswith(self.schemes)

    @property
    def embedded(self) -> bool:
        """A file beside the user, not a server: the default, which `status` need not name."""
        return not self.schemes

    def index_label(self, location: str) -> str:
        """A file-name-safe name of the server index at `location`, without its credentials,
        for what lives beside it on disk (seed 004's memory folder)."""
        return str(self._rules().index_label(location))

    def config_label(self, location: str) -> str:
        """A file-name-safe name of the server index at `location`, without its credentials,
        for its own `index.yml` (two servers of one machine never share one)."""
        return str(self._rules().config_label(location))

    def redacted(self, location: str) -> str:
        """`location` as people may see it: every kind's by the one set of rules
        (adapters/redaction.py, REQ-SEC-SECRET-001), which leaves a plain file path as it is."""
        return redact(location)

    def _rules(self) -> Any:
        if self.location_rules is None:
            raise ValueError(f"a {self.name} index is a file: its location is its own label")
        return importlib.import_module(self.location_rules)


# First match wins; the file backend last.
KINDS: tuple[BackendKind, ...] = (
    BackendKind(
        "postgresql",
        ("postgresql://", "postgres://"),
        "adapters.postgres.backend",
        "PostgreSQL (pgvector)",
        "pgvector",
        "installed",
        "adapters.postgres.url",
    ),
    BackendKind("sqlite", (), "adapters.sqlite.backend", "SQLite", "sqlite-vec", "loaded"),
)

# Kinds registered at run time (the tests' in-memory backend), kept apart from `KINDS`: the
# guards over production code read `KINDS` alone, so a test kind's package is never one that
# production code must leave alone, nor a word the transports must not decide by.
_REGISTERED: list[BackendKind] = []


def register_kind(kind: BackendKind) -> None:
    """Add a backend kind for this process, matched before the production ones (whose file
    backend takes any location). Registering one twice is a no-op."""
    if kind in _REGISTERED:
        return
    if any(kind.name == known.name for known in all_kinds()):
        raise ValueError(f"a backend kind named {kind.name!r} is registered already")
    if not kind.schemes:
        raise ValueError(f"a registered backend kind needs its own scheme: {kind.name!r}")
    _REGISTERED.append(kind)


def all_kinds() -> tuple[BackendKind, ...]:
    """Every kind this process can open: those registered at run time, then `KINDS`."""
    return (*_REGISTERED, *KINDS)


def kind_of(location: str) -> BackendKind:
    return next(kind for kind in all_kinds() if kind.handles(location))


def kind_named(name: str) -> BackendKind:
    """The kind an opened app reports as `App.backend`."""
    return next(kind for kind in all_kinds() if kind.name == name)


def is_server(location: str | None) -> bool:
    """Whether `location` names an index on a server (a database URL), not a file."""
    return bool(location) and not kind_of(str(location)).embedded


def server_schemes() -> tuple[str, ...]:
    """The URL prefixes of every backend that is a server (what `--index-url` accepts)."""
    return tuple(scheme for kind in all_kinds() for scheme in kind.schemes)


def storage_failure(error: BaseException, where: str, kept: str | None = None) -> str | None:
    """The user-facing message for a backend failing to write (a full disk: the failing
    transaction was rolled back), or None when `error` is no such failure. `kept`: what the
    command had committed before, and what to do next (default: the backend's general words).
    Only backends this process has opened are asked: another cannot have raised it, and is
    not imported for the question."""
    for kind in all_kinds():
        module = sys.modules.get(kind.module)
        explain = getattr(module, "storage_failure", None)
        if not callable(explain):
            continue
        message = explain(error, where) if kept is None else explain(error, where, kept)
        if message is not None:
            return str(message)
    return None


def staging_leftovers(
    location: str, file_lock: Callable[[str], AbstractContextManager[bool]]
) -> list[Leftover]:
    """What copies that did not finish left beside `location` (staging files in its folder,
    empty staging schemas in its database), asked of its backend. `file_lock(path)` yields
    whether the writers' lock of the index file `path` is free (then held for the block)."""
    module = importlib.import_module(kind_of(location).module)
    find = getattr(module, "staging_leftovers", None)
    return list(find(location, file_lock)) if callable(find) else []


def open_backend(
    location: str, env: Mapping[str, str] | None = None, *, staged: bool = False
) -> Backend:
    """The index at `location` (a SQLite file path or a database URL), opened by its
    backend. `staged`: a new, empty index written aside that appears at `location` only on
    `backend.dump.publish()` (what `qmd index copy` writes into)."""
    module = importlib.import_module(kind_of(location).module)
    opener = cast(Opener, module.open_backend)
    return opener(location, env, staged=staged)


def redacted(location: str) -> str:
    """An index location as people may see it: a database URL without its secrets, a file
    path as it is (status lines, lock files, refusals), by the one set of rules
    (adapters/redaction.py, REQ-SEC-SECRET-001)."""
    return kind_of(location).redacted(location)

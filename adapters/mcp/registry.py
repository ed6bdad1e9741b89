"""The MCP surfaces by name. A surface is one module (its tool table, error presenter,
resources and prompts) plus one `register_surface` line here; every transport serves any
registered surface, and `qmd mcp --surface NAME` picks one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapters.mcp.compat import COMPAT_VERSION, CompatSurface
from adapters.mcp.projmem import ProjmemSurface
from adapters.mcp.protocol import Surface
from adapters.mcp.root_guard import RootGuard
from adapters.mcp.spec import SpecSurface
from domain.errors import INVALID_ARGUMENT, QmdError
from domain.usecases.services import Services


@dataclass(frozen=True)
class SurfaceContext:
    """What a surface may need besides the application: the server's version, the
    `--force-root` folder (the services are already scoped to it) and the user's home."""

    version: str
    force_root: str | None = None
    home: str | None = None


SurfaceFactory = Callable[[Services, SurfaceContext], Surface]

_FACTORIES: dict[str, SurfaceFactory] = {}
_ALIASES: dict[str, str] = {}


def register_surface(name: str, factory: SurfaceFactory, aliases: tuple[str, ...] = ()) -> None:
    _FACTORIES[name] = factory
    for alias in aliases:
        _ALIASES[alias] = name


def surface_names() -> list[str]:
    return sorted(_FACTORIES)


def canonical_surface(name: str) -> str:
    """The registered name for `name` or one of its aliases; `invalid-argument` otherwise."""
    resolved = _ALIASES.get(name, name)
    if resolved not in _FACTORIES:
        known = ", ".join(surface_names())
        raise QmdError(INVALID_ARGUMENT, f"Unknown MCP surface {name!r}; available: {known}")
    return resolved


def create_surface(name: str, services: Services, context: SurfaceContext) -> Surface:
    return _FACTORIES[canonical_surface(name)](services, context)


register_surface(
    "spec",
    lambda services, ctx: SpecSurface(services, ctx.version, RootGuard(ctx.force_root, ctx.home)),
    aliases=("default",),
)
register_surface(
    f"compat-{COMPAT_VERSION}", lambda services, _ctx: CompatSurface(services), (COMPAT_VERSION,)
)

register_surface("projmem", lambda services, _ctx: ProjmemSurface(services))

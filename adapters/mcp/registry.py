"""The MCP surfaces by name. A surface is one module (a `BaseSurface` subclass: its tools,
error presenter, resources and prompts) plus one `register_surface` line here; every transport
serves any registered surface, and `qmd mcp --surface NAME` picks one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from adapters.fs.scope import ScopePolicy
from adapters.mcp.compat import COMPAT_VERSION, CompatSurface
from adapters.mcp.ldims import LdimsSurface
from adapters.mcp.ldims_backend import RemoteLdims
from adapters.mcp.memorize import MemorizeSurface
from adapters.mcp.projmem import ProjmemSurface
from adapters.mcp.protocol import Surface
from adapters.mcp.spec import SpecSurface
from adapters.mcp.tools import SurfaceFacts
from domain.document_backend import DocumentBackend
from domain.errors import INVALID_ARGUMENT, UNAVAILABLE, QmdError
from domain.usecases.memorize import Memorizer
from domain.usecases.services import Services


@dataclass(frozen=True)
class SurfaceContext:
    """What a surface may need besides the application: the server's version, its scope
    policy and the operator's limits."""

    version: str
    # the process's one scope policy (`--force-root`, trust; adapters/fs/scope.py), the one
    # the services were scoped with: a tool that reads files judges references by it
    scope: ScopePolicy = field(default_factory=ScopePolicy)
    # seed 004's memory, opened once per process on first use (the memorize surface)
    memory: Callable[[], Memorizer] | None = None
    max_results: int | None = None  # the operator's hard limit on search results, if any
    # the server's request time limit (--request-timeout, QMD_REQUEST_TIMEOUT or seed 003's
    # MCP_REQUEST_TIMEOUT_SECONDS), for a tool that times itself; None: its own default
    request_timeout_s: float | None = None
    # seed 003's LDIMS backend (LDIMS_API_BASE_URL), for a surface that serves from one;
    # None: the local index
    document_backend: DocumentBackend | None = None


SurfaceFactory = Callable[[Services, SurfaceContext], Surface]

DEFAULT_SURFACE = "spec"
_FACTORIES: dict[str, SurfaceFactory] = {}
_FACTS: dict[str, SurfaceFacts] = {}
_ALIASES: dict[str, str] = {}


def register_surface(
    name: str,
    factory: SurfaceFactory,
    aliases: tuple[str, ...] = (),
    *,
    facts: SurfaceFacts,
) -> None:
    """`facts`: what the transports and the CLI must know of each tool (runs a model, writes,
    waits on the client, its time budget) and of the surface; they read these, never a name."""
    _FACTORIES[name] = factory
    _FACTS[name] = facts
    for alias in aliases:
        _ALIASES[alias] = name


def surface_aliases() -> list[str]:
    return sorted(_ALIASES)


def surface_facts(name: str) -> SurfaceFacts:
    return _FACTS[canonical_surface(name)]


def original_surface(release: str) -> str | None:
    """The registered surface that answers as the original QMD `release`, if any."""
    return next((n for n, f in sorted(_FACTS.items()) if f.original == release), None)


def original_releases() -> list[str]:
    return sorted({f.original for f in _FACTS.values() if f.original is not None})


def reads_working_env_file(name: str) -> bool:
    return surface_facts(name).reads_working_env_file


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
    DEFAULT_SURFACE,
    lambda services, ctx: SpecSurface(services, ctx.version, ctx.scope, ctx.max_results),
    aliases=("default",),
    facts=SpecSurface.facts,
)
register_surface(
    f"compat-{COMPAT_VERSION}",
    lambda services, _ctx: CompatSurface(services),
    (COMPAT_VERSION,),
    facts=CompatSurface.facts,
)
# seed 003: SEARCH_TIMEOUT is its own answer to a slow search; its service reads `.env`
register_surface(
    "ldims",
    lambda services, ctx: LdimsSurface(
        services,
        services.extraction,
        hard_limit=ctx.max_results,
        timeout_s=ctx.request_timeout_s,
        remote=RemoteLdims(ctx.document_backend) if ctx.document_backend is not None else None,
    ),
    facts=LdimsSurface.facts,
)


def _memorize(_services: Services, context: SurfaceContext) -> MemorizeSurface:
    if context.memory is None:
        raise QmdError(UNAVAILABLE, "The memorize surface needs a memory; none was configured")
    return MemorizeSurface(context.memory(), context.version)


register_surface("memorize", _memorize, facts=MemorizeSurface.facts)

register_surface(
    "projmem", lambda services, _ctx: ProjmemSurface(services), facts=ProjmemSurface.facts
)

"""The MCP surfaces by name. A surface is one module (its tool table, error presenter,
resources and prompts) plus one `register_surface` line here; every transport serves any
registered surface, and `qmd mcp --surface NAME` picks one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapters.fs.scope import RootGuard
from adapters.mcp.compat import COMPAT_VERSION, CompatSurface
from adapters.mcp.ldims import LdimsSurface
from adapters.mcp.ldims_backend import RemoteLdims
from adapters.mcp.memorize import MemorizeSurface
from adapters.mcp.projmem import ProjmemSurface
from adapters.mcp.protocol import Surface
from adapters.mcp.spec import SpecSurface
from domain.document_backend import DocumentBackend
from domain.errors import INVALID_ARGUMENT, UNAVAILABLE, QmdError
from domain.usecases.memorize import Memorizer
from domain.usecases.services import Services


@dataclass(frozen=True)
class SurfaceContext:
    """What a surface may need besides the application: the server's version, the
    `--force-root` folder (the services are already scoped to it), the user's home and the
    operator's limits."""

    version: str
    force_root: str | None = None
    home: str | None = None
    # seed 004's memory, opened once per process on first use (the memorize surface)
    memory: Callable[[], Memorizer] | None = None
    max_results: int | None = None  # the operator's hard limit on search results, if any
    # the server's request time limit (--request-timeout, QMD_REQUEST_TIMEOUT or seed 003's
    # MCP_REQUEST_TIMEOUT_SECONDS), for a surface that times itself; None: its own default
    request_timeout_s: float | None = None
    # seed 003's LDIMS backend (LDIMS_API_BASE_URL), for a surface that serves from one;
    # None: the local index
    document_backend: DocumentBackend | None = None


SurfaceFactory = Callable[[Services, SurfaceContext], Surface]

_FACTORIES: dict[str, SurfaceFactory] = {}
_ALIASES: dict[str, str] = {}
_TALKS_BACK: set[str] = set()
_TIMES_ITSELF: set[str] = set()
_READS_WORKING_ENV_FILE: set[str] = set()
# How much longer the transport waits for a surface that answers its own timeouts (LDIMS's
# SEARCH_TIMEOUT, given at the configured time exactly) before it answers with its generic
# timeout error instead: only enough for the surface's answer to win the race.
OWN_TIMEOUT_GRACE_S = 0.5


def register_surface(
    name: str,
    factory: SurfaceFactory,
    aliases: tuple[str, ...] = (),
    talks_back: bool = False,
    times_itself: bool = False,
    reads_working_env_file: bool = False,
) -> None:
    """`talks_back`: the surface's tools send the client requests while they run (sampling),
    so the 2025-era HTTP transport answers its POSTs as a live event stream. `times_itself`:
    the surface answers a request past the time limit in its own words, so the transport's
    own limit comes a little later (`transport_timeout`). `reads_working_env_file`: the
    surface's service is configured by a `.env` in the working folder when no `--env-file`
    names another (seed 003 §7.1)."""
    _FACTORIES[name] = factory
    for alias in aliases:
        _ALIASES[alias] = name
    if talks_back:
        _TALKS_BACK.add(name)
    if times_itself:
        _TIMES_ITSELF.add(name)
    if reads_working_env_file:
        _READS_WORKING_ENV_FILE.add(name)


def talks_back(name: str) -> bool:
    return canonical_surface(name) in _TALKS_BACK


def reads_working_env_file(name: str) -> bool:
    return canonical_surface(name) in _READS_WORKING_ENV_FILE


def transport_timeout(name: str, timeout_s: float) -> float:
    """The transport's time limit for requests to surface `name` under a configured limit."""
    return (
        timeout_s + OWN_TIMEOUT_GRACE_S if canonical_surface(name) in _TIMES_ITSELF else timeout_s
    )


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
    lambda services, ctx: SpecSurface(
        services, ctx.version, RootGuard(ctx.force_root, ctx.home), ctx.max_results
    ),
    aliases=("default",),
)
register_surface(
    f"compat-{COMPAT_VERSION}", lambda services, _ctx: CompatSurface(services), (COMPAT_VERSION,)
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
    times_itself=True,
    reads_working_env_file=True,
)


def _memorize(_services: Services, context: SurfaceContext) -> MemorizeSurface:
    if context.memory is None:
        raise QmdError(UNAVAILABLE, "The memorize surface needs a memory; none was configured")
    return MemorizeSurface(context.memory(), context.version)


register_surface("memorize", _memorize, talks_back=True)

register_surface("projmem", lambda services, _ctx: ProjmemSurface(services))

"""The worker pools moved to `adapters/mcp/workers.py` (stdio uses them too); these names
stay importable from here for the HTTP service's modules."""

from adapters.mcp.workers import (
    BusyError,
    CancelledJobError,
    Job,
    Worker,
    WorkerFactory,
    WorkerPools,
)

__all__ = [
    "BusyError",
    "CancelledJobError",
    "Job",
    "Worker",
    "WorkerFactory",
    "WorkerPools",
]

"""The tests' in-memory storage backend: the fakes of tests/fakes.py opened as one `Backend`
through `adapters.storage.registry.open_backend` at a `memory:NAME` location (registered by
tests/backend_locations.py, never by production code)."""

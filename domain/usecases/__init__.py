"""Use cases: orchestration over the ports, free of I/O."""

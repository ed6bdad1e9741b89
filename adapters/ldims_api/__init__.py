"""Seed 003's LDIMS backend API, as a client: the LDIMS MCP service in front of a backend."""

"""The pure core of QMD: query parsing, ranking, fusion, snippets, paths and use cases.

Nothing in this package performs I/O or imports a storage, model or transport library
(enforced by import-linter, see pyproject.toml).
"""

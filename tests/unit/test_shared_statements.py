"""The statements both index stores share are written once with SQLite's `?` placeholders;
PostgreSQL runs them through `pyformat`, which must turn each `?` into psycopg's `%s` and keep
a literal `%` one character (psycopg reads a lone `%` as the start of a placeholder)."""

from __future__ import annotations

from adapters.postgres.connection import pyformat


def test_each_placeholder_becomes_psycopg_style() -> None:
    assert pyformat("SELECT a FROM t WHERE b = ? AND c IN (?, ?)") == (
        "SELECT a FROM t WHERE b = %s AND c IN (%s, %s)"
    )


def test_a_literal_percent_is_doubled_so_psycopg_reads_one() -> None:
    assert pyformat("SELECT 1 WHERE x LIKE '%a' AND y = ?") == (
        "SELECT 1 WHERE x LIKE '%%a' AND y = %s"
    )


def test_a_statement_without_placeholders_is_unchanged() -> None:
    assert pyformat("DELETE FROM llm_cache") == "DELETE FROM llm_cache"

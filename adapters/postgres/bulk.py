"""Bulk loading with COPY (`qmd index copy`, the scale benchmark).

Rows go in through `COPY ... FROM STDIN (FORMAT BINARY)`: pgvector's binary input format is a
16-bit dimension, 16 unused bits, then big-endian float4s, so a vector is written without ever
being formatted as text (about 4 KB of text per 384-dimension vector otherwise).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg import sql

_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_TRAILER = struct.pack(">h", -1)
_FLUSH_BYTES = 1 << 20


def _field(value: Any, kind: str) -> bytes:
    if value is None:
        return struct.pack(">i", -1)
    if kind == "text":
        data = str(value).encode("utf-8")
    elif kind == "int4":
        data = struct.pack(">i", int(value))
    elif kind == "int8":
        data = struct.pack(">q", int(value))
    elif kind == "bytea":
        data = bytes(value)
    elif kind == "vector":
        data = vector_binary(value)
    else:  # pragma: no cover - a programming error
        raise ValueError(f"unknown COPY field kind {kind}")
    return struct.pack(">i", len(data)) + data


def vector_binary(value: Sequence[float] | bytes) -> bytes:
    """pgvector's binary form; `bytes` are taken as little-endian float32s (a numpy row's
    `tobytes()`, SQLite-vec's blob)."""
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        count = len(raw) // 4
        floats = struct.unpack(f"<{count}f", raw)
    else:
        floats = tuple(float(x) for x in value)
        count = len(floats)
    return struct.pack(f">hh{count}f", count, 0, *floats)


def copy_rows(
    conn: psycopg.Connection[Any],
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Iterable[Sequence[Any]],
) -> int:
    """COPY `rows` into `table`; `columns` are (name, kind), kind one of text, int4, int8,
    bytea, vector."""
    statement = _copy_statement(table, columns)
    kinds = [kind for _, kind in columns]
    count = 0
    prefix = struct.pack(">h", len(kinds))
    with conn.cursor() as cur, cur.copy(statement) as copy:
        buffer = bytearray(_HEADER)
        for row in rows:
            buffer += prefix
            for value, kind in zip(row, kinds, strict=True):
                buffer += _field(value, kind)
            count += 1
            if len(buffer) >= _FLUSH_BYTES:
                copy.write(bytes(buffer))
                buffer.clear()
        buffer += _TRAILER
        copy.write(bytes(buffer))
    return count


def copy_buffer(columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]]) -> bytes:
    """`rows` as COPY's binary data, whole (for `copy_data`: made apart from the sending,
    e.g. by another thread)."""
    kinds = [kind for _, kind in columns]
    prefix = struct.pack(">h", len(kinds))
    buffer = bytearray(_HEADER)
    for row in rows:
        buffer += prefix
        for value, kind in zip(row, kinds, strict=True):
            buffer += _field(value, kind)
    buffer += _TRAILER
    return bytes(buffer)


def copy_data(
    conn: psycopg.Connection[Any], table: str, columns: Sequence[tuple[str, str]], data: bytes
) -> None:
    """COPY into `table` the binary data `copy_buffer` made."""
    with conn.cursor() as cur, cur.copy(_copy_statement(table, columns)) as copy:
        copy.write(data)


def _copy_statement(table: str, columns: Sequence[tuple[str, str]]) -> sql.Composed:
    return sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(table), sql.SQL(", ").join(sql.Identifier(name) for name, _ in columns)
    )

"""The rows of a whole PostgreSQL index for `qmd index copy` (`IndexDump`): read through a
server-side cursor, and written into an empty schema with COPY in one transaction, the
full-text rows rebuilt by this adapter and the HNSW index built once after the vectors are
loaded. A staged destination is a schema this copy may create: dropped again unless
`publish` is reached."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from adapters.postgres.bulk import copy_rows
from adapters.postgres.connection import drop_schema
from adapters.postgres.fts import fts_params, fts_row_sql
from adapters.postgres.schema import VECTORS_HNSW_DDL
from adapters.postgres.staging import unmark_statement
from adapters.postgres.store import PostgresIndex
from adapters.storage.backend import IndexDump, Table
from adapters.storage.sql_dump import BATCH, TableReads


def _counting(rows: Iterator[Any], tick: Callable[[int], None]) -> Iterator[Any]:
    done = 0
    for row in rows:
        yield row
        done += 1
        if done == BATCH:
            tick(done)
            done = 0
    tick(done)


class PostgresDump(TableReads):
    """`IndexDump` of one open PostgreSQL index (staged: `created` says whether opening it
    made its schema, dropped again on close without `publish`)."""

    own_config_keys: tuple[str, ...] = ()
    _INSERTION_ORDER = "ord"

    def __init__(self, index: PostgresIndex, staged: bool = False, created: bool = False) -> None:
        self._index = index
        self._staged = staged
        self._created = created
        self._published = False

    def select(self, statement: str) -> Iterator[tuple[Any, ...]]:
        with self._index.connection() as conn, conn.cursor(name="qmd_copy") as cur:
            cur.itersize = BATCH
            cur.execute(statement)
            yield from cur

    def _count_tables(self, name: str) -> str:
        return f"SELECT COUNT(*) FROM (SELECT to_regclass('{name}') AS t) r WHERE t IS NOT NULL"

    def _sequence_value(self, table: str) -> str:
        return f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {table}_id_seq"

    def has_vectors(self) -> bool:
        return self._index.has_vector_index()

    def vector_rows(self) -> Iterator[tuple[str, int, bytes]]:
        if not self.has_vectors():
            return
        for digest, seq, values in self.select(
            "SELECT hash, seq, embedding::real[] FROM vectors_vec ORDER BY hash, seq"
        ):
            yield str(digest), int(seq), struct.pack(f"<{len(values)}f", *values)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        with self._index.transaction(), self._index.connection() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield

    def load(
        self,
        source: IndexDump,
        tables: Sequence[Table],
        tick: Callable[[int], None],
        verify: Callable[[], None],
    ) -> None:
        dest = self._index
        skip = (*source.own_config_keys, *self.own_config_keys)
        with dest.transaction(), dest.connection() as conn:
            for table in tables:
                rows = _counting(source.read_table(table, skip), tick)
                copy_rows(conn, table.name, table.columns, rows)
            conn.execute(
                "SELECT setval(pg_get_serial_sequence('documents', 'id'), "
                "GREATEST((SELECT MAX(id) FROM documents), 1))"
            )
            for table in tables:
                last = source.high_water(table) if table.serial else 0
                if last:
                    conn.execute(
                        "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", (table.name, last)
                    )
            active = conn.execute(
                "SELECT d.id, d.collection, d.path, d.title, content.doc FROM documents d "
                "JOIN content ON content.hash = d.hash WHERE d.active = 1 ORDER BY d.id"
            ).fetchall()
            with conn.cursor() as cur:
                cur.executemany(fts_row_sql(), [fts_params(int(r[0]), *r[1:]) for r in active])
            if self._created and dest.schema:  # goes with the rows: commits only with them
                conn.execute(unmark_statement(dest.schema))
            vectors = source.vector_rows()
            first = next(vectors, None)
            if first is None:
                verify()
                return
            dest.ensure_vector_table(conn, len(first[2]) // 4)
            conn.execute("DROP INDEX IF EXISTS idx_vectors_vec_hnsw")

            def chained() -> Iterator[tuple[str, int, bytes]]:
                yield first
                yield from vectors

            copy_rows(
                conn,
                "vectors_vec",
                (("hash", "text"), ("seq", "int4"), ("embedding", "vector")),
                _counting(chained(), tick),
            )
            conn.execute(VECTORS_HNSW_DDL)
            verify()  # before COMMIT: a copy that does not add up leaves nothing

    def publish(self) -> None:
        self._published = True  # the rows were committed by `load`

    def close(self) -> None:
        """Close the pool; a schema a staged open created is dropped unless published."""
        self._index.close()
        if self._staged and self._created and not self._published:
            drop_schema(self._index.url)  # made for this copy: leave the database as it was

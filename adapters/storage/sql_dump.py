"""How `qmd index copy` reads a store's tables (`IndexDump`), the same on every store
(`adapters.sqlite`, `adapters.postgres`): each backend says only how it lists a table, in what
order it keeps rows, where its id sequences live, and runs the statements."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from adapters.storage.backend import Table

BATCH = 2000  # rows read or written at a time


class TableReads:
    """`has_table`, `read_table` and `high_water` of an `IndexDump` over its `select`."""

    # the column that keeps the order rows were added in (`Table.order == "insertion"`)
    _INSERTION_ORDER = "rowid"

    def select(self, statement: str) -> Iterator[tuple[Any, ...]]:
        raise NotImplementedError

    def _count_tables(self, name: str) -> str:
        """A statement answering 1 when the table `name` exists, else 0."""
        raise NotImplementedError

    def _sequence_value(self, table: str) -> str:
        """A statement answering the last id `table`'s sequence handed out (0: none)."""
        raise NotImplementedError

    def has_table(self, name: str) -> bool:
        return bool(next(iter(self.select(self._count_tables(name))))[0])

    def read_table(self, table: Table, skip_keys: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        if table.on_demand and not self.has_table(table.name):
            return iter(())
        columns = ", ".join(name for name, _ in table.columns)
        where = f" WHERE {table.where}" if table.where else ""
        order = self._INSERTION_ORDER if table.order == "insertion" else table.order
        rows = self.select(f"SELECT {columns} FROM {table.name}{where} ORDER BY {order}")
        if table.name == "store_config":
            return (row for row in rows if row[0] not in skip_keys)
        return rows

    def high_water(self, table: Table) -> int:
        """The largest id `table` ever handed out: its largest row's, or a deleted one's."""
        if not self.has_table(table.name):
            return 0
        largest = int(next(self.select(f"SELECT COALESCE(MAX(id), 0) FROM {table.name}"))[0])
        return max(largest, int(next(self.select(self._sequence_value(table.name)))[0] or 0))

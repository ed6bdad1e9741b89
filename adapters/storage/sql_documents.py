"""A document's writes both index stores share (`adapters.sqlite`, `adapters.postgres`):
`upsert_document` and `deactivate_documents` of the DocumentStore port (`DocumentWrites`),
each one transaction on one connection. Statements use SQLite's `?` placeholders (PostgreSQL
runs them through `pyformat`); each backend names its own content insert and full-text
upkeep (`DocumentDialect`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from domain.ports import DocumentWrite, UpsertOutcome

# an indexing run that wrote at least 1/TIDY_SHARE of the active documents reorganises the
# lexical index (REQ-INDEX-FTS-TIDY-001, REQ-INDEX-FTS-TIDY-002)
TIDY_SHARE = 20


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...


class Statements(Protocol):
    """A connection that runs `?` statements (SQLite's; PostgreSQL's through `pyformat`)."""

    def execute(self, statement: str, params: Sequence[Any] = (), /) -> Cursor: ...


@dataclass(frozen=True)
class DocumentDialect:
    """What differs between the stores when a document is written."""

    # (hash, doc, created_at) into `content`, a hash stored already left as it is
    insert_content: str
    # whether `INSERT … RETURNING id` answers the new row's id (else it is looked up)
    returning_id: bool
    # removes the full-text row of the deactivated (collection, path); None: a trigger does
    unindex: str | None


INSERT_DOCUMENT = (
    "INSERT INTO documents (collection, path, title, hash, created_at, modified_at, active) "
    "VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT (collection, path) DO UPDATE SET "
    "title = excluded.title, hash = excluded.hash, modified_at = excluded.modified_at, active = 1"
)


# one transaction's connection, and how it writes a document's full-text row by id
Writing = tuple[Statements, Callable[[int], None]]


class DocumentWrites:
    """The DocumentStore's writes over `_writing` (one transaction each) and `_DOCUMENTS`."""

    _DOCUMENTS: DocumentDialect

    def _writing(self) -> AbstractContextManager[Writing]:
        raise NotImplementedError

    def upsert_document(
        self,
        collection: str,
        path: str,
        title: str,
        content_hash: str,
        body: str,
        created_at: str,
        modified_at: str,
    ) -> UpsertOutcome:
        """Index the active document at (collection, path): unchanged when its hash and
        title are; else its row updated (or made, reviving an inactive one) and its full
        text written again."""
        dialect = self._DOCUMENTS
        with self._writing() as (db, write_fts):
            existing = db.execute(
                "SELECT id, hash, title FROM documents "
                "WHERE collection = ? AND path = ? AND active = 1",
                (collection, path),
            ).fetchone()
            if existing is not None:
                doc_id, old_hash, old_title = int(existing[0]), existing[1], existing[2]
                if old_hash == content_hash:
                    if old_title == title:
                        return UpsertOutcome("unchanged")
                    db.execute(
                        "UPDATE documents SET title = ?, modified_at = ? WHERE id = ?",
                        (title, modified_at, doc_id),
                    )
                else:
                    db.execute(dialect.insert_content, (content_hash, body, modified_at))
                    db.execute(
                        "UPDATE documents SET title = ?, hash = ?, modified_at = ? WHERE id = ?",
                        (title, content_hash, modified_at, doc_id),
                    )
                write_fts(doc_id)
                return UpsertOutcome("updated")
            db.execute(dialect.insert_content, (content_hash, body, modified_at))
            params = (collection, path, title, content_hash, created_at, modified_at)
            if dialect.returning_id:
                row = db.execute(INSERT_DOCUMENT + " RETURNING id", params).fetchone()
            else:
                db.execute(INSERT_DOCUMENT, params)
                row = db.execute(
                    "SELECT id FROM documents WHERE collection = ? AND path = ?",
                    (collection, path),
                ).fetchone()
            write_fts(int(row[0]))
            return UpsertOutcome("indexed")

    def upsert_documents(
        self, collection: str, documents: Sequence[DocumentWrite]
    ) -> list[UpsertOutcome]:
        """`upsert_document` of each in turn, in one transaction (SQLite: already fast
        row by row; PostgreSQL writes the batch set-based, adapters/postgres/batch.py)."""
        with self._writing():
            return [
                self.upsert_document(
                    collection,
                    d.path,
                    d.title,
                    d.content_hash,
                    d.body,
                    d.created_at,
                    d.modified_at,
                )
                for d in documents
            ]

    def deactivate_documents(self, collection: str, paths: Sequence[str]) -> int:
        """Mark the active documents at `paths` inactive (their rows kept); how many were."""
        unindex = self._DOCUMENTS.unindex
        changed = 0
        with self._writing() as (db, _):
            for path in paths:
                deactivated = db.execute(
                    "UPDATE documents SET active = 0 "
                    "WHERE collection = ? AND path = ? AND active = 1",
                    (collection, path),
                ).rowcount
                if deactivated and unindex is not None:
                    db.execute(unindex, (collection, path))
                changed += deactivated
        return changed

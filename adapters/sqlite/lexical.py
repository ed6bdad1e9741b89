"""Full-text search in the index file (the LexicalIndex port): the original's FTS5 query and
ranking, as adapters/postgres/lexical.py is on PostgreSQL.

A parsed `LexQuery` is rendered as an FTS5 MATCH expression the way the original builds it:

* prefix term → `"word"*`; phrase (or non-prefix term) → `"a b"`;
* a clause with several terms (a dotted token) → its terms joined with ` AND `; when positive
  they are flattened into the outer AND list, when negated the group is wrapped in parentheses;
* positives joined with ` AND `, then ` NOT {negative}` appended for each negative clause;
* no positive clause → `None` (nothing to search);
* `match_any` queries join the positive clauses with ` OR ` instead (recall fallback).

Quotes inside a word are escaped by doubling, so the output is always a valid FTS5 string.
"""

from __future__ import annotations

import json
from typing import Any

from adapters.sqlite.driver import ConnectionPart, DatabaseError
from adapters.sqlite.metadata import METADATA_TABLE
from adapters.storage.sql_rows import META_COLUMNS, meta_from_row, metadata_from_text, sql_limit
from domain.lexfill import FilledHits, filled_by_two_searches
from domain.lexquery import LexClause, LexQuery, LexTerm
from domain.model import Document, LexHit

# the lexical search of a connection from which qmd's rank function is loaded: a one-shot CLI
# search ranks once and skips its set-up; a server's connections rank again and again
RANK_FUNCTION_FROM_RUN = 2


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def render_term(term: LexTerm) -> str | None:
    words = [w for w in term.words if w and w.strip()]
    if not words:
        return None
    if term.prefix and len(words) == 1:
        return _quote(words[0]) + "*"
    return _quote(" ".join(words))


def _render_parts(clause: LexClause) -> list[str]:
    return [part for part in (render_term(t) for t in clause.terms) if part is not None]


def render_fts_query(query: LexQuery) -> str | None:
    positives: list[str] = []
    negatives: list[str] = []
    for clause in query.clauses:
        parts = _render_parts(clause)
        if not parts:
            continue
        if clause.negated:
            negatives.append(parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")")
        elif query.match_any:
            positives.append(parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")")
        else:
            positives.extend(parts)
    if not positives:
        return None
    if query.match_any:
        result = " OR ".join(positives)
        if negatives and len(positives) > 1:
            result = f"({result})"
    else:
        result = " AND ".join(positives)
    for negative in negatives:
        result = f"{result} NOT {negative}"
    return result


class SqliteLexical(ConnectionPart):
    """LexicalIndex on the index file's connection."""

    _lexical_runs = 0  # this index's searches so far (the rank function loads on the second)

    def search_lex_filled(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> FilledHits:
        """The fill as two searches (domain.lexfill): each is one statement here, with nothing
        the two could share."""
        return filled_by_two_searches(
            lambda q, n: self.search_lex(q, n, collection, within), query, limit
        )

    def search_lex(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[LexHit]:
        """BM25 over documents_fts with the original's SQL; never raises on user input.

        `within` restricts the FTS match set itself (before its LIMIT), so a filter never
        empties a page that documents ranked further down would fill (REQ-FILTER-003).
        """
        if limit <= 0 or not query.is_searchable or (within is not None and not within):
            return []
        match = render_fts_query(query)
        if match is None:
            return []
        limit = sql_limit(limit)
        fts_limit = sql_limit(limit * 10) if collection else limit
        scope = ""
        params: list[Any] = [match]
        if within is not None:
            # `+rowid`: a plain `rowid IN` is handed to FTS5 as one rowid probe per id, each
            # re-running MATCH (1 s for 400 ids over 5,000 matches); `+` keeps the MATCH scan
            # and filters its rows through the list (1 ms).
            scope = " AND +rowid IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(sorted(within)))
        self._lexical_runs += 1
        if self._lexical_runs == RANK_FUNCTION_FROM_RUN:
            self._conn.load_rank_function()
        # qmd_bm25 once loaded: FTS5's bm25 to the bit, with row lengths read once per
        # connection (REQ-SEARCH-RANKCACHE-001)
        rank = self._conn.rank_function
        # Each hit's metadata comes with it (REQ-FILTER-006), so a page of results is shown
        # without a statement of its own: a primary-key probe per row ranked here, too little
        # to measure (benchmarks/README.md, "The results' metadata with the hits"). An index
        # file gets the table with its first metadata write (an original's has none); whether
        # it has it is the connection's known schema, no statement. Not known: the hits carry
        # None and the surface reads metadata by id, which looks again (another process may
        # have made the table since).
        joined = METADATA_TABLE in self._conn.schema_names
        metadata_column, metadata_join = (
            (", m.metadata", f" LEFT JOIN {METADATA_TABLE} m ON m.doc_id = d.id")
            if joined
            else ("", "")
        )
        sql = (
            "WITH fts_matches AS ("
            f" SELECT rowid, {rank}(documents_fts, 1.5, 4.0, 1.0) AS bm25_score"
            f" FROM documents_fts WHERE documents_fts MATCH ?{scope}"
            f" ORDER BY bm25_score ASC LIMIT {int(fts_limit)})"
            f" SELECT {META_COLUMNS}, content.doc, fm.bm25_score{metadata_column}"
            # CROSS JOIN pins the join order: probe the few FTS hits by primary key. Left to
            # itself the planner walks the whole collection (reading every body) when a
            # collection filter is present: 9.5 ms instead of 1.4 ms on 5,000 documents.
            " FROM fts_matches fm CROSS JOIN documents d ON d.id = fm.rowid"
            f" CROSS JOIN content ON content.hash = d.hash{metadata_join} WHERE d.active = 1"
        )
        if collection:
            sql += " AND d.collection = ?"
            params.append(collection)
        # The limit is written into the SQL, not bound: a bound LIMIT made every run of this
        # statement 33-54 us slower (SQLite plans it again for each binding; the limit is one
        # of a few values, so each text stays in the statement cache).
        sql += f" ORDER BY fm.bm25_score ASC LIMIT {int(limit)}"
        try:
            rows = self._conn.query(sql, params)
        except DatabaseError as error:
            if joined and METADATA_TABLE in str(error):
                # the connection knew of a table that is not there (its first write rolled
                # back): forget it and search without it
                self._conn.schema_names -= {METADATA_TABLE}
                return self.search_lex(query, limit, collection, within)
            return []
        return [
            LexHit(
                document=Document(meta=meta_from_row(r), body=str(r[8])),
                bm25=float(r[9]),
                metadata=({} if r[10] is None else metadata_from_text(r[10])) if joined else None,
            )
            for r in rows
        ]

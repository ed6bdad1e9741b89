"""qmd's FTS5 rank function (adapters/sqlite/native/qmd_rank.c, REQ-SEARCH-RANKCACHE-001).
It gives FTS5's `bm25` to the bit, and keeps doing so while the index changes under its
length cache: writes on its own connection, on another one, inside transactions rolled back
or not, and rows trading bodies (their lengths change, the table's totals do not). It is
what this machine's install loads, and it builds from source here.

Scores are compared with `==`: the fill, and the compat surface's byte-for-byte output, need
the same doubles, not close ones.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.sqlite import rank_ext
from adapters.sqlite.driver import FTS5_RANK_FUNCTION, Connection, connect
from adapters.sqlite.schema import ensure_schema
from adapters.sqlite.store import SqliteIndex
from domain.lexquery import parse_lex_query

T0 = "2025-01-01T00:00:00.000Z"

# shared prefixes (`al*`, `bet*`) and a porter stem pair, so prefix and stemmed phrases count
# hits of several words in one row
WORDS = ["alpha", "alphabet", "alps", "beta", "bet", "betting", "gamma", "delta", "runs", "run"]
WEIGHTS = ["", ", 1.5, 4.0, 1.0", ", 1.0, 1.0, 1.0", ", 0.5, 2.0", ", 3.0"]


def _index(path: Path) -> Connection:
    conn = connect(str(path))
    ensure_schema(conn, lambda text: text)
    conn.load_rank_function()
    return conn


def _words(rng: random.Random, most: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, most)))


def _add(conn: Connection, rng: random.Random, count: int) -> None:
    conn.raw.executemany(
        "INSERT INTO documents_fts (filepath, title, body) VALUES (?, ?, ?)",
        [(f"notes/{_words(rng, 2)}.md", _words(rng, 4), _words(rng, 60)) for _ in range(count)],
    )


def _query(rng: random.Random) -> str:
    terms = []
    for _ in range(rng.randint(1, 3)):
        word = rng.choice(WORDS)
        form = rng.choice(["plain", "prefix", "phrase"])
        if form == "prefix":
            terms.append(f'"{word[:3]}"*')
        elif form == "phrase":
            terms.append(f'"{word} {rng.choice(WORDS)}"')
        else:
            terms.append(f'"{word}"')
    expression = terms[0]
    for term in terms[1:]:
        expression += f" {rng.choice(['AND', 'OR', 'NOT'])} {term}"
    return expression


def _differences(conn: Connection, match: str, weights: str) -> list[tuple[int, float, float]]:
    rows = conn.raw.execute(
        f"SELECT rowid, bm25(documents_fts{weights}), qmd_bm25(documents_fts{weights}) "
        "FROM documents_fts WHERE documents_fts MATCH ?",
        (match,),
    ).fetchall()
    return [(int(r[0]), r[1], r[2]) for r in rows if r[1] != r[2]]


def _swap_bodies(conn: Connection, rng: random.Random, rowids: list[int]) -> None:
    """Two rows trade bodies: their lengths change, the table's row and token totals do not."""
    if len(rowids) < 2:
        return
    first, second = rng.sample(rowids, 2)
    bodies = dict(
        conn.raw.execute(
            "SELECT rowid, body FROM documents_fts WHERE rowid IN (?, ?)", (first, second)
        ).fetchall()
    )
    for rowid, body in ((first, bodies[second]), (second, bodies[first])):
        conn.raw.execute("UPDATE documents_fts SET body = ? WHERE rowid = ?", (body, rowid))


def test_this_installs_rank_function_loads(tmp_path: Path) -> None:
    """What scripts/setup.sh built on this machine is what a connection loads."""
    conn = connect(str(tmp_path / "index.sqlite"))
    try:
        conn.load_rank_function()
        assert conn.rank_error is None, (
            f"{conn.rank_error}: run scripts/setup.sh or python -m adapters.sqlite.rank_ext"
        )
        assert conn.rank_function == rank_ext.RANK_FUNCTION
    finally:
        conn.close()


def test_a_connection_loads_it_when_it_ranks_a_second_time(tmp_path: Path) -> None:
    """A one-shot search skips the set-up; the second search of a connection ranks with
    qmd_bm25 and finds the same hits with the same scores."""
    index = SqliteIndex.open(str(tmp_path / "index.sqlite"))
    try:
        for n, body in enumerate(["alpha beta", "alpha alpha gamma", "beta delta", "alpha"]):
            index.upsert_document("c", f"{n}.md", f"t{n}", f"h{n}", body, T0, T0)
        query = parse_lex_query("alpha")
        first = index.search_lex(query, 10, None)
        assert index.connection.rank_function == FTS5_RANK_FUNCTION
        second = index.search_lex(query, 10, None)
        assert index.connection.rank_function == rank_ext.RANK_FUNCTION
        assert [(h.document.meta.path, h.bm25) for h in second] == [
            (h.document.meta.path, h.bm25) for h in first
        ]
        assert len(first) == 3
    finally:
        index.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_scores_equal_fts5s_bm25_while_the_index_changes(
    tmp_path_factory: pytest.TempPathFactory, seed: int
) -> None:
    rng = random.Random(seed)
    path = tmp_path_factory.mktemp("rank") / "index.sqlite"
    conn = _index(path)
    other = connect(str(path))
    try:
        _add(conn, rng, rng.randint(1, 40))
        queries = [(_query(rng), rng.choice(WEIGHTS)) for _ in range(6)]
        for step in range(8):
            for match, weights in queries:
                assert _differences(conn, match, weights) == [], (step, match, weights)
            edit = rng.choice(["update", "delete", "add", "swap", "other", "rolled back", "txn"])
            rowids = [r[0] for r in conn.raw.execute("SELECT rowid FROM documents_fts")]
            target = rng.choice(rowids) if rowids else 0
            if edit == "update":
                conn.raw.execute(
                    "UPDATE documents_fts SET body = ? WHERE rowid = ?", (_words(rng, 90), target)
                )
            elif edit == "delete":
                conn.raw.execute("DELETE FROM documents_fts WHERE rowid = ?", (target,))
            elif edit == "add":
                _add(conn, rng, rng.randint(1, 5))
            elif edit in ("swap", "other"):  # other: only the data version tells
                _swap_bodies(conn if edit == "swap" else other, rng, rowids)
            else:
                conn.raw.execute("BEGIN")
                _swap_bodies(conn, rng, rowids)
                for match, weights in queries:  # inside the transaction: its own lengths
                    assert _differences(conn, match, weights) == [], ("in transaction", match)
                conn.raw.execute("ROLLBACK" if edit == "rolled back" else "COMMIT")
    finally:
        other.close()
        conn.close()


def test_lengths_read_inside_a_rolled_back_transaction_are_not_kept(tmp_path: Path) -> None:
    """Two rows trade bodies inside a transaction that is rolled back: the lengths read there
    must neither come from before it nor outlive it."""
    conn = _index(tmp_path / "index.sqlite")
    try:
        conn.raw.execute(
            "INSERT INTO documents_fts (rowid, filepath, title, body) VALUES "
            "(1, 'a.md', 'a', 'alpha beta'), (2, 'b.md', 'b', 'alpha gamma delta run bet')"
        )
        assert _differences(conn, '"alpha"', "") == []
        conn.raw.execute("BEGIN")
        _swap_bodies(conn, random.Random(1), [1, 2])
        assert _differences(conn, '"alpha"', "") == []
        conn.raw.execute("ROLLBACK")
        assert _differences(conn, '"alpha"', "") == []
    finally:
        conn.close()


def test_it_builds_from_source_here(tmp_path: Path) -> None:
    """The build scripts/setup.sh runs, into a fresh file, loaded into a fresh connection."""
    library = rank_ext.build(tmp_path / "qmd_rank.so")
    conn = _index(tmp_path / "index.sqlite")
    try:
        raw = conn.raw
        raw.execute("INSERT INTO documents_fts (filepath, title, body) VALUES ('a', 'b', 'c d')")
        raw.enable_load_extension(True)
        assert rank_ext.load(raw, library) is None
        raw.enable_load_extension(False)
        assert _differences(conn, '"c"', ", 1.5, 4.0, 1.0") == []
    finally:
        conn.close()


def test_a_missing_or_broken_library_is_a_reason_not_an_error(tmp_path: Path) -> None:
    conn = _index(tmp_path / "index.sqlite")
    broken = tmp_path / "qmd_rank.so"
    broken.write_bytes(b"not a shared object")
    try:
        conn.raw.enable_load_extension(True)
        missing = rank_ext.load(conn.raw, tmp_path / "absent.so")
        failed = rank_ext.load(conn.raw, broken)
        conn.raw.enable_load_extension(False)
        assert missing is not None and "not built" in missing
        assert failed is not None and "failed to load" in failed
    finally:
        conn.close()


def test_a_failed_build_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(rank_ext.RankBuildError, match="no C compiler"):
        rank_ext.build(tmp_path / "qmd_rank.so", compiler=str(tmp_path / "no-such-cc"))
    assert list(tmp_path.iterdir()) == [], "a failed build leaves no partial library"

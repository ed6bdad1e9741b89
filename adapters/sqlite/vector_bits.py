"""One bit per dimension of every chunk vector, in a sqlite-vec table of our own, so a vector
search can pick a few hundred candidates by Hamming distance and rescore only those with the
full float vectors (REQ-VEC-PREFILTER-001..003).

`vectors_vec` stays exactly as the original QMD 2.8.3 writes it. `py_vector_bits` is derived
from it: created by our first vector write, kept in step by our writes, never copied by
`qmd index copy` (rebuilt instead). The original does not know the table, so its writes leave
it behind; a signature of `vectors_vec` (its row count and the high-water mark of its rowids,
which sqlite-vec numbers with AUTOINCREMENT: every insert raises it, every delete lowers the
count) is recorded with the bits, and a search whose signature no longer matches scans exactly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from adapters.sqlite.driver import Connection

BITS_TABLE = "py_vector_bits"
SIGNATURE_KEY = "py_vector_bits_signature"
_BITS_DDL = (
    f"CREATE VIRTUAL TABLE {BITS_TABLE} USING vec0(hash_seq TEXT PRIMARY KEY, "
    "embedding bit[{bits}])"
)
_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
_REBUILD_BATCH = 2000


def padded_dims(dims: int) -> int:
    """sqlite-vec's bit vectors hold whole bytes: odd sizes get zero dimensions (bit 0)."""
    return -(-dims // 8) * 8


def pad(blob: bytes, dims: int) -> bytes:
    """A float32 blob of `dims` values widened with zeros to `padded_dims(dims)`."""
    return blob + b"\0" * (4 * (padded_dims(dims) - dims))


# the quantization itself is sqlite-vec's: bit i is 1 when value i is positive
QUANTIZE = "vec_quantize_binary(vec_f32(?))"


def bits_table_exists(conn: Connection) -> bool:
    return conn.scalar(_TABLE, (BITS_TABLE,)) is not None


def signature(conn: Connection) -> tuple[int, int] | None:
    """(rows, rowid high-water mark) of `vectors_vec`, from sqlite-vec's own bookkeeping."""
    if conn.scalar(_TABLE, ("vectors_vec_rowids",)) is None:
        return None
    count = int(conn.scalar("SELECT COUNT(*) FROM vectors_vec_rowids") or 0)
    high = conn.scalar("SELECT seq FROM sqlite_sequence WHERE name = 'vectors_vec_rowids'")
    return count, int(high or 0)


def recorded_signature(conn: Connection) -> tuple[int, int] | None:
    value = conn.scalar("SELECT value FROM store_config WHERE key = ?", (SIGNATURE_KEY,))
    if value is None:
        return None
    count, _, high = str(value).partition(":")
    try:
        return int(count), int(high)
    except ValueError:
        return None


def record_signature(conn: Connection, count: int | None = None) -> None:
    """Record `vectors_vec`'s signature; `count`, when the caller knows it, spares the count
    (a full pass over a million rowids: 65 ms, once per stored document otherwise)."""
    if count is not None:
        high = conn.scalar("SELECT seq FROM sqlite_sequence WHERE name = 'vectors_vec_rowids'")
        conn.execute(
            "INSERT OR REPLACE INTO store_config (key, value) VALUES (?, ?)",
            (SIGNATURE_KEY, f"{count}:{int(high or 0)}"),
        )
        return
    current = signature(conn)
    if current is None:
        conn.execute("DELETE FROM store_config WHERE key = ?", (SIGNATURE_KEY,))
        return
    conn.execute(
        "INSERT OR REPLACE INTO store_config (key, value) VALUES (?, ?)",
        (SIGNATURE_KEY, f"{current[0]}:{current[1]}"),
    )


def in_step(conn: Connection) -> int | None:
    """The vector count when the bits describe exactly the vectors of `vectors_vec`, else None."""
    if not bits_table_exists(conn):
        return None
    current = signature(conn)
    if current is None or current != recorded_signature(conn):
        return None
    return current[0]


def drop(conn: Connection) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {BITS_TABLE}")
    conn.execute("DELETE FROM store_config WHERE key = ?", (SIGNATURE_KEY,))


def rebuild(conn: Connection, dims: int) -> None:
    """Quantize every vector of `vectors_vec` afresh (caller holds the transaction)."""
    conn.execute(f"DROP TABLE IF EXISTS {BITS_TABLE}")
    conn.execute(_BITS_DDL.format(bits=padded_dims(dims)))
    # staged in a temporary table: inserting into one vec0 table while reading another in
    # the same statement ran about ten times slower
    conn.execute("DROP TABLE IF EXISTS temp.py_vector_bits_staging")
    conn.execute("CREATE TEMP TABLE py_vector_bits_staging (hash_seq TEXT, embedding BLOB)")
    if dims == padded_dims(dims):
        conn.execute(
            "INSERT INTO temp.py_vector_bits_staging "
            "SELECT hash_seq, vec_quantize_binary(embedding) FROM vectors_vec"
        )
    else:
        rows = conn.query("SELECT hash_seq, embedding FROM vectors_vec")
        for start in range(0, len(rows), _REBUILD_BATCH):
            conn.executemany(
                f"INSERT INTO temp.py_vector_bits_staging VALUES (?, {QUANTIZE})",
                [(str(k), pad(bytes(b), dims)) for k, b in rows[start : start + _REBUILD_BATCH]],
            )
    conn.execute(
        f"INSERT INTO {BITS_TABLE} (hash_seq, embedding) "
        "SELECT hash_seq, vec_bit(embedding) FROM temp.py_vector_bits_staging"
    )
    conn.execute("DROP TABLE temp.py_vector_bits_staging")
    record_signature(conn)


def present(conn: Connection, keys: Sequence[str]) -> int:
    """How many of `keys` `vectors_vec` holds (an indexed lookup in sqlite-vec's rowids)."""
    return int(
        conn.scalar(
            "SELECT COUNT(*) FROM vectors_vec_rowids WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(keys)),),
        )
        or 0
    )


def replace(
    conn: Connection,
    removed: Sequence[str],
    added: Sequence[tuple[str, bytes]],
    dims: int,
    count: int,
) -> None:
    """Mirror one write to `vectors_vec`, which now holds `count` vectors (caller holds the
    transaction, bits already in step)."""
    conn.executemany(f"DELETE FROM {BITS_TABLE} WHERE hash_seq = ?", [(k,) for k in removed])
    conn.executemany(
        f"INSERT INTO {BITS_TABLE} (hash_seq, embedding) VALUES (?, {QUANTIZE})",
        [(key, pad(blob, dims)) for key, blob in added],
    )
    record_signature(conn, count)


def candidates(conn: Connection, blob: bytes, dims: int, k: int) -> list[str]:
    """The `k` chunk keys nearest to the query in Hamming distance."""
    rows = conn.query(
        f"SELECT hash_seq FROM {BITS_TABLE} WHERE embedding MATCH vec_quantize_binary("
        "vec_f32(?)) AND k = ? ORDER BY distance",
        (pad(blob, dims), k),
    )
    return [str(r[0]) for r in rows]

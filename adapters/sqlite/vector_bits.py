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
import os
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


def _parse(value: object) -> tuple[int, int] | None:
    """(count, high-water mark) of a recorded `count:high[:token]`."""
    parts = str(value).split(":")
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return None


def _recorded(conn: Connection) -> str | None:
    value = conn.scalar("SELECT value FROM store_config WHERE key = ?", (SIGNATURE_KEY,))
    return None if value is None else str(value)


def recorded_signature(conn: Connection) -> tuple[int, int] | None:
    value = _recorded(conn)
    return None if value is None else _parse(value)


def _high_water(conn: Connection) -> int | None:
    high = conn.scalar("SELECT seq FROM sqlite_sequence WHERE name = 'vectors_vec_rowids'")
    return None if high is None else int(high)


def record_signature(conn: Connection, count: int | None = None) -> None:
    """Record `vectors_vec`'s signature; `count`, when the caller knows it, spares the count
    (a full pass over a million rowids: 65 ms, once per stored document otherwise).

    A fresh random token goes with it: an in-memory copy of the bits is valid for exactly
    one recorded value, and since the value is written inside the caller's transaction, a
    rollback restores the value the bits it restores were read under (REQ-VEC-SIGNSCAN-001).
    """
    token = os.urandom(8).hex()  # not `secrets`: it loads `random` and `hmac` at start
    if count is not None:
        conn.execute(
            "INSERT OR REPLACE INTO store_config (key, value) VALUES (?, ?)",
            (SIGNATURE_KEY, f"{count}:{_high_water(conn) or 0}:{token}"),
        )
        return
    current = signature(conn)
    if current is None:
        conn.execute("DELETE FROM store_config WHERE key = ?", (SIGNATURE_KEY,))
        return
    conn.execute(
        "INSERT OR REPLACE INTO store_config (key, value) VALUES (?, ?)",
        (SIGNATURE_KEY, f"{current[0]}:{current[1]}:{token}"),
    )


def in_step(conn: Connection) -> int | None:
    """The vector count when the bits describe exactly the vectors of `vectors_vec`, else None
    (the full check: counts every vector)."""
    if not bits_table_exists(conn):
        return None
    current = signature(conn)
    if current is None or current != recorded_signature(conn):
        return None
    return current[0]


def state(conn: Connection) -> tuple[int, str] | None:
    """(vectors with bits, the recorded value) when the bits hold every vector of
    `vectors_vec`, else None; a few key lookups, read afresh on every call.

    Every insert into `vectors_vec` raises its rowid high-water mark (AUTOINCREMENT, never
    reused), so a mark equal to the recorded one means no other program added a vector since
    our last write. Vectors another program deleted keep their bits: such a candidate has no
    vector left to rescore and is passed over, never returned.
    """
    value = _recorded(conn)
    parsed = None if value is None else _parse(value)
    if value is None or parsed is None or not bits_table_exists(conn):
        return None
    if _high_water(conn) != parsed[1]:
        return None
    return parsed[0], value


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


def query_bits(conn: Connection, blob: bytes, dims: int) -> bytes:
    """The query's sign bits, quantized as the stored ones are."""
    return bytes(conn.scalar(f"SELECT {QUANTIZE}", (pad(blob, dims),)))


def candidates(conn: Connection, blob: bytes, dims: int, k: int) -> list[str]:
    """The `k` chunk keys nearest to the query in Hamming distance."""
    rows = conn.query(
        f"SELECT hash_seq FROM {BITS_TABLE} WHERE embedding MATCH vec_quantize_binary("
        "vec_f32(?)) AND k = ? ORDER BY distance",
        (pad(blob, dims), k),
    )
    return [str(r[0]) for r in rows]

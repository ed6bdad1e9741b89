"""Vector bookkeeping both index stores share (`adapters.sqlite`, `adapters.postgres`): which
content hashes still need embedding, the `content_vectors` rows of one stored hash, and the
dimension checks. Statements use SQLite's `?` placeholders (PostgreSQL: `pyformat`); how the
vectors themselves are stored (sqlite-vec, pgvector) stays with each backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.errors import INVALID_ARGUMENT, QmdError

DIMENSION_MISMATCH = (
    "Embedding dimension mismatch: existing vectors are {existing}d but the current model "
    "produces {current}d. Run 'qmd embed -f' to re-embed with the new model."
)


# Active hashes lacking a complete vector set for (model, fingerprint), or for any of the
# pairs naming the same model (REQ-VEC-MODEL-001): none stored yet, or fewer chunks than the
# set's total (an embed cut off midway).
def _pending(sets: int) -> str:
    match = (
        "model = ? AND embed_fingerprint = ?"
        if sets == 1
        else " OR ".join(["(model = ? AND embed_fingerprint = ?)"] * sets)
    )
    return (
        " FROM documents d LEFT JOIN ("
        " SELECT hash, COUNT(*) AS chunk_count, MAX(total_chunks) AS expected_chunks"
        f" FROM content_vectors WHERE {match}"
        " GROUP BY hash) v ON d.hash = v.hash"
        " WHERE d.active = 1 AND (v.hash IS NULL OR v.chunk_count < v.expected_chunks)"
    )


def pending_count_sql(sets: int = 1) -> str:
    return "SELECT COUNT(DISTINCT d.hash)" + _pending(sets)


def pending_params(
    model: str, fingerprint: str, also: Sequence[tuple[str, str]]
) -> tuple[int, tuple[str, ...]]:
    """How many (model, fingerprint) pairs a pending statement matches (the configured one
    first, each once), and its parameters: the pairs flattened."""
    pairs = [(model, fingerprint)]
    pairs += [pair for pair in also if pair not in pairs]
    return len(pairs), tuple(value for pair in pairs for value in pair)


# Each model name once, by a skip scan over the (model, ...) index: a lookup per name, not a
# read of every vector row (status asks on every run).
STORED_VECTOR_MODELS = (
    "WITH RECURSIVE names(model) AS ("
    " SELECT MIN(model) FROM content_vectors"
    " UNION ALL"
    " SELECT (SELECT MIN(c.model) FROM content_vectors c WHERE c.model > names.model)"
    " FROM names WHERE names.model IS NOT NULL)"
    " SELECT model FROM names WHERE model IS NOT NULL"
)

CONTENT_VECTOR_COLUMNS = "hash, seq, pos, model, embed_fingerprint, total_chunks, embedded_at"

# chunk vectors of active documents (orphans of removed ones not counted)
VECTOR_COUNT = (
    "SELECT COUNT(*) FROM content_vectors cv WHERE EXISTS ("
    "SELECT 1 FROM documents d WHERE d.hash = cv.hash AND d.active = 1)"
)
EMBEDDED_BY_MODEL = (
    "SELECT v.model, COUNT(DISTINCT v.hash) FROM content_vectors v"
    " WHERE v.hash IN (SELECT hash FROM documents WHERE active = 1)"
    " GROUP BY v.model ORDER BY v.model"
)


def pending_hashes_sql(bytewise: str = "", sets: int = 1) -> str:
    """The pending hashes, ordered by their first path, byte for byte (`bytewise`: the
    collation clause that makes the backend compare text so, empty on SQLite), for `sets`
    (model, fingerprint) pairs."""
    return (
        "SELECT d.hash"
        + _pending(sets)
        + f" GROUP BY d.hash ORDER BY MIN(d.path{bytewise}), d.hash"
    )


def mismatch(existing: int, current: int) -> QmdError:
    return QmdError(INVALID_ARGUMENT, DIMENSION_MISMATCH.format(existing=existing, current=current))


def chunk_dimensions(chunks: Sequence[tuple[int, int, Sequence[float]]]) -> int:
    """The one dimension of every (seq, pos, embedding) in `chunks` (not empty); refused
    when they differ."""
    dims = len(chunks[0][2])
    for _, _, vector in chunks:
        if len(vector) != dims:
            raise mismatch(dims, len(vector))
    return dims


def check_query(stored: int | None, vector: Sequence[float]) -> None:
    """Refuse a query vector of another dimension than the stored ones (None: none stored)."""
    if stored is not None and stored != len(vector):
        raise mismatch(stored, len(vector))


def content_vector_rows(
    content_hash: str,
    chunks: Sequence[tuple[int, int, Sequence[float]]],
    model: str,
    fingerprint: str,
    embedded_at: str,
) -> list[tuple[Any, ...]]:
    """The `content_vectors` rows (CONTENT_VECTOR_COLUMNS) of `content_hash`'s chunk set."""
    total = len(chunks)
    return [
        (content_hash, int(seq), int(pos), model, fingerprint, total, embedded_at)
        for seq, pos, _ in chunks
    ]

"""PostgreSQL index URLs, without importing the driver (every `qmd` start asks whether its
index is one; psycopg takes about 0.2 s to import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.redaction import redact
from domain.errors import INVALID_ARGUMENT, QmdError

if TYPE_CHECKING:
    from urllib.parse import SplitResult

URL_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(text: str | None) -> bool:
    return bool(text) and str(text).startswith(URL_SCHEMES)


def split_schema(url: str) -> tuple[str, str | None]:
    """(libpq URL, schema): `?schema=NAME` is ours, not libpq's, so it is taken out."""
    # imported for a URL only: a SQLite index's start would pay for urllib and ipaddress
    from urllib.parse import parse_qsl, urlencode, urlunsplit

    parts = _readable(url, with_port=False)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for key, value in query if key == "schema"), None)
    rest = [(key, value) for key, value in query if key != "schema"]
    return urlunsplit(parts._replace(query=urlencode(rest))), schema or None


def index_label(url: str) -> str:
    """A file-name-safe name of the index a URL points at: `postgresql-HOST-DATABASE[-SCHEMA]`
    (no user, no password), for what lives beside it on disk (seed 004's memory folder)."""
    parts = _readable(url)
    _, schema = split_schema(url)
    pieces = ["postgresql", parts.hostname or "local", parts.path.strip("/") or "postgres"]
    if schema:
        pieces.append(schema)
    raw = "-".join(pieces)
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in raw)


def config_label(url: str) -> str:
    """A file-name-safe name of the index a URL points at, for its own `index.yml`:
    `postgresql-HOST[-PORT]-DATABASE[-SCHEMA]` (no user, no password; the port too, unlike
    `index_label`, so two servers of one machine do not share a file)."""
    parts = _readable(url)
    _, schema = split_schema(url)
    pieces = ["postgresql", parts.hostname or "local"]
    if parts.port:
        pieces.append(str(parts.port))
    pieces.append(parts.path.strip("/") or "postgres")
    if schema:
        pieces.append(schema)
    raw = "-".join(pieces)
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in raw)


def _readable(url: str, with_port: bool = True) -> SplitResult:
    """The URL's parts; one Python cannot read (an unclosed `[` of an IPv6 host, a port that
    is no number) is the user's mistake, said as such, not an internal error."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        if with_port:
            parts.port  # noqa: B018 - read for the ValueError it raises
    except ValueError as exc:
        message = f"not a database URL qmd can read: {redact(url)} ({exc})"
        raise QmdError(INVALID_ARGUMENT, message) from None
    return parts

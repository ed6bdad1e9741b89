"""PostgreSQL index URLs, without importing the driver (every `qmd` start asks whether its
index is one; psycopg takes about 0.2 s to import)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

URL_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(text: str | None) -> bool:
    return bool(text) and str(text).startswith(URL_SCHEMES)


def redact(url: str) -> str:
    """The URL without its password (for status lines and errors)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def split_schema(url: str) -> tuple[str, str | None]:
    """(libpq URL, schema): `?schema=NAME` is ours, not libpq's, so it is taken out."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for key, value in query if key == "schema"), None)
    rest = [(key, value) for key, value in query if key != "schema"]
    return urlunsplit(parts._replace(query=urlencode(rest))), schema or None


def index_label(url: str) -> str:
    """A file-name-safe name of the index a URL points at: `postgresql-HOST-DATABASE[-SCHEMA]`
    (no user, no password), for what lives beside it on disk (seed 004's memory folder)."""
    parts = urlsplit(url)
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
    parts = urlsplit(url)
    _, schema = split_schema(url)
    pieces = ["postgresql", parts.hostname or "local"]
    if parts.port:
        pieces.append(str(parts.port))
    pieces.append(parts.path.strip("/") or "postgres")
    if schema:
        pieces.append(schema)
    raw = "-".join(pieces)
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in raw)

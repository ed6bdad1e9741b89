"""Secrets in output (REQ-SEC-SECRET-001): the one set of rules that masks a database password
wherever qmd shows text: an index location, a status line, an error, a log line.

Kept apart from the PostgreSQL adapter (whose URLs are what carry such passwords) because every
run masks what it prints, a SQLite one too, and a SQLite run imports nothing of that adapter
(tests/unit/test_backend_guard.py).
"""

from __future__ import annotations

import re

from domain.lazy_regex import LazyRegex

MASK = "***"
# libpq's connection parameters that carry a secret, in a URL's query or a key=value string
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})

# A URL runs to the next white space; a key=value parameter whose key ends in `password`
# (`password`, `sslpassword`, `PGPASSWORD`) starts a word and its value is quoted as libpq
# quotes it or runs to the next white space. Each branch starts only where a run of its
# characters starts, so a long line is scanned once. Compiled on first use: most runs print
# nothing that may hold a secret, and a search never redacts (issue 35).
_SECRETS_IN_TEXT = LazyRegex(
    r"(?<![A-Za-z0-9+.-])(?P<url>[A-Za-z][A-Za-z0-9+.-]*://\S*)"
    r"|(?<![^\s'\"(,;{])(?P<key>[A-Za-z_]*password\s*=\s*)(?P<value>'(?:\\.|[^'\\])*'?|\S*)",
    re.IGNORECASE,
)
_MAY_HOLD_A_SECRET = re.compile(r"://|password", re.IGNORECASE)
_QUERY_PARAMETER = LazyRegex(r"(?P<lead>[?&](?P<key>[^&=?#]*)=)(?P<value>[^&]*)")


def redact(text: str, location: str | None = None) -> str:
    """`text` as people may see it (REQ-SEC-SECRET-001): the password of every URL's userinfo,
    every `password`/`sslpassword` parameter (in a URL's query or as key=value, the form libpq
    and its error messages use) masked. With `location`, the secrets of that URL are masked too
    wherever `text` quotes them bare (libpq echoes an unreadable value as it found it:
    `invalid percent-encoded token: "…"`). For an index location, a status line, an error, a
    log line; text without a secret comes back as it was."""
    if location is None and not _MAY_HOLD_A_SECRET.search(text):
        return text  # most log lines: nothing to mask
    # a location is one URL even where a password in it holds a space
    whole_url = "\n" not in text and re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", text) is not None
    masked = _SECRETS_IN_TEXT.sub(_redact_match, _redact_url(text) if whole_url else text)
    for secret in sorted(_secrets_of(location), key=len, reverse=True) if location else ():
        masked = re.sub(rf"(?<![\w%]){re.escape(secret)}(?![\w%])", MASK, masked)
    return masked


def _redact_match(match: re.Match[str]) -> str:
    if match.group("url") is not None:
        return _redact_url(match.group("url"))
    return match.group("key") + MASK


def _userinfo_end(url: str) -> tuple[int, int]:
    """(start, end) of the password in a URL's userinfo, or (-1, -1). As libpq reads a URL,
    the credentials end at an `@` before the first `/` (a `?` or `#` before it belongs to
    them); the last such `@` is taken, so whatever libpq might read as the password is."""
    start = url.find("://") + 3
    slash = url.find("/", start)
    authority_end = len(url) if slash < 0 else slash
    at = url.rfind("@", start, authority_end)
    colon = url.find(":", start, at) if at >= 0 else -1
    return (colon + 1, at) if colon >= 0 else (-1, -1)


def _redact_url(url: str) -> str:
    begin, end = _userinfo_end(url)
    if begin >= 0:
        url = url[:begin] + MASK + url[end:]

    from urllib.parse import unquote  # only for a URL: its import costs every start

    def parameter(match: re.Match[str]) -> str:
        secret = unquote(match.group("key")).strip().lower() in SECRET_PARAMETERS
        return match.group("lead") + (MASK if secret else match.group("value"))

    return _QUERY_PARAMETER.sub(parameter, url)


def _secrets_of(url: str) -> set[str]:
    """The secrets a URL carries, as written and percent-decoded."""
    from urllib.parse import unquote

    found: list[str] = []
    begin, end = _userinfo_end(url)
    if begin >= 0:
        found.append(url[begin:end])
    found += [
        match.group("value")
        for match in _QUERY_PARAMETER.compiled.finditer(url)
        if unquote(match.group("key")).strip().lower() in SECRET_PARAMETERS
    ]
    return {form for secret in found for form in (secret, unquote(secret)) if form}

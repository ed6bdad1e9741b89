"""The DNS-rebinding screen on `Origin` and `Host`, with the original's rules
(`src/mcp/origin-guard.ts` in QMD 2.8.3), plus the optional bearer token.

A browser page on another site can make a local client's browser POST to a loopback port;
the `Origin` header gives it away, and a rebound DNS name shows up in `Host`. Loopback
origins and hosts pass, anything else must be on an allow-list (flag or environment).

The headers are read strictly (REQ-HTTP-PARSE-001..003): an `Origin` must be exactly
`scheme://host[:port]` (no user info, path, query, fragment, nor a second value), a `Host`
exactly `host[:port]` with nothing after an IPv6 literal's `]`; anything else is not
loopback, whatever it contains. A request without `Host` is refused while Host checks are
on, since the screen cannot vouch for it.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})
ORIGINS_ENV = "QMD_ALLOWED_ORIGINS"
HOSTS_ENV = "QMD_ALLOWED_HOSTS"
TOKEN_ENV = "QMD_HTTP_TOKEN"
# RFC 3986 reg-name and IPv4address, as far as a client names a server: letters, digits and
# `-._~` (no user info, percent-encoding or sub-delimiters); an optional decimal port.
_NAME = re.compile(r"[a-z0-9._~-]+")
_PORT = re.compile(r"[0-9]{1,5}")
_SCHEME_AUTHORITY = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<authority>[^/?#]*)", re.I)
MISSING_HOST = "(none)"


def parse_host(value: str) -> tuple[str, int | None] | None:
    """`host[:port]` of a Host header or an origin's authority: (lower-case host without
    brackets, port), or None when it is not exactly that."""
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[1:end], text[end + 1 :]
        if "%" in host:  # a zone id: no browser sends one, and it names no remote host
            return None
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    else:
        host, colon, port_text = text.partition(":")
        rest = colon + port_text
        if not _NAME.fullmatch(host):
            return None
    if not rest:
        return host, None
    if not rest.startswith(":") or not _PORT.fullmatch(rest[1:]) or int(rest[1:]) > 65535:
        return None
    return host, int(rest[1:])


def request_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header fields by lower-case name; a field sent on several lines is one value joined
    by ", " (RFC 9110 section 5.3), so a repeated `Origin` reads as the list it is."""
    headers: dict[str, str] = {}
    for key, value in raw:
        name, text = key.decode("latin-1").lower(), value.decode("latin-1")
        headers[name] = f"{headers[name]}, {text}" if name in headers else text
    return headers


def is_loopback_hostname(name: str) -> bool:
    """localhost, *.localhost, 127.0.0.0/8, ::1 and ::ffff:127.x.x.x; never 0.0.0.0."""
    host = name.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _split_list(raw: str | None) -> list[str]:
    return [part.strip() for part in (raw or "").split(",") if part.strip()]


def normalize_origin(origin: str) -> str | None:
    """`URL.origin` as a browser writes it: scheme://host[:port], lower case, default port
    dropped; None when `origin` is not an http(s) URL."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default = 80 if scheme == "http" else 443
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def parse_origin(origin: str) -> str | None:
    """A request's `Origin`, read strictly (RFC 6454 serialisation): its normalised form
    (as `normalize_origin`), or None unless it is exactly http(s)://host[:port]."""
    match = _SCHEME_AUTHORITY.fullmatch(origin.strip())
    if match is None:
        return None
    scheme = match["scheme"].lower()
    parsed = parse_host(match["authority"])
    if scheme not in ("http", "https") or parsed is None:
        return None
    host, port = parsed
    if ":" in host:
        host = f"[{host}]"
    default = 80 if scheme == "http" else 443
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


@dataclass(frozen=True)
class OriginPolicy:
    allowed_origins: frozenset[str]
    allowed_hosts: frozenset[str]
    enforce_host: bool
    disabled: bool  # `*` among the allowed origins turns both checks off, as in the original

    @classmethod
    def build(
        cls,
        bind_host: str,
        env: Mapping[str, str],
        extra_origins: Iterable[str] = (),
        extra_hosts: Iterable[str] = (),
    ) -> OriginPolicy:
        origins = [*_split_list(env.get(ORIGINS_ENV)), *extra_origins]
        hosts = [h.lower() for h in [*_split_list(env.get(HOSTS_ENV)), *extra_hosts]]
        wildcard = bind_host.strip() in WILDCARD_BINDS
        if not wildcard and not is_loopback_hostname(bind_host):
            hosts.append(bind_host.strip().lower())
        normalized = {normalize_origin(o) or o.lower() for o in origins}
        return cls(
            allowed_origins=frozenset(normalized),
            allowed_hosts=frozenset(hosts),
            enforce_host=not wildcard or bool(hosts),
            disabled="*" in origins,
        )

    def refusal(self, origin: str | None, host: str | None) -> str | None:
        """Why a request is refused (`Origin not allowed: …`), or None when it may pass.
        `host` None: the request had no Host header (HTTP/1.0)."""
        if self.disabled:
            return None
        if origin is not None and not self._origin_ok(origin):
            return f"Origin not allowed: {origin}"
        if self.enforce_host and not self._host_ok(host):
            return f"Host not allowed: {MISSING_HOST if host is None else host}"
        return None

    def _origin_ok(self, origin: str) -> bool:
        normalized = parse_origin(origin)
        if normalized is None:
            return False
        hostname = urlsplit(normalized).hostname or ""
        return is_loopback_hostname(hostname) or normalized in self.allowed_origins

    def _host_ok(self, host: str | None) -> bool:
        parsed = parse_host(host) if host is not None else None
        if parsed is None:
            return False
        name, port = parsed
        if is_loopback_hostname(name):
            return True
        # an allow-list entry names a host, or a host and port (IPv6 in brackets)
        shown = f"[{name}]" if ":" in name else name
        with_port = shown if port is None else f"{shown}:{port}"
        return bool({name, shown, with_port} & self.allowed_hosts)


def bind_refusal(bind_host: str, policy: OriginPolicy, token: str | None) -> str | None:
    """A server reachable from the network must say who may use it: an allow-list or a
    bearer token. Returns the reason to refuse the bind, or None."""
    if is_loopback_hostname(bind_host):
        return None
    if token or policy.disabled:
        return None
    explicit = policy.allowed_origins or (policy.allowed_hosts - {bind_host.strip().lower()})
    if explicit:
        return None
    return (
        f"Refusing to listen on {bind_host!r}: it is reachable from the network, and no "
        f"allow-list ({ORIGINS_ENV} / {HOSTS_ENV}, --allow-origin / --allow-host) or bearer "
        f"token ({TOKEN_ENV}, --token) is set. Bind to localhost, or set one of them."
    )


def token_matches(authorization: str | None, token: str) -> bool:
    if not authorization:
        return False
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())

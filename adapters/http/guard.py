"""The DNS-rebinding screen on `Origin` and `Host`, with the original's rules
(`src/mcp/origin-guard.ts` in QMD 2.8.3), plus the optional bearer token.

A browser page on another site can make a local client's browser POST to a loopback port;
the `Origin` header gives it away, and a rebound DNS name shows up in `Host`. Loopback
origins and hosts pass, anything else must be on an allow-list (flag or environment).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})
ORIGINS_ENV = "QMD_ALLOWED_ORIGINS"
HOSTS_ENV = "QMD_ALLOWED_HOSTS"
TOKEN_ENV = "QMD_HTTP_TOKEN"


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


def _host_name(host_header: str) -> str:
    value = host_header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


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
        """Why a request is refused (`Origin not allowed: …`), or None when it may pass."""
        if self.disabled:
            return None
        if origin is not None and not self._origin_ok(origin):
            return f"Origin not allowed: {origin}"
        if self.enforce_host and host is not None and not self._host_ok(host):
            return f"Host not allowed: {host}"
        return None

    def _origin_ok(self, origin: str) -> bool:
        normalized = normalize_origin(origin)
        if normalized is None:
            return False
        hostname = urlsplit(normalized).hostname or ""
        return is_loopback_hostname(hostname) or normalized in self.allowed_origins

    def _host_ok(self, host: str) -> bool:
        name = _host_name(host)
        if is_loopback_hostname(name):
            return True
        return host.strip().lower() in self.allowed_hosts or name in self.allowed_hosts


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

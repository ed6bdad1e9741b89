"""The Origin/Host screen: the original's predicate tables (test/mcp-origin-guard.test.ts)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.http.app import (
    OriginPolicy,
    bind_refusal,
    is_loopback_hostname,
    normalize_origin,
    parse_host,
    parse_origin,
    request_headers,
    token_matches,
)


@pytest.mark.parametrize(
    ("name", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST", True),
        ("foo.localhost", True),
        ("127.0.0.1", True),
        ("127.255.0.9", True),
        ("::1", True),
        ("[::1]", True),
        ("0:0:0:0:0:0:0:1", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),
        ("localhost.evil.example", False),
        ("evil.example", False),
        ("10.0.0.1", False),
        ("", False),
    ],
)
def test_loopback_hostnames(name: str, loopback: bool) -> None:
    assert is_loopback_hostname(name) is loopback


@pytest.mark.parametrize(
    ("origin", "refused"),
    [
        ("http://localhost:3000", False),
        ("https://127.0.0.1", False),
        ("HTTP://LOCALHOST:80", False),
        ("http://foo.localhost:3", False),
        ("http://[::1]:8080", False),
        ("null", True),
        ("file://", True),
        ("https://localhost.evil.example", True),
        ("https://evil.example#localhost", True),
        ("http://evil.example", True),
        ("ftp://localhost", True),
    ],
)
def test_origins_on_a_loopback_bind(origin: str, refused: bool) -> None:
    policy = OriginPolicy.build("localhost", {})
    reason = policy.refusal(origin, "localhost:8181")
    assert (reason == f"Origin not allowed: {origin}") is refused
    assert (reason is None) is not refused


def test_allow_lists_from_environment_and_flags() -> None:
    env = {"QMD_ALLOWED_ORIGINS": "https://App.Example:443", "QMD_ALLOWED_HOSTS": "qmd.lan"}
    policy = OriginPolicy.build("localhost", env, ["http://tool.example:8080"], ["other.lan:80"])
    assert policy.refusal("https://app.example", "localhost") is None
    assert policy.refusal("http://tool.example:8080", "localhost") is None
    assert policy.refusal("http://tool.example", "localhost") == (
        "Origin not allowed: http://tool.example"
    )
    assert policy.refusal(None, "qmd.lan:8181") is None
    assert policy.refusal(None, "other.lan:80") is None
    assert policy.refusal(None, "other.lan:81") == "Host not allowed: other.lan:81"


def test_host_checks_follow_the_bind() -> None:
    assert OriginPolicy.build("0.0.0.0", {}).refusal(None, "evil.example") is None
    assert OriginPolicy.build("0.0.0.0", {"QMD_ALLOWED_HOSTS": "a"}).refusal(None, "b") == (
        "Host not allowed: b"
    )
    concrete = OriginPolicy.build("192.168.1.5", {})
    assert concrete.refusal(None, "192.168.1.5:8181") is None
    assert concrete.refusal(None, "evil.example") == "Host not allowed: evil.example"
    assert OriginPolicy.build("localhost", {}).refusal(None, "0.0.0.0:8181") == (
        "Host not allowed: 0.0.0.0:8181"
    )


def test_a_star_origin_turns_both_checks_off() -> None:
    policy = OriginPolicy.build("localhost", {"QMD_ALLOWED_ORIGINS": "*"})
    assert policy.refusal("http://evil.example", "evil.example") is None


def test_network_binds_need_an_allow_list_or_a_token() -> None:
    assert bind_refusal("localhost", OriginPolicy.build("localhost", {}), None) is None
    bare = OriginPolicy.build("0.0.0.0", {})
    assert "Refusing to listen on '0.0.0.0'" in (bind_refusal("0.0.0.0", bare, None) or "")
    assert bind_refusal("0.0.0.0", bare, "tok") is None
    listed = OriginPolicy.build("0.0.0.0", {"QMD_ALLOWED_HOSTS": "qmd.lan"})
    assert bind_refusal("0.0.0.0", listed, None) is None
    concrete = OriginPolicy.build("192.168.1.5", {})
    assert bind_refusal("192.168.1.5", concrete, None) is not None


def test_origin_normalisation_and_tokens() -> None:
    assert normalize_origin("HTTPS://Example.COM:443/path") == "https://example.com"
    assert normalize_origin("http://example.com:8080") == "http://example.com:8080"
    assert normalize_origin("null") is None
    assert token_matches("Bearer abc", "abc") and token_matches("bearer  abc ", "abc")
    assert not token_matches("Bearer abd", "abc") and not token_matches(None, "abc")
    assert not token_matches("Basic abc", "abc")


# Issue 22, finding 12: the screen reads Host and Origin strictly (REQ-HTTP-PARSE-001..003).

LOOPBACK = OriginPolicy.build("localhost", {})


@pytest.mark.parametrize(
    "host",
    [
        "[::1]evil.com",  # was read as ::1, the bytes after "]" ignored
        "[::1]evil.com:8181",
        "[::1]:8181x",
        "[::1",
        "user@localhost",
        "localhost@evil.com",
        "localhost:8181:1",
        "localhost:",
        "localhost:99999",
        "localhost:8o81",
        "local host",
        "localhost, evil.com",
        "%6cocalhost",
        "[fe80::1%25lo]",
        "",
    ],
)
def test_a_host_that_is_not_exactly_host_and_port_is_refused(host: str) -> None:
    assert parse_host(host) is None
    assert LOOPBACK.refusal(None, host) == f"Host not allowed: {host}"


@pytest.mark.parametrize(
    "origin",
    [
        "http://user@localhost",  # user info: URL parsers drop it and see localhost
        "http://user:pw@127.0.0.1:8181",
        "http://evil.com@localhost",
        "http://localhost, http://evil.example",  # two Origin lines, joined
        "http://localhost http://localhost",
        "http://localhost/",
        "http://localhost/path",
        "http://localhost?x",
        "http://[::1]evil.com",
        "http://localhost:",
        "http://localhost:65536",
        "http:/localhost",
        "http://",
    ],
)
def test_an_origin_that_is_not_exactly_scheme_host_and_port_is_refused(origin: str) -> None:
    assert parse_origin(origin) is None
    assert LOOPBACK.refusal(origin, "localhost") == f"Origin not allowed: {origin}"


def test_without_a_host_header_a_request_is_refused_while_hosts_are_checked() -> None:
    """HTTP/1.0 lets a request omit Host; the screen cannot vouch for such a request."""
    assert LOOPBACK.refusal(None, None) == "Host not allowed: (none)"
    assert LOOPBACK.refusal("http://localhost", None) == "Host not allowed: (none)"
    assert OriginPolicy.build("0.0.0.0", {}).refusal(None, None) is None  # checks off


def test_a_repeated_header_reads_as_one_joined_value() -> None:
    raw = [(b"Origin", b"http://localhost"), (b"origin", b"http://evil.example")]
    headers = request_headers([*raw, (b"Host", b"localhost")])
    assert headers == {"origin": "http://localhost, http://evil.example", "host": "localhost"}
    assert LOOPBACK.refusal(headers["origin"], headers["host"]) is not None


def test_allow_listed_hosts_match_with_or_without_their_port() -> None:
    policy = OriginPolicy.build("localhost", {"QMD_ALLOWED_HOSTS": "qmd.lan,[fe80::1]:8181"})
    assert policy.refusal(None, "QMD.lan:9") is None
    assert policy.refusal(None, "[fe80::1]:8181") is None
    assert policy.refusal(None, "[fe80::1]:8182") == "Host not allowed: [fe80::1]:8182"
    assert policy.refusal(None, "qmd.lan@evil.com") == "Host not allowed: qmd.lan@evil.com"


_NAMES = st.from_regex(r"[a-z0-9][a-z0-9.-]{0,20}", fullmatch=True)
_PORTS = st.none() | st.integers(0, 65535)
_JUNK = st.text(alphabet="@[]:/?#, %\\\t", min_size=1, max_size=3)


@given(name=_NAMES, port=_PORTS)
def test_any_name_and_port_parse_back(name: str, port: int | None) -> None:
    text = name if port is None else f"{name}:{port}"
    assert parse_host(text) == (name, port)
    assert parse_host(text.upper()) == (name, port)
    expected = is_loopback_hostname(name)
    assert (LOOPBACK.refusal(None, text) is None) is expected


@given(name=_NAMES, port=_PORTS, junk=_JUNK, cut=st.integers(0, 40))
def test_junk_inside_a_loopback_host_never_passes(
    name: str, port: int | None, junk: str, cut: int
) -> None:
    """Whatever is spliced into `localhost[:port]`, the result is loopback only when it
    still reads exactly as a loopback host and port."""
    base = "localhost" if port is None else f"localhost:{port}"
    at = cut % (len(base) + 1)
    host = base[:at] + junk + base[at:] + name
    parsed = parse_host(host)
    passes = LOOPBACK.refusal(None, host) is None
    assert passes == (parsed is not None and is_loopback_hostname(parsed[0]))
    if passes:
        assert parsed is not None and "@" not in host and "," not in host


@given(name=_NAMES, port=_PORTS, scheme=st.sampled_from(["http", "https", "HTTP"]))
def test_any_well_formed_origin_parses_and_loopback_ones_pass(
    name: str, port: int | None, scheme: str
) -> None:
    origin = f"{scheme}://{name}" + ("" if port is None else f":{port}")
    normalized = parse_origin(origin)
    assert normalized is not None and normalized == normalize_origin(origin)
    assert (LOOPBACK.refusal(origin, "localhost") is None) is is_loopback_hostname(name)
    assert parse_origin(f"{scheme}://user@{name}") is None

"""The Origin/Host screen: the original's predicate tables (test/mcp-origin-guard.test.ts)."""

from __future__ import annotations

import pytest

from adapters.http.guard import (
    OriginPolicy,
    bind_refusal,
    is_loopback_hostname,
    normalize_origin,
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
    assert policy.refusal("https://app.example", None) is None
    assert policy.refusal("http://tool.example:8080", None) is None
    assert policy.refusal("http://tool.example", None) == "Origin not allowed: http://tool.example"
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

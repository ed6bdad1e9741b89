"""Virtual paths, URI encoding, docids and line references."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.paths import (
    LineRef,
    VirtualPath,
    decode_uri_component,
    docid_of,
    encode_qmd_path,
    encode_uri_component,
    expand_reserved,
    is_virtual_path,
    normalize_docid,
    parse_line_ref,
    parse_virtual_path,
)

# (text, what node's encodeURIComponent returns)
ENCODED = [
    ("plain", "plain"),
    ("with space", "with%20space"),
    ("#&()!*'~", "%23%26()!*'~"),
    ("%", "%25"),
    ("/", "%2F"),
    ("a/b", "a%2Fb"),
    ("中文.md", "%E4%B8%AD%E6%96%87.md"),
    ("😀", "%F0%9F%98%80"),
    ("é", "%C3%A9"),
    ("+=?;,:@$", "%2B%3D%3F%3B%2C%3A%40%24"),
    ('[]{}|\\^`"<>', "%5B%5D%7B%7D%7C%5C%5E%60%22%3C%3E"),
    ("\t\n", "%09%0A"),
    ("special-chars (v2) & more.md", "special-chars%20(v2)%20%26%20more.md"),
    ("upper case name.md", "upper%20case%20name.md"),
    ("\xa0", "%C2%A0"),
    ("\u2028", "%E2%80%A8"),
    ("\ud7ff\ue000\uffff", "%ED%9F%BF%EE%80%80%EF%BF%BF"),
    ("𝄞", "%F0%9D%84%9E"),
]


@pytest.mark.parametrize(("text", "expected"), ENCODED)
def test_encode_matches_node(text: str, expected: str) -> None:
    assert encode_uri_component(text) == expected


@pytest.mark.parametrize(("text", "expected"), ENCODED)
def test_decode_inverts_node_encoding(text: str, expected: str) -> None:
    assert decode_uri_component(expected) == text


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        ("%41", "A"),
        ("%E4%B8%AD", "中"),
        ("%e4%b8%ad", "中"),
        ("%F0%9F%98%80", "😀"),
        ("%2F%20", "/ "),
        ("a+b", "a+b"),
        # Where JS throws URIError the bad escape is kept literally.
        ("%zz", "%zz"),
        ("%", "%"),
        ("100%", "100%"),
        ("%C3", "%C3"),
        ("%C3%A9%C3", "é%C3"),
        ("%ED%A0%80", "%ED%A0%80"),
        ("%C0%AF", "%C0%AF"),
        ("%F4%90%80%80", "%F4%90%80%80"),
        ("%FF", "%FF"),
    ],
)
def test_decode_edge_cases(encoded: str, expected: str) -> None:
    assert decode_uri_component(encoded) == expected


@pytest.mark.parametrize(
    ("display", "uri"),
    [
        ("handbook/README.md", "qmd://handbook/README.md"),
        ("handbook/notes/caching strategy.md", "qmd://handbook/notes/caching%20strategy.md"),
        (
            "handbook/special-chars (v2) & more.md",
            "qmd://handbook/special-chars%20(v2)%20%26%20more.md",
        ),
        (
            "handbook/notes/中文笔记.md",
            "qmd://handbook/notes/%E4%B8%AD%E6%96%87%E7%AC%94%E8%AE%B0.md",
        ),
        ("c/#tag?.md", "qmd://c/%23tag%3F.md"),
        ("c/100%.md", "qmd://c/100%25.md"),
    ],
)
def test_encode_qmd_path(display: str, uri: str) -> None:
    assert encode_qmd_path(display) == uri


@given(st.text())
def test_uri_component_round_trip(text: str) -> None:
    encoded = encode_uri_component(text)
    assert decode_uri_component(encoded) == text
    assert encoded.isascii()
    assert "/" not in encoded


@given(st.lists(st.text(), min_size=1, max_size=5))
def test_qmd_path_keeps_slashes_and_decodes_per_segment(segments: list[str]) -> None:
    display = "/".join(segments)
    uri = encode_qmd_path(display)
    assert uri.startswith("qmd://")
    body = uri[len("qmd://") :]
    assert body.count("/") == display.count("/")
    assert [decode_uri_component(part) for part in body.split("/")] == display.split("/")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("qmd://handbook/notes/a.md", VirtualPath("handbook", "notes/a.md")),
        ("qmd:////handbook/a.md", VirtualPath("handbook", "a.md")),
        ("qmd:handbook/a.md", VirtualPath("handbook", "a.md")),
        ("//handbook/a.md", VirtualPath("handbook", "a.md")),
        ("  qmd://c/p.md  ", VirtualPath("c", "p.md")),
        ("qmd://c", VirtualPath("c", "")),
        ("qmd://c/", VirtualPath("c", "")),
        ("qmd://c/p.md?index=work", VirtualPath("c", "p.md")),
        ("qmd://c/caching%20strategy.md", VirtualPath("c", "caching%20strategy.md")),
        ("qmd://c/中文 (v2) & x.md", VirtualPath("c", "中文 (v2) & x.md")),
        ("qmd://", None),
        ("qmd://?index=x", None),
        ("handbook/a.md", None),
        ("/abs/path.md", None),
        ("#abc123", None),
        ("qmd://c/line\nbreak", None),
    ],
)
def test_parse_virtual_path(uri: str, expected: VirtualPath | None) -> None:
    assert parse_virtual_path(uri) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("qmd://c/p", True),
        ("qmd:c", True),
        ("//c/p", True),
        (" qmd://x", True),
        ("c/p", False),
        ("/abs", False),
        ("", False),
    ],
)
def test_is_virtual_path(text: str, expected: bool) -> None:
    assert is_virtual_path(text) is expected


def test_docid_is_first_six_hex() -> None:
    assert docid_of("de4f4e3f0a" + "0" * 54) == "de4f4e"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#de4f4e", "de4f4e"),
        ("de4f4e", "de4f4e"),
        ("#DE4F4E", "de4f4e"),
        ('"#de4f4e"', "de4f4e"),
        ("'de4f4e'", "de4f4e"),
        ("  #de4f4e  ", "de4f4e"),
        ("#de4f4e3f0a", "de4f4e3f0a"),
        ("#de4f", None),
        ("de4f4", None),
        ("#de4f4g", None),
        ("##de4f4e", None),
        ('"de4f4e', None),
        ("readme.md", None),
        ("", None),
        ('"', None),
        ("facade", "facade"),
    ],
)
def test_normalize_docid(text: str, expected: str | None) -> None:
    assert normalize_docid(text) == expected


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("pages/meeting.md", LineRef("pages/meeting.md", None, None)),
        ("pages/meeting.md:100", LineRef("pages/meeting.md", 100, None)),
        ("pages/meeting.md:100:40", LineRef("pages/meeting.md", 100, 40)),
        ("#abc123:3:2", LineRef("#abc123", 3, 2)),
        ("#abc123:3", LineRef("#abc123", 3, None)),
        ("qmd://c/a b.md:0", LineRef("qmd://c/a b.md", 0, None)),
        ("x.md:1:2:3", LineRef("x.md:1", 2, 3)),
        ("C:", LineRef("C:", None, None)),
        ("C:\\docs\\a.md", LineRef("C:\\docs\\a.md", None, None)),
        ("a:b", LineRef("a:b", None, None)),
        ("a.md:", LineRef("a.md:", None, None)),
        ("a.md:12a", LineRef("a.md:12a", None, None)),
        ("a.md:-3", LineRef("a.md:-3", None, None)),
        ("a.md:１２", LineRef("a.md:１２", None, None)),
    ],
)
def test_parse_line_ref(reference: str, expected: LineRef) -> None:
    assert parse_line_ref(reference) == expected


@pytest.mark.parametrize(
    ("raw", "expanded"),
    [
        ("handbook/caching strategy.md", "handbook/caching%20strategy.md"),
        ("handbook/rate%20limits.md", "handbook/rate%20limits.md"),
        ("中文/倒排.md", "%E4%B8%AD%E6%96%87/%E5%80%92%E6%8E%92.md"),
        ("a/(v2) & b#1.md", "a/(v2)%20&%20b#1.md"),
        ("50%off", "50%25off"),
    ],
)
def test_expand_reserved_keeps_reserved_characters_and_triplets(raw: str, expanded: str) -> None:
    assert expand_reserved(raw) == expanded

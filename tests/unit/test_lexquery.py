"""parse_lex_query / space_cjk against the original's FTS5 query builder.

The expected MATCH strings were produced by QMD 2.8.3's own `buildFTS5Query` (run under
node once, then frozen here). `render` below is only the test's view of the parse; the real
rendering lives in the SQLite adapter.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.lexquery import (
    MAX_CJK_BIGRAMS,
    LexClause,
    LexQuery,
    LexTerm,
    cjk_fallback_query,
    parse_lex_query,
    space_cjk,
)


def _term(term: LexTerm) -> str:
    return '"' + " ".join(term.words) + '"' + ("*" if term.prefix else "")


def _clause(clause: LexClause, *, wrap: bool) -> str:
    text = " AND ".join(_term(t) for t in clause.terms)
    return f"({text})" if wrap and len(clause.terms) > 1 else text


def render(query: LexQuery) -> str | None:
    if not query.is_searchable:
        return None
    result = " AND ".join(_clause(c, wrap=False) for c in query.positives)
    for negative in query.negatives:
        result += " NOT " + _clause(negative, wrap=True)
    return result


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("foo bar", '"foo"* AND "bar"*'),
        ('"C++ performance"', '"c performance"'),
        ("performance -sports", '"performance"* NOT "sports"*'),
        ("hello!world", '"helloworld"*'),
        ("DEC-0054", '"dec 0054"'),
        ("multi-agent", '"multi agent"'),
        ("v1.2.3", '"v1"* AND "2"* AND "3"*'),
        ("node.js", '"node"* AND "js"*'),
        ("2026.4.10", '"2026"* AND "4"* AND "10"*'),
        ("中文", '"中 文"'),
        ("倒排索引", '"倒 排 索 引"'),
        ("饺子 recipe", '"饺 子" AND "recipe"*'),
        ("-a -b", None),
        ("", None),
        ("   ", None),
        ('"unbalanced', '"unbalanced"'),
        ("a:b", '"ab"*'),
        ("NEAR(x y)", '"nearx"* AND "y"*'),
        ("C++", '"c"*'),
        ("-", None),
        ("--", None),
        ("-v1.2 keep", '"keep"* NOT ("v1"* AND "2"*)'),
        ("中文-abc", '"中文 abc"'),
        ('-"x y" keep', '"keep"* NOT "x y"'),
        ('foo"bar"baz', '"foo"* AND "bar" AND "baz"*'),
        ('"node.js 1.0.21 release"', '"node js 1 0 21 release"'),
        ('"multi-agent systems"', '"multiagent systems"'),
        ("rock-'n'-roll", "\"rock 'n' roll\""),
        ("don't", '"don\'t"*'),
        ("snake_case", '"snake_case"*'),
        ("-multi-agent alpha", '"alpha"* NOT "multi agent"'),
        (".hidden", '"hidden"*'),
        ("a.", '"a"*'),
        ("..", None),
        ("ÉCOLE Straße", '"école"* AND "straße"*'),
        ("emoji😀word", '"emojiword"*'),
        ('"" empty', '"empty"*'),
        ('-"" x', '"x"*'),
        ("x -", '"x"*'),
        ("AND OR NOT", '"and"* AND "or"* AND "not"*'),
        ("*star*", '"star"*'),
        ("col:term", '"colterm"*'),
        ("a\tb\xa0c", '"a"* AND "b"* AND "c"*'),
        ("日本語とEnglish", '"日 本 語 と english"'),
        ("gpt-4", '"gpt 4"'),
        ("write-through", '"write through"'),
        ("x-", '"x"*'),
        ("-x-y", None),
        ("a--b", '"a b"'),
        ('"中文 test"', '"中 文 test"'),
        ("ひらがな カタカナ 한국어", '"ひ ら が な" AND "カ タ カ ナ" AND "한 국 어"'),
    ],
)
def test_matches_original_fts5_builder(raw: str, expected: str | None) -> None:
    assert render(parse_lex_query(raw)) == expected


@pytest.mark.parametrize(
    ("raw", "clauses"),
    [
        ("foo bar", [(False, [(("foo",), True)]), (False, [(("bar",), True)])]),
        ('"C++ performance"', [(False, [(("c", "performance"), False)])]),
        (
            "performance -sports",
            [(False, [(("performance",), True)]), (True, [(("sports",), True)])],
        ),
        ("hello!world", [(False, [(("helloworld",), True)])]),
        ("DEC-0054", [(False, [(("dec", "0054"), False)])]),
        ("multi-agent", [(False, [(("multi", "agent"), False)])]),
        ("v1.2.3", [(False, [(("v1",), True), (("2",), True), (("3",), True)])]),
        ("node.js", [(False, [(("node",), True), (("js",), True)])]),
        ("中文", [(False, [(("中", "文"), False)])]),
        ("-a -b", [(True, [(("a",), True)]), (True, [(("b",), True)])]),
        ("-v1.2", [(True, [(("v1",), True), (("2",), True)])]),
    ],
)
def test_clause_structure(
    raw: str, clauses: list[tuple[bool, list[tuple[tuple[str, ...], bool]]]]
) -> None:
    parsed = parse_lex_query(raw)
    assert [(c.negated, [(t.words, t.prefix) for t in c.terms]) for c in parsed.clauses] == clauses


@pytest.mark.parametrize(
    ("raw", "searchable"),
    [
        ("-a -b", False),
        ("", False),
        ("-", False),
        ("!!!", False),
        ('""', False),
        ("a -b", True),
        ("中", True),
    ],
)
def test_is_searchable(raw: str, searchable: bool) -> None:
    assert parse_lex_query(raw).is_searchable is searchable


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("中文abc", " 中 文 abc"),
        ("a中b", "a 中 b"),
        ("日本語とEnglish", " 日 本 語 と English"),
        ("plain", "plain"),
        ("ー長音", "ー 長 音 "),
        ("한국어 text", " 한 국 어  text"),
        ("𠀀x", " 𠀀 x"),
    ],
)
def test_space_cjk_matches_original(text: str, expected: str) -> None:
    assert space_cjk(text) == expected


@given(st.text())
def test_never_raises_and_words_are_sanitised(raw: str) -> None:
    parsed = parse_lex_query(raw)
    for clause in parsed.clauses:
        assert clause.terms
        for term in clause.terms:
            assert term.words
            assert not term.prefix or len(term.words) == 1
            for word in term.words:
                assert word
                assert '"' not in word and "*" not in word and not any(c.isspace() for c in word)
                assert word == word.lower()


@given(st.lists(st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True), min_size=1, max_size=6))
def test_plain_words_become_prefix_terms_in_order(words: list[str]) -> None:
    parsed = parse_lex_query("  ".join(words))
    assert [c.terms for c in parsed.clauses] == [(LexTerm((w,), prefix=True),) for w in words]


def _fallback(raw: str) -> list[tuple[bool, tuple[str, ...]]] | None:
    query = cjk_fallback_query(parse_lex_query(raw))
    if query is None:
        return None
    assert query.match_any  # any pair of the run suffices (REQ-SPEC-SEARCH-007)
    return [(c.negated, t.words) for c in query.clauses for t in c.terms]


def test_the_cjk_fallback_cuts_runs_into_character_pairs() -> None:
    assert _fallback("学生优惠券") == [
        (False, ("学", "生")),
        (False, ("生", "优")),
        (False, ("优", "惠")),
        (False, ("惠", "券")),
    ]
    # other clauses and negations stay; a lone letter beside a run is dropped; pairs once
    assert _fallback("BBDown -广告 B站下载下载") == [
        (False, ("bbdown",)),
        (True, ("广", "告")),
        (False, ("站", "下")),
        (False, ("下", "载")),
        (False, ("载", "下")),
    ]


def test_the_cjk_fallback_is_not_asked_for_where_it_changes_nothing() -> None:
    for raw in ("饺子", "rate limits", "东京 大阪", "-学生优惠券", ""):
        assert _fallback(raw) is None, raw


@given(st.text(alphabet='学生优惠券下载视频工具abc -"', max_size=200))
def test_the_cjk_fallback_is_bounded(raw: str) -> None:
    parsed = parse_lex_query(raw)
    query = cjk_fallback_query(parsed)
    if query is not None:  # a pasted paragraph does not become hundreds of phrases
        assert len(query.clauses) <= len(parsed.clauses) + MAX_CJK_BIGRAMS

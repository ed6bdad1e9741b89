"""CJK keyword search on every index (the fake, SQLite, PostgreSQL): words inside unsegmented
Chinese and Japanese text are found (REQ-SEARCH-LEX-007), and on the default surface a query
whose CJK run is absent as a whole still finds the documents holding its words, after every
full match (REQ-SPEC-SEARCH-007, the original's open bug tobi/qmd#976), while the original's
rule (the compat surface) keeps answering nothing."""

from __future__ import annotations

import hashlib

import pytest

from domain.lexquery import cjk_fallback_query, parse_lex_query
from domain.profiles import ORIGINAL_2_8_3, SEED_000
from domain.usecases.search import Searcher, SearchRequest
from tests.contract.conftest import StoreLike

T0 = "2025-01-01T00:00:00.000Z"

CORPUS = {
    "coupon.md": ("云工开物", "# 云工开物\n\n云工开物 300 元学生券，新用户注册即可领取。\n"),
    "bbdown.md": ("BBDown", "# BBDown\n\nBBDown 是一个命令行的下载工具链，支持 B 站。\n"),
    "video.md": ("视频下载", "# 视频下载\n\n视频下载工具的比较：哪个最好用。\n"),
    "dumplings.md": ("饺子", "# 饺子\n\n过年吃饺子是北方的习俗。\n"),
    "tokyo.md": ("東京ガイド", "# 東京ガイド\n\n東京タワーと浅草の案内。\n"),
    "english.md": ("Rate limits", "# Rate limits\n\nThe API allows 100 requests a minute.\n"),
}


@pytest.fixture
def index(store: StoreLike) -> StoreLike:
    for path, (title, body) in CORPUS.items():
        digest = hashlib.sha256(body.encode()).hexdigest()
        store.upsert_document("notes", path, title, digest, body, T0, T0)
    return store


def lex(index: StoreLike, text: str) -> list[str]:
    return [h.document.meta.path for h in index.search_lex(parse_lex_query(text), 20, None)]


def search(index: StoreLike, text: str, spec: bool = True) -> list[tuple[str, bool]]:
    searcher = Searcher(index, index, index, profile=SEED_000 if spec else ORIGINAL_2_8_3)
    return [(r.document.meta.path, r.partial) for r in searcher.lex_search(text, SearchRequest())]


def test_words_inside_unsegmented_text_are_found(index: StoreLike) -> None:
    assert lex(index, "饺子") == ["dumplings.md"]  # inside 过年吃饺子是…
    assert lex(index, "学生") == ["coupon.md"]  # inside 300 元学生券
    assert lex(index, "浅草") == ["tokyo.md"]
    assert lex(index, "タワー") == ["tokyo.md"]
    assert set(lex(index, "下载工具")) == {"video.md", "bbdown.md"}
    assert lex(index, "子饺") == []  # characters in order, not a bag


def test_the_fallback_query_finds_the_words_of_an_absent_run(index: StoreLike) -> None:
    assert lex(index, "学生优惠券") == []  # the run as a whole is nowhere
    fallback = cjk_fallback_query(parse_lex_query("学生优惠券"))
    assert fallback is not None and fallback.match_any
    hits = index.search_lex(fallback, 20, None)
    assert [h.document.meta.path for h in hits] == ["coupon.md"]


def test_an_absent_run_still_finds_the_documents_holding_its_words(index: StoreLike) -> None:
    """#976: one segment absent (优惠券), or a run absent as a whole (视频下载 in BBDown's
    text), no longer voids the query on the default surface; full matches come first."""
    assert search(index, "云工开物 优惠券") == [("coupon.md", True)]
    assert search(index, "学生优惠券") == [("coupon.md", True)]
    found = search(index, "BBDown 视频下载")
    assert found[0] == ("bbdown.md", True) and ("video.md", True) in found
    ranked = search(index, "视频下载")
    assert ranked[0] == ("video.md", False)  # the whole run, first and not partial
    assert ("bbdown.md", True) in ranked  # its words (下载, 工具…) only, after it
    assert search(index, "饺子") == [("dumplings.md", False)]  # no fallback is needed
    assert search(index, "-饺子 过年") == []  # a negation still excludes


def test_the_original_rule_keeps_its_all_or_nothing_answer(index: StoreLike) -> None:
    for text in ("云工开物 优惠券", "学生优惠券", "BBDown 视频下载"):
        assert search(index, text, spec=False) == []
    assert search(index, "视频下载", spec=False) == [("video.md", False)]

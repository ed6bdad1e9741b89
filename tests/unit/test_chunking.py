# ruff: noqa: E501  (frozen outputs of the original are kept verbatim)
"""The markdown chunker against frozen outputs of the original's chunkDocument (QMD 2.8.3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.chunking import (
    BreakPoint,
    Chunk,
    CodeFence,
    best_chunk_index,
    chunk_by_tokens,
    chunk_document,
    find_best_cutoff,
    find_code_fences,
    scan_break_points,
)

DOCS: dict[str, str] = {
    "headings": "".join(
        f"# Part {i}\n\n" + ("Some prose words here. " * 40) + "\n\n## Sub\n" + ("- item\n" * 30)
        for i in range(6)
    ),
    "fenced": "Intro\n\n" + "```python\n" + "x = 1\n\n" * 700 + "```\n" + "after the fence\n" * 200,
    "unclosed": "Intro\n" + "text line\n" * 300 + "```\n" + "inside\n\n" * 600,
    "flat": "x" * 9000,
    "rules": ("para " * 100 + "\n---\n" + "1. one\n" * 50 + "\n***\n") * 8,
    "cjk": ("中文字符 " * 200 + "\n\n") * 6,
}

# (document, max_chars, overlap, window, [(pos, len)]) from the original.
ORIGINAL = [
    ("headings", 3600, 540, 800, [(0, 3446), (2906, 2838), (5204, 1690)]),
    (
        "headings",
        1000,
        150,
        200,
        [
            (0, 931),
            (781, 1000),
            (1631, 1000),
            (2481, 965),
            (3296, 1000),
            (4146, 1000),
            (4996, 1000),
            (5846, 830),
            (6526, 368),
        ],
    ),
    (
        "headings",
        300,
        45,
        60,
        [
            (0, 300),
            (255, 300),
            (510, 300),
            (765, 299),
            (1019, 300),
            (1274, 300),
            (1529, 300),
            (1784, 296),
            (2035, 262),
            (2252, 300),
            (2507, 300),
            (2762, 300),
            (3017, 296),
            (3268, 300),
            (3523, 300),
            (3778, 300),
            (4033, 300),
            (4288, 300),
            (4543, 300),
            (4798, 300),
            (5053, 300),
            (5308, 296),
            (5559, 300),
            (5814, 300),
            (6069, 300),
            (6324, 300),
            (6579, 300),
            (6834, 60),
        ],
    ),
    ("fenced", 3600, 540, 800, [(0, 3600), (3060, 3588), (6108, 2013)]),
    (
        "fenced",
        1000,
        150,
        200,
        [
            (0, 1000),
            (850, 1000),
            (1700, 1000),
            (2550, 1000),
            (3400, 1000),
            (4250, 990),
            (5090, 998),
            (5938, 998),
            (6786, 998),
            (7634, 487),
        ],
    ),
    (
        "fenced",
        300,
        45,
        60,
        [
            (0, 300),
            (255, 300),
            (510, 300),
            (765, 300),
            (1020, 300),
            (1275, 300),
            (1530, 300),
            (1785, 300),
            (2040, 300),
            (2295, 300),
            (2550, 300),
            (2805, 300),
            (3060, 300),
            (3315, 300),
            (3570, 300),
            (3825, 300),
            (4080, 300),
            (4335, 300),
            (4590, 300),
            (4845, 299),
            (5099, 285),
            (5339, 285),
            (5579, 285),
            (5819, 285),
            (6059, 285),
            (6299, 285),
            (6539, 285),
            (6779, 285),
            (7019, 285),
            (7259, 285),
            (7499, 285),
            (7739, 285),
            (7979, 142),
        ],
    ),
    ("unclosed", 3600, 540, 800, [(0, 3005), (2465, 3600), (5525, 2285)]),
    (
        "unclosed",
        1000,
        150,
        200,
        [
            (0, 995),
            (845, 1000),
            (1695, 1000),
            (2545, 1000),
            (3395, 1000),
            (4245, 1000),
            (5095, 1000),
            (5945, 1000),
            (6795, 1000),
            (7645, 165),
        ],
    ),
    (
        "unclosed",
        300,
        45,
        60,
        [
            (0, 295),
            (250, 295),
            (500, 295),
            (750, 295),
            (1000, 295),
            (1250, 295),
            (1500, 295),
            (1750, 295),
            (2000, 295),
            (2250, 295),
            (2500, 295),
            (2750, 255),
            (2960, 300),
            (3215, 300),
            (3470, 300),
            (3725, 300),
            (3980, 300),
            (4235, 300),
            (4490, 300),
            (4745, 300),
            (5000, 300),
            (5255, 300),
            (5510, 300),
            (5765, 300),
            (6020, 300),
            (6275, 300),
            (6530, 300),
            (6785, 300),
            (7040, 300),
            (7295, 300),
            (7550, 260),
        ],
    ),
    ("flat", 3600, 540, 800, [(0, 3600), (3060, 3600), (6120, 2880)]),
    (
        "flat",
        1000,
        150,
        200,
        [
            (0, 1000),
            (850, 1000),
            (1700, 1000),
            (2550, 1000),
            (3400, 1000),
            (4250, 1000),
            (5100, 1000),
            (5950, 1000),
            (6800, 1000),
            (7650, 1000),
            (8500, 500),
        ],
    ),
    (
        "flat",
        300,
        45,
        60,
        [
            (0, 300),
            (255, 300),
            (510, 300),
            (765, 300),
            (1020, 300),
            (1275, 300),
            (1530, 300),
            (1785, 300),
            (2040, 300),
            (2295, 300),
            (2550, 300),
            (2805, 300),
            (3060, 300),
            (3315, 300),
            (3570, 300),
            (3825, 300),
            (4080, 300),
            (4335, 300),
            (4590, 300),
            (4845, 300),
            (5100, 300),
            (5355, 300),
            (5610, 300),
            (5865, 300),
            (6120, 300),
            (6375, 300),
            (6630, 300),
            (6885, 300),
            (7140, 300),
            (7395, 300),
            (7650, 300),
            (7905, 300),
            (8160, 300),
            (8415, 300),
            (8670, 300),
            (8925, 75),
        ],
    ),
    ("rules", 3600, 540, 800, [(0, 3435), (2895, 3120), (5475, 1405)]),
    (
        "rules",
        1000,
        150,
        200,
        [
            (0, 855),
            (705, 995),
            (1550, 996),
            (2396, 996),
            (3242, 996),
            (4088, 996),
            (4934, 996),
            (5780, 996),
            (6626, 254),
        ],
    ),
    (
        "rules",
        300,
        45,
        60,
        [
            (0, 300),
            (255, 245),
            (455, 294),
            (704, 300),
            (959, 300),
            (1214, 297),
            (1466, 249),
            (1670, 300),
            (1925, 295),
            (2175, 294),
            (2424, 300),
            (2679, 300),
            (2934, 297),
            (3186, 249),
            (3390, 300),
            (3645, 295),
            (3895, 294),
            (4144, 300),
            (4399, 300),
            (4654, 297),
            (4906, 249),
            (5110, 300),
            (5365, 295),
            (5615, 294),
            (5864, 300),
            (6119, 300),
            (6374, 297),
            (6626, 254),
        ],
    ),
    ("cjk", 3600, 540, 800, [(0, 3004), (2464, 3548)]),
    (
        "cjk",
        1000,
        150,
        200,
        [
            (0, 1000),
            (850, 1000),
            (1700, 1000),
            (2550, 1000),
            (3400, 1000),
            (4250, 1000),
            (5100, 912),
        ],
    ),
    (
        "cjk",
        300,
        45,
        60,
        [
            (0, 300),
            (255, 300),
            (510, 300),
            (765, 300),
            (1020, 300),
            (1275, 300),
            (1530, 300),
            (1785, 300),
            (2040, 300),
            (2295, 300),
            (2550, 300),
            (2805, 300),
            (3060, 300),
            (3315, 300),
            (3570, 300),
            (3825, 300),
            (4080, 300),
            (4335, 300),
            (4590, 300),
            (4845, 300),
            (5100, 300),
            (5355, 300),
            (5610, 300),
            (5865, 147),
        ],
    ),
]


@pytest.mark.parametrize(("name", "max_chars", "overlap", "window", "spans"), ORIGINAL)
def test_matches_original_cut_positions(
    name: str, max_chars: int, overlap: int, window: int, spans: list[tuple[int, int]]
) -> None:
    chunks = chunk_document(DOCS[name], max_chars, overlap, window)
    assert [(c.pos, len(c.text)) for c in chunks] == spans


def test_break_point_scores() -> None:
    sample = "Intro\n# H1\n## H2\n### H3\n#### H4\n##### H5\n###### H6\n#######7\n```\ncode\n```\n---\n***  \n___\n\n\n- a\n* b\n12. c\n-x\nend"
    assert [(b.pos, b.score) for b in scan_break_points(sample)] == [
        (5, 100),
        (10, 90),
        (16, 80),
        (23, 70),
        (31, 60),
        (40, 50),
        (50, 1),
        (59, 80),
        (63, 1),
        (68, 80),
        (72, 60),
        (76, 1),
        (82, 60),
        (86, 20),
        (87, 1),
        (88, 5),
        (92, 5),
        (96, 5),
        (102, 1),
        (105, 1),
    ]


def test_code_fences_pair_up_and_unclosed_runs_to_end() -> None:
    assert find_code_fences("a\n```\nb\n```\nc\n```\nd") == [CodeFence(1, 11), CodeFence(13, 19)]


@pytest.mark.parametrize(
    ("target", "window", "expected"),
    [(800, 800, 10), (800, 100, 790), (800, 1000, 10), (795, 800, 10), (2000, 800, 2000)],
)
def test_best_cutoff_squared_decay(target: int, window: int, expected: int) -> None:
    points = [BreakPoint(10, 100), BreakPoint(700, 1), BreakPoint(790, 20)]
    assert find_best_cutoff(points, target, window) == expected


def test_best_cutoff_skips_points_inside_fences() -> None:
    points = [BreakPoint(500, 100), BreakPoint(700, 20)]
    assert find_best_cutoff(points, 800, 800, fences=[CodeFence(400, 600)]) == 700
    assert find_best_cutoff(points, 800, 800, fences=[CodeFence(500, 600)]) == 500


def test_never_cuts_inside_a_fence() -> None:
    text = DOCS["fenced"]
    fence = find_code_fences(text)[0]
    for chunk in chunk_document(text, 1000, 150, 200)[:-1]:
        end = chunk.pos + len(chunk.text)
        assert not fence.start < end < fence.end or end - chunk.pos == 1000


def test_short_text_is_one_chunk() -> None:
    assert chunk_document("") == [Chunk("", 0)]
    assert chunk_document("x" * 3600) == [Chunk("x" * 3600, 0)]
    assert len(chunk_document("x" * 3601)) == 2


def test_astral_characters_are_never_split() -> None:
    text = "😀" * 5000
    for chunk in chunk_document(text, 333, 50, 40):
        assert chunk.text == "😀" * len(chunk.text)


_markdown = st.lists(
    st.sampled_from(
        [
            "# H\n",
            "## S\n",
            "\n",
            "\n\n",
            "word ",
            "- i\n",
            "```\n",
            "---\n",
            "中文",
            "😀",
            "x" * 40,
        ]
    ),
    max_size=300,
).map("".join)


@settings(max_examples=150)
@given(_markdown, st.integers(20, 400), st.integers(0, 100), st.integers(0, 200))
def test_chunks_cover_text_and_are_slices(
    text: str, max_chars: int, overlap: int, window: int
) -> None:
    chunks = chunk_document(text, max_chars, overlap, window)
    assert chunks[0].pos == 0
    covered = 0
    for previous, chunk in zip([None, *chunks], chunks, strict=False):
        assert chunk.text == text[chunk.pos : chunk.pos + len(chunk.text)]
        assert 0 < len(chunk.text) <= max_chars or text == ""
        assert chunk.pos <= covered  # no gap
        if previous is not None:
            assert chunk.pos > previous.pos
        covered = max(covered, chunk.pos + len(chunk.text))
    assert covered == len(text)


def _words(text: str) -> int:
    return len(text.split()) or 1


@settings(max_examples=60)
@given(_markdown, st.integers(5, 60))
def test_token_chunks_fit_and_cover(text: str, max_tokens: int) -> None:
    chunks = chunk_by_tokens(text, _words, max_tokens, max_tokens // 7, max_tokens // 4)
    covered = 0
    for chunk in chunks:
        assert chunk.text == text[chunk.pos : chunk.pos + len(chunk.text)]
        assert chunk.tokens == _words(chunk.text)
        assert chunk.tokens <= max_tokens or len(chunk.text) == 1
        assert chunk.pos <= covered
        covered = max(covered, chunk.pos + len(chunk.text))
    assert covered == len(text)


def test_token_chunks_resplit_dense_text() -> None:
    text = "a " * 3000  # 1 token per 2 chars: the 3-chars-per-token first pass is too big
    chunks = chunk_by_tokens(text, lambda s: len(s) // 2 + 1, max_tokens=100, overlap_tokens=10)
    assert len(chunks) > 30
    assert all(c.tokens <= 100 for c in chunks)


def test_token_chunks_keep_first_pass_when_it_fits() -> None:
    text = "word " * 2000
    chunks = chunk_by_tokens(text, lambda s: 1)
    assert [(c.pos, len(c.text)) for c in chunks] == [
        (c.pos, len(c.text)) for c in chunk_document(text, 2700, 405, 600)
    ]


@pytest.mark.parametrize(
    ("texts", "query", "intent", "expected"),
    [
        (["alpha beta", "gamma delta", "gamma delta beta"], "gamma beta", None, 2),
        (["one", "two"], "zzz", None, 0),
        (["the cat", "a dog"], "a dog", None, 1),  # "a" is too short to count, "dog" decides
        (["xy ab", "xy"], "xy ab", None, 0),  # both terms <= 2 chars: nothing counts, first wins
        (["Cats", "dogs"], "CATS dogs", None, 0),
        (["api design", "sql tuning"], "tuning design", "SQL database", 1),
        (["api design", "sql tuning"], "tuning design", "the api", 0),
        ([], "anything", None, 0),
    ],
)
def test_best_chunk_index(texts: list[str], query: str, intent: str | None, expected: int) -> None:
    chunks = [Chunk(t, i * 100) for i, t in enumerate(texts)]
    assert best_chunk_index(chunks, query, intent) == expected


def test_fitted_token_budget_shrinks_only_for_a_small_model() -> None:
    from domain.chunking import fitted_token_budget

    assert fitted_token_budget(None) == (900, 135, 200)
    assert fitted_token_budget(2048, 10) == (900, 135, 200)
    size, overlap, window = fitted_token_budget(508, 8)  # MiniLM: 512 positions less a margin
    assert size == 500 and overlap == 75 and window == 111
    assert fitted_token_budget(20, 10)[0] == 32  # never below a usable minimum

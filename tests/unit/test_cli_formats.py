"""The CLI's pure renderers and its query-document parser, table-driven.

Expected strings are written out in full: they are the output format (taken from the
original 2.8.3 CLI), so a change in any byte should fail here.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta

import pytest

from adapters.cli import formats as f
from adapters.cli.errors import CommandError
from adapters.cli.querydoc import parse_query_document
from domain.model import ListContribution, ScoreExplanation

AWKWARD_NAMES = [
    "qmd://handbook/engineering/api/rate limits.md",
    "qmd://handbook/notes/issue #42 follow-up.md",
    "qmd://handbook/meetings/standups & decisions.md",
    "qmd://handbook/engineering/api/v2/endpoints (draft).md",
    "qmd://handbook/中文笔记/倒排索引.md",
]


def row(**changes: object) -> f.ResultRow:
    base: dict[str, object] = {
        "docid": "0b66f8",
        "score": 0.6884,
        "file": "qmd://handbook/engineering/api/rate limits.md",
        "title": "Rate Limits",
        "context": "Team handbook",
        "line": 3,
        "text": "@@ -2,2 @@ (1 before, 8 after)\nEach API key may send 600 requests.",
    }
    base.update(changes)
    return f.ResultRow(**base)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ primitives


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (0.6884, 2, "0.69"),
        (0.125, 2, "0.13"),  # exact binary tie: JS rounds away from zero, not to even
        (0.675, 2, "0.68"),  # 0.67500000000000004441 in binary
        (1.005, 2, "1.00"),  # 1.00499999999999989342 in binary
        (1.0, 2, "1.00"),
        (0.0, 4, "0.0000"),
        (0.66944, 4, "0.6694"),
        (1023 / 1024, 1, "1.0"),
    ],
)
def test_js_fixed_matches_number_to_fixed(value: float, digits: int, expected: str) -> None:
    assert f.js_fixed(value, digits) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ""),
        ("", ""),
        ("plain", "plain"),
        ("rate limits.md", "rate limits.md"),
        ("issue #42 follow-up.md", "issue #42 follow-up.md"),
        ("standups & decisions.md", "standups & decisions.md"),
        ("endpoints (draft).md", "endpoints (draft).md"),
        ("倒排索引.md", "倒排索引.md"),
        ("a,b", '"a,b"'),
        ('say "hi"', '"say ""hi"""'),
        ("two\nlines", '"two\nlines"'),
        ('all, "three"\n', '"all, ""three""\n"'),
    ],
)
def test_escape_csv_quotes_only_when_needed(value: str | None, expected: str) -> None:
    assert f.escape_csv(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("rate limits.md", "rate limits.md"),
        ("issue #42 follow-up.md", "issue #42 follow-up.md"),
        ("standups & decisions.md", "standups &amp; decisions.md"),
        ("endpoints (draft).md", "endpoints (draft).md"),
        ("倒排索引.md", "倒排索引.md"),
        ('<a href="x">it\'s</a>', "&lt;a href=&quot;x&quot;&gt;it&apos;s&lt;/a&gt;"),
        ("&amp;", "&amp;amp;"),
    ],
)
def test_escape_xml(value: str, expected: str) -> None:
    assert f.escape_xml(value) == expected


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        (0, "0 B"),
        (315, "315 B"),
        (1023, "1023 B"),
        (1024, "1.0 KB"),
        (19 * 1024 + 300, "19.3 KB"),
        (1024 * 1024, "1.0 MB"),
        (5 * 1024**3, "5.0 GB"),
    ],
)
def test_format_bytes(size: int, expected: str) -> None:
    assert f.format_bytes(size) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s ago"),
        (59.9, "59s ago"),
        (60, "1m ago"),
        (3599, "59m ago"),
        (3600, "1h ago"),
        (86399, "23h ago"),
        (86400 * 3 + 5, "3d ago"),
    ],
)
def test_format_time_ago(seconds: float, expected: str) -> None:
    assert f.format_time_ago(seconds) == expected


def test_format_ls_time_shows_clock_when_recent_and_year_when_old() -> None:
    now = datetime(2026, 3, 20, 12, 0)
    assert f.format_ls_time(datetime(2026, 3, 4, 9, 5), now) == "Mar  4 09:05"
    assert f.format_ls_time(datetime(2025, 6, 1, 9, 5), now) == "Jun  1  2025"
    assert f.format_ls_time(now - timedelta(days=179), now).endswith("12:00")


@pytest.mark.parametrize(
    ("done", "total", "expected"),
    [
        (120, 240, "Indexing handbook [#####-----] 120/240"),
        (0, 240, "Indexing handbook [----------] 0/240"),
        (240, 240, "Indexing handbook [##########] 240/240"),
        (0, 0, "Indexing handbook [----------] 0/0"),
    ],
)
def test_progress_line(done: int, total: int, expected: str) -> None:
    assert f.progress_line("handbook", done, total) == expected


def test_json_number_drops_the_fraction_of_integral_values() -> None:
    assert json.dumps(f.json_number(1.0)) == "1"
    assert json.dumps(f.json_number(0.0)) == "0"
    assert json.dumps(f.json_number(0.69)) == "0.69"


@pytest.mark.parametrize(
    ("snippet", "query", "expected"),
    [
        ("@@ -1,1 @@ (0 before, 0 after)\nTokens expire", "token", True),
        ("@@ -1,1 @@ (0 before, 0 after)\nTokens expire", "TOKEN", True),
        ("@@ -1,1 @@ token (header only)\nnothing", "token", False),
        ("@@ -1,1 @@ (0 before, 0 after)\nnothing", "lex:", False),
    ],
)
def test_line_matched_ignores_the_header(snippet: str, query: str, expected: bool) -> None:
    assert f.line_matched(snippet, query) is expected


# ------------------------------------------------------------------------------ search results


def test_cli_format_matches_the_original_layout() -> None:
    first = row()
    second = row(
        docid="1534b5",
        score=0.6726,
        file="qmd://handbook/engineering/api/pagination.md",
        title="Pagination",
        context=None,
        line=1,
        text="@@ -1,1 @@ (0 before, 4 after)\n# Pagination",
        line_matched=False,
    )
    assert f.format_results([first, second], "cli") == (
        "qmd://handbook/engineering/api/rate limits.md:3 #0b66f8\n"
        "Title: Rate Limits\n"
        "Context: Team handbook\n"
        "Score:  69%\n"
        "\n"
        "@@ -2,2 @@ (1 before, 8 after)\nEach API key may send 600 requests.\n"
        "\n\n"  # console.log(content) then console.log("\n"): two blank lines
        "qmd://handbook/engineering/api/pagination.md #1534b5\n"
        "Title: Pagination\n"
        "Score:  67%\n"
        "\n"
        "@@ -1,1 @@ (0 before, 4 after)\n# Pagination\n"
    )


def _explanation() -> ScoreExplanation:
    """Rank 2 of a fused list: first in the BM25 list (x2), third in one vector list."""
    fts = ListContribution(0, "fts", "original", "rate limits", 1, 2.0, 0.8, 2.0 / 61)
    vec = ListContribution(2, "vec", "vec", "api quotas", 3, 1.0, 0.61, 1.0 / 63)
    base = 2.0 / 61 + 1.0 / 63
    return ScoreExplanation(
        contributions=(vec, fts),
        rrf_base_score=base,
        top_rank_bonus=0.05,
        rrf_total_score=base + 0.05,
        rrf_rank=2,
        position_score=0.5,
        blend_weight=0.75,
        rerank_score=0.9,
        blended_score=0.75 * 0.5 + 0.25 * 0.9,
    )


def test_cli_format_prints_the_score_trace_under_the_score() -> None:
    text = f.format_results([row(score=0.6, explain=_explanation())], "cli")
    assert (
        "Score:  60%\n"
        "Explain: fts=[0.8000] vec=[0.6100]\n"
        "  RRF: total=0.0987 base=0.0487 bonus=0.0500 rank=2\n"
        "  Blend: 75%*0.5000 + 25%*0.9000 = 0.6000\n"
        "  Top RRF contributions: fts/original#1:0.0328 | vec/vec#3:0.0159\n"
        "\n@@"
    ) in text


def test_cli_trace_says_none_for_a_retriever_that_did_not_find_the_document() -> None:
    only_fts = ScoreExplanation(
        contributions=(ListContribution(0, "fts", "lex", "x", 4, 1.0, 0.5, 1.0 / 64),),
        rrf_base_score=1.0 / 64,
        top_rank_bonus=0.0,
        rrf_total_score=1.0 / 64,
        rrf_rank=1,
        position_score=1.0,
        blend_weight=1.0,
        rerank_score=0.0,
        blended_score=1.0,
    )
    lines = f.explanation_lines(only_fts)
    assert lines[0] == "Explain: fts=[0.5000] vec=[none]"
    assert lines[2] == "  Blend: 100%*1.0000 + 0%*0.0000 = 1.0000"


def test_json_format_carries_the_explain_object_in_the_original_shape() -> None:
    data = json.loads(f.format_results([row(explain=_explanation())], "json"))
    explain = data[0]["explain"]
    assert list(explain) == [
        "ftsScores",
        "vectorScores",
        "rrf",
        "rerankScore",
        "blendedScore",
    ]
    assert explain["ftsScores"] == [0.8] and explain["vectorScores"] == [0.61]
    rrf = explain["rrf"]
    assert list(rrf) == [
        "rank",
        "positionScore",
        "weight",
        "baseScore",
        "topRankBonus",
        "totalScore",
        "contributions",
    ]
    assert (rrf["rank"], rrf["positionScore"], rrf["weight"]) == (2, 0.5, 0.75)
    assert rrf["contributions"][1] == {
        "listIndex": 0,
        "source": "fts",
        "queryType": "original",
        "query": "rate limits",
        "rank": 1,
        "weight": 2,
        "backendScore": 0.8,
        "rrfContribution": 2.0 / 61,
    }
    assert '"weight": 2,' in f.format_results([row(explain=_explanation())], "json")


def test_json_format_has_no_explain_key_without_a_trace() -> None:
    assert "explain" not in json.loads(f.format_results([row()], "json"))[0]


@pytest.mark.parametrize(("score", "label"), [(1.0, "Score: 100%"), (0.05, "Score:   5%")])
def test_score_label_right_aligns_the_percentage(score: float, label: str) -> None:
    assert f.score_label(score) == label


def test_json_format_rounds_scores_and_omits_missing_context() -> None:
    text = f.format_results([row(), row(context=None, score=1.0, docid="aaaaaa")], "json")
    assert text.endswith("]\n")
    assert text.startswith('[\n  {\n    "docid": "#0b66f8",\n    "score": 0.69,\n')
    data = json.loads(text)
    assert data[0] == {
        "docid": "#0b66f8",
        "score": 0.69,
        "file": "qmd://handbook/engineering/api/rate limits.md",
        "line": 3,
        "title": "Rate Limits",
        "context": "Team handbook",
        "snippet": "@@ -2,2 @@ (1 before, 8 after)\nEach API key may send 600 requests.",
    }
    assert list(data[1]) == ["docid", "score", "file", "line", "title", "snippet"]
    assert '"score": 1,' in text


def test_json_format_uses_body_with_full_and_keeps_cjk_unescaped() -> None:
    text = f.format_results([row(file=AWKWARD_NAMES[4], text="# 倒排索引", full=True)], "json")
    assert json.loads(text)[0]["body"] == "# 倒排索引"
    assert "snippet" not in json.loads(text)[0]
    assert "倒排索引.md" in text


def test_csv_format_has_a_header_four_decimals_and_quoted_fields() -> None:
    text = f.format_results([row(context="Global\n\nTeam, handbook")], "csv")
    assert text == (
        "docid,score,file,title,context,line,snippet\n"
        "#0b66f8,0.6884,qmd://handbook/engineering/api/rate limits.md,Rate Limits,"
        '"Global\n\nTeam, handbook",3,'
        '"@@ -2,2 @@ (1 before, 8 after)\nEach API key may send 600 requests."\n'
    )


@pytest.mark.parametrize("name", AWKWARD_NAMES)
def test_csv_keeps_awkward_names_in_one_field(name: str) -> None:
    import csv
    import io

    text = f.format_results([row(file=name, title='Say "hi", & go')], "csv")
    records = list(csv.reader(io.StringIO(text)))
    assert records[1][2] == name
    assert records[1][3] == 'Say "hi", & go'
    assert len(records[1]) == 7


def test_files_format_quotes_context_and_doubles_inner_quotes() -> None:
    text = f.format_results(
        [row(context='The "team" handbook'), row(context=None, score=0.125)], "files"
    )
    assert text == (
        '#0b66f8,0.69,qmd://handbook/engineering/api/rate limits.md,"The ""team"" handbook"\n'
        "#0b66f8,0.13,qmd://handbook/engineering/api/rate limits.md\n"
    )


def test_md_format() -> None:
    assert f.format_results([row()], "md") == (
        "---\n# Rate Limits\n"
        "**file:** `qmd://handbook/engineering/api/rate limits.md`\n"
        "**docid:** `#0b66f8`\n"
        "**context:** Team handbook\n"
        "\n"
        "@@ -2,2 @@ (1 before, 8 after)\nEach API key may send 600 requests.\n\n"
    )


def test_md_format_falls_back_to_the_path_without_a_title() -> None:
    assert f.format_results([row(title="")], "md").startswith(
        "---\n# qmd://handbook/engineering/api/rate limits.md\n"
    )


def test_xml_format_layout() -> None:
    assert f.format_results([row()], "xml") == (
        '<file docid="#0b66f8" name="qmd://handbook/engineering/api/rate limits.md" '
        'title="Rate Limits" context="Team handbook">\n'
        "@@ -2,2 @@ (1 before, 8 after)\nEach API key may send 600 requests.\n"
        "</file>\n\n"
    )


@pytest.mark.parametrize("name", AWKWARD_NAMES)
def test_xml_format_is_well_formed_for_awkward_names(name: str) -> None:
    text = f.format_results(
        [row(file=name, title='A & B "quoted"', context="<ctx>", text="x < y && z")], "xml"
    )
    element = ET.fromstring(text)
    assert element.get("name") == name
    assert element.get("title") == 'A & B "quoted"'
    assert element.get("context") == "<ctx>"
    assert element.text == "\nx < y && z\n"


@pytest.mark.parametrize(
    ("kind", "below", "expected"),
    [
        ("cli", False, "No results found.\n"),
        ("cli", True, "No results found above minimum score threshold.\n"),
        ("json", False, "[]\n"),
        ("csv", False, "docid,score,file,title,context,line,snippet\n"),
        ("xml", False, "<results></results>\n"),
        ("md", False, ""),
        ("files", True, ""),
    ],
)
def test_empty_results(kind: str, below: bool, expected: str) -> None:
    assert f.format_empty_results(kind, below) == expected
    if not below:
        assert f.format_results([], kind) == expected


# ------------------------------------------------------------------------------ documents

DOC = f.DocumentRow(
    "notes/setext.md", "a1c187", "Setext Title", "Notes & more", "1: Setext Title\n2: ====="
)
SKIPPED = f.DocumentRow(
    "reference/large reference.md",
    "cc24c8",
    "large reference.md",
    None,
    skip_reason=(
        "File too large (19KB > 10KB). Use 'qmd get reference/large reference.md' to retrieve."
    ),
)


def test_documents_cli_format_has_banners_and_skip_notes() -> None:
    banner = "=" * 60
    assert f.format_documents([DOC, SKIPPED], "cli") == (
        f"\n{banner}\nFile: notes/setext.md  #a1c187\n{banner}\n\n"
        "Folder Context: Notes & more\n---\n\n"
        "1: Setext Title\n2: =====\n"
        f"\n{banner}\nFile: reference/large reference.md  #cc24c8\n{banner}\n\n"
        "[SKIPPED: File too large (19KB > 10KB). "
        "Use 'qmd get reference/large reference.md' to retrieve.]\n"
    )


def test_documents_json_format() -> None:
    data = json.loads(f.format_documents([DOC, SKIPPED], "json"))
    assert data == [
        {
            "file": "notes/setext.md",
            "docid": "#a1c187",
            "title": "Setext Title",
            "context": "Notes & more",
            "body": "1: Setext Title\n2: =====",
        },
        {
            "file": "reference/large reference.md",
            "docid": "#cc24c8",
            "title": "large reference.md",
            "skipped": True,
            "reason": SKIPPED.skip_reason,
        },
    ]


def test_documents_csv_files_md_formats() -> None:
    assert f.format_documents([DOC, SKIPPED], "csv") == (
        "docid,file,title,context,skipped,body\n"
        '#a1c187,notes/setext.md,Setext Title,Notes & more,false,"1: Setext Title\n2: ====="\n'
        "#cc24c8,reference/large reference.md,large reference.md,,true,"
        "File too large (19KB > 10KB). Use 'qmd get reference/large reference.md' to retrieve.\n"
    )
    assert f.format_documents([DOC, SKIPPED], "files") == (
        '#a1c187,notes/setext.md,"Notes & more"\n#cc24c8,reference/large reference.md,[SKIPPED]\n'
    )
    assert f.format_documents([DOC], "md") == (
        "## notes/setext.md\n\n**docid:** `#a1c187`\n\n**Title:** Setext Title\n\n"
        "**Context:** Notes & more\n\n```\n1: Setext Title\n2: =====\n```\n\n"
    )


def test_documents_xml_format_is_well_formed() -> None:
    text = f.format_documents([DOC, SKIPPED], "xml")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<documents>\n')
    root = ET.fromstring(text.split("\n", 1)[1])
    first, second = root.findall("document")
    assert first.get("docid") == "#a1c187"
    assert first.findtext("context") == "Notes & more"
    assert second.findtext("skipped") == "true"


@pytest.mark.parametrize(
    ("body", "limit", "expected"),
    [
        ("a\nb\nc", None, "a\nb\nc"),
        ("a\nb\nc", 3, "a\nb\nc"),
        ("a\nb\nc", 2, "a\nb\n\n[... truncated 1 more lines]"),
        ("a\nb\nc", 0, "\n\n[... truncated 3 more lines]"),
    ],
)
def test_truncate_lines(body: str, limit: int | None, expected: str) -> None:
    assert f.truncate_lines(body, limit) == expected


def test_format_get_with_and_without_context() -> None:
    assert f.format_get("qmd://c/a.md  #abcdef", "Ctx", "3: x") == (
        "qmd://c/a.md  #abcdef\nFolder Context: Ctx\n---\n\n3: x\n"
    )
    assert f.format_get("qmd://c/a.md  #abcdef", None, "") == "qmd://c/a.md  #abcdef\n---\n\n\n"


def test_format_not_found_lists_suggestions() -> None:
    assert f.format_not_found("a.md", ["b.md", "c.md"]) == (
        "Document not found: a.md\nSimilar files:\n  b.md\n  c.md\n"
    )
    assert f.format_not_found("a.md", []) == "Document not found: a.md\n"


def test_ls_listing_aligns_sizes() -> None:
    now = datetime(2026, 3, 20, 12, 0)
    entries = [
        f.LsEntry(315, datetime(2026, 3, 14, 9, 5), AWKWARD_NAMES[1]),
        f.LsEntry(20000, datetime(2025, 1, 2, 3, 4), AWKWARD_NAMES[4]),
    ]
    assert f.format_ls(entries, now) == (
        f"  315 B  Mar 14 09:05  {AWKWARD_NAMES[1]}\n19.5 KB  Jan  2  2025  {AWKWARD_NAMES[4]}\n"
    )
    assert f.format_ls_collections([("handbook", 19), ("archive", 3)]) == (
        "Collections:\n\n  qmd://handbook/  (19 files)\n  qmd://archive/  (3 files)\n"
    )


def test_update_counts_line() -> None:
    assert f.format_update_counts(1, 2, 3, 4) == (
        "Indexed: 1 new, 2 updated, 3 unchanged, 4 removed"
    )


# ------------------------------------------------------------------------------ query documents


def test_plain_queries_are_not_documents() -> None:
    assert parse_query_document("how does auth work") is None
    assert parse_query_document("   ") is None


def test_typed_lines_become_sub_queries_with_their_line_numbers() -> None:
    document = parse_query_document(
        "\nLEX: token expire\n  vec: how long do tokens live\nintent: auth"
    )
    assert document is not None
    assert [(s.type, s.query) for s in document.searches] == [
        ("lex", "token expire"),
        ("vec", "how long do tokens live"),
    ]
    assert document.lines == (2, 3)
    assert document.intent == "auth"


def test_a_lone_expand_line_is_a_plain_query() -> None:
    document = parse_query_document("expand: token lifetime")
    assert document is not None
    assert document.expand == "token lifetime"
    assert not document.searches


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "lex: a\nplain",
            "Line 2 is missing a lex:/vec:/hyde:/intent: prefix. "
            "Each line in a query document must start with one.",
        ),
        ("intent: x", "intent: cannot appear alone. Add at least one lex:, vec:, or hyde: line."),
        (
            "lex: a\nintent: x\nintent: y",
            "Line 3: only one intent: line is allowed per query document.",
        ),
        ("lex: a\nintent:", "Line 2: intent: must include text."),
        ("lex:", "Line 1 (lex:) must include text."),
        (
            "expand: x\nlex: y",
            "Line 1 starts with expand:, but query documents cannot mix expand with typed "
            "lines. Submit a single expand query instead.",
        ),
        ("expand:", "expand: query must include text."),
    ],
)
def test_malformed_documents_use_the_original_wording(text: str, message: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_query_document(text)
    assert caught.value.message == message

"""Pure text renderers for the `qmd` command line (no I/O, no store access).

Every function returns the exact text to write, including the final newline, so the
command handlers only choose *what* to show and these functions decide *how*. The shapes
follow the original 2.8.3 CLI (`src/cli/qmd.ts`), with one deliberate difference: the
`xml` format escapes `&`, `<`, `>` and `"` everywhere so its output is well-formed XML
(the original only escapes `"` in attributes of search results).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from domain.model import ScoreExplanation
from domain.text import js_round, percent, round_score

FORMATS: Final = ("cli", "json", "csv", "md", "xml", "files")
BANNER: Final = "=" * 60
SEARCH_CSV_HEADER: Final = "docid,score,file,title,context,line,snippet"
DOCUMENTS_CSV_HEADER: Final = "docid,file,title,context,skipped,body"
NO_RESULTS: Final = "No results found."
NO_RESULTS_ABOVE_MIN: Final = "No results found above minimum score threshold."
# how the formats mark an any-term fill result (`qmd search` without --strict)
PARTIAL_MATCH: Final = "partial (not every term was found)"
_MONTHS: Final = (
    "Jan",
    "Feb",
    "Mar",
    "Apr",
    "May",
    "Jun",
    "Jul",
    "Aug",
    "Sep",
    "Oct",
    "Nov",
    "Dec",
)
_SIX_MONTHS_SECONDS: Final = 6 * 30 * 24 * 60 * 60


# ------------------------------------------------------------------------------ primitives


def js_fixed(value: float, digits: int) -> str:
    """`Number.prototype.toFixed`: the exact binary value rounded half away from zero.

    Worked out on the float's exact ratio of integers, so `status` and the CSV results do not
    import `decimal` on a cold start; what that ratio cannot give (infinities, NaN, values
    beyond `decimal`'s 28 digits) still goes through `decimal`, as before."""
    if math.isfinite(value) and abs(value) < 1e20:
        numerator, denominator = abs(value).as_integer_ratio()
        scaled, rest = divmod(numerator * 10**digits, denominator)
        if 2 * rest >= denominator:  # a tie goes away from zero (ROUND_HALF_UP)
            scaled += 1
        text = str(scaled).rjust(digits + 1, "0")
        sign = "-" if math.copysign(1.0, value) < 0 else ""
        if digits <= 0:
            return sign + text
        return f"{sign}{text[:-digits]}.{text[-digits:]}"
    from decimal import ROUND_HALF_UP, Decimal

    quantum = Decimal(1).scaleb(-digits)
    return str(Decimal(value).quantize(quantum, rounding=ROUND_HALF_UP))


def json_number(value: float) -> int | float:
    """Integral floats print as `1`, not `1.0`, like JavaScript's JSON."""
    return int(value) if float(value).is_integer() else value


def to_json(value: Any) -> str:
    """`JSON.stringify(value, null, 2)`: two-space indent, non-ASCII kept as is."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def escape_csv(value: str | None) -> str:
    """Quote a field containing a comma, a quote or a newline; double inner quotes."""
    if value is None:
        return ""
    if "," in value or '"' in value or "\n" in value:
        return '"' + value.replace('"', '""') + '"'
    return value


def quote_context(context: str | None) -> str:
    """The `,"context"` tail of the `files` format (empty when there is none)."""
    return ',"' + context.replace('"', '""') + '"' if context else ""


def escape_xml(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&apos;")
    )


def format_bytes(size: int) -> str:
    """`315 B`, `1.2 KB`, `3.4 MB`, `1.0 GB` (one decimal, binary units)."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{js_fixed(size / 1024, 1)} KB"
    if size < 1024 * 1024 * 1024:
        return f"{js_fixed(size / (1024 * 1024), 1)} MB"
    return f"{js_fixed(size / (1024 * 1024 * 1024), 1)} GB"


def format_time_ago(seconds: float) -> str:
    """`12s ago`, `5m ago`, `3h ago`, `2d ago` (floored)."""
    whole = int(seconds // 1)
    if whole < 60:
        return f"{whole}s ago"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes}m ago"
    hours = minutes // 60
    if hours < 24:
        return f"{hours}h ago"
    return f"{hours // 24}d ago"


def format_ls_time(when: datetime, now: datetime) -> str:
    """`ls -l` style: `Mar 14 09:05`, or `Mar 14  2025` when older than about six months."""
    month = _MONTHS[when.month - 1]
    day = f"{when.day:>2}"
    if (now - when).total_seconds() > _SIX_MONTHS_SECONDS:
        return f"{month} {day}  {when.year}"
    return f"{month} {day} {when.hour:02d}:{when.minute:02d}"


def format_eta(seconds: float) -> str:
    if seconds < 60:
        return f"{js_round(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m {js_round(seconds % 60)}s"
    return f"{int(seconds // 3600)}h {int((seconds % 3600) // 60)}m"


def progress_line(label: str, done: int, total: int, width: int = 10) -> str:
    """`Indexing handbook [#####-----] 120/240` (no newline; the caller adds `\\r`)."""
    filled = 0 if total <= 0 else min(width, (done * width) // total)
    return f"Indexing {label} [{'#' * filled}{'-' * (width - filled)}] {done}/{total}"


# ------------------------------------------------------------------------------ search results


@dataclass(frozen=True)
class ResultRow:
    """One search hit, already reduced to what the formats print.

    `text` is the snippet (with its `@@` header) or, with `--full`, the body; line numbers
    are already applied. `file` is the visible identifier (`qmd://c/p`).
    """

    docid: str
    score: float
    file: str
    title: str
    context: str | None
    line: int
    text: str
    full: bool = False
    line_matched: bool = True
    explain: ScoreExplanation | None = None
    partial: bool = False  # an any-term fill result: not every query term matched


def format_empty_results(fmt: str, below_min_score: bool = False) -> str:
    """What a search prints when nothing (or nothing above `--min-score`) was found."""
    if fmt == "json":
        return "[]\n"
    if fmt == "csv":
        return SEARCH_CSV_HEADER + "\n"
    if fmt == "xml":
        return "<results></results>\n"
    if fmt in ("md", "files"):
        return ""
    return (NO_RESULTS_ABOVE_MIN if below_min_score else NO_RESULTS) + "\n"


def format_results(rows: Sequence[ResultRow], fmt: str) -> str:
    if not rows:
        return format_empty_results(fmt)
    renderer = {
        "json": _results_json,
        "csv": _results_csv,
        "files": _results_files,
        "md": _results_md,
        "xml": _results_xml,
    }.get(fmt, _results_cli)
    return renderer(rows)


def _results_json(rows: Sequence[ResultRow]) -> str:
    out: list[dict[str, Any]] = []
    for row in rows:
        item: dict[str, Any] = {
            "docid": f"#{row.docid}",
            "score": json_number(round_score(row.score)),
            "file": row.file,
            "line": row.line,
            "title": row.title,
        }
        if row.context:
            item["context"] = row.context
        if row.partial:
            item["partial"] = True
        if row.text:
            item["body" if row.full else "snippet"] = row.text
        if row.explain is not None:
            item["explain"] = explanation_json(row.explain)
        out.append(item)
    return to_json(out) + "\n"


def explanation_json(explain: ScoreExplanation) -> dict[str, Any]:
    """The `explain` object of the original's JSON output, keys in its order."""
    return {
        "ftsScores": [json_number(v) for v in explain.fts_scores],
        "vectorScores": [json_number(v) for v in explain.vector_scores],
        "rrf": {
            "rank": explain.rrf_rank,
            "positionScore": json_number(explain.position_score),
            "weight": json_number(explain.blend_weight),
            "baseScore": json_number(explain.rrf_base_score),
            "topRankBonus": json_number(explain.top_rank_bonus),
            "totalScore": json_number(explain.rrf_total_score),
            "contributions": [
                {
                    "listIndex": c.list_index,
                    "source": c.source,
                    "queryType": c.query_type,
                    "query": c.query,
                    "rank": c.rank,
                    "weight": json_number(c.weight),
                    "backendScore": json_number(c.backend_score),
                    "rrfContribution": json_number(c.rrf_contribution),
                }
                for c in explain.contributions
            ],
        },
        "rerankScore": json_number(explain.rerank_score),
        "blendedScore": json_number(explain.blended_score),
    }


def explanation_lines(explain: ScoreExplanation) -> list[str]:
    """The cli format's score trace: list scores, the RRF sum, the blend, top contributions."""

    def number(value: float) -> str:
        return js_fixed(value, 4)

    fts = ", ".join(number(v) for v in explain.fts_scores) or "none"
    vec = ", ".join(number(v) for v in explain.vector_scores) or "none"
    weight = js_round(explain.blend_weight * 100)
    lines = [
        f"Explain: fts=[{fts}] vec=[{vec}]",
        f"  RRF: total={number(explain.rrf_total_score)} base={number(explain.rrf_base_score)} "
        f"bonus={number(explain.top_rank_bonus)} rank={explain.rrf_rank}",
        f"  Blend: {weight}%*{number(explain.position_score)} + {100 - weight}%*"
        f"{number(explain.rerank_score)} = {number(explain.blended_score)}",
    ]
    top = sorted(explain.contributions, key=lambda c: -c.rrf_contribution)[:3]  # stable
    if top:
        summary = " | ".join(
            f"{c.source}/{c.query_type}#{c.rank}:{number(c.rrf_contribution)}" for c in top
        )
        lines.append(f"  Top RRF contributions: {summary}")
    return lines


def _results_csv(rows: Sequence[ResultRow]) -> str:
    lines = [SEARCH_CSV_HEADER]
    for row in rows:
        fields = (
            f"#{row.docid}",
            js_fixed(row.score, 4),
            escape_csv(row.file),
            escape_csv(row.title),
            escape_csv(row.context or ""),
            str(row.line),
            escape_csv(row.text),
        )
        lines.append(",".join(fields))
    return "\n".join(lines) + "\n"


def _results_files(rows: Sequence[ResultRow]) -> str:
    return "".join(
        f"#{row.docid},{js_fixed(row.score, 2)},{row.file}{quote_context(row.context)}\n"
        for row in rows
    )


def _results_md(rows: Sequence[ResultRow]) -> str:
    parts = []
    for row in rows:
        context = f"**context:** {row.context}\n" if row.context else ""
        match = f"**match:** {PARTIAL_MATCH}\n" if row.partial else ""
        parts.append(
            f"---\n# {row.title or row.file}\n**file:** `{row.file}`\n"
            f"**docid:** `#{row.docid}`\n{context}{match}\n{row.text}\n\n"
        )
    return "".join(parts)


def _results_xml(rows: Sequence[ResultRow]) -> str:
    parts = []
    for row in rows:
        title = f' title="{escape_xml(row.title)}"' if row.title else ""
        context = f' context="{escape_xml(row.context)}"' if row.context else ""
        context += ' partial="true"' if row.partial else ""
        parts.append(
            f'<file docid="#{row.docid}" name="{escape_xml(row.file)}"{title}{context}>\n'
            f"{escape_xml(row.text)}\n</file>\n\n"
        )
    return "".join(parts)


def score_label(score: float) -> str:
    """`Score:  93%` — the percentage right-aligned in three columns."""
    return f"Score: {percent(score):>3}%"


def _results_cli(rows: Sequence[ResultRow]) -> str:
    blocks = []
    for row in rows:
        suffix = f":{row.line}" if row.line_matched else ""
        lines = [f"{row.file}{suffix} #{row.docid}"]
        if row.title:
            lines.append(f"Title: {row.title}")
        if row.context:
            lines.append(f"Context: {row.context}")
        lines.append(score_label(row.score))
        if row.partial:
            lines.append(f"Match: {PARTIAL_MATCH}")
        if row.explain is not None:
            lines.extend(explanation_lines(row.explain))
        lines.append("")
        lines.append(row.text)
        blocks.append("\n".join(lines))
    return "\n\n\n".join(blocks) + "\n"


def line_matched(snippet: str, query: str) -> bool:
    """Whether any query word occurs in the snippet body (the header line excluded)."""
    body = "\n".join(snippet.split("\n")[1:]).lower()
    return any(term and term in body for term in query.lower().split())


# ------------------------------------------------------------------------------ documents


@dataclass(frozen=True)
class DocumentRow:
    """One `multi-get` entry: a body (line-numbered as asked) or a skip reason."""

    file: str
    docid: str | None
    title: str
    context: str | None
    body: str = ""
    skip_reason: str | None = None


def format_documents(rows: Sequence[DocumentRow], fmt: str) -> str:
    renderer = {
        "json": _documents_json,
        "csv": _documents_csv,
        "files": _documents_files,
        "md": _documents_md,
        "xml": _documents_xml,
    }.get(fmt, _documents_cli)
    return renderer(rows)


def _documents_json(rows: Sequence[DocumentRow]) -> str:
    out: list[dict[str, Any]] = []
    for row in rows:
        item: dict[str, Any] = {"file": row.file}
        if row.docid:
            item["docid"] = f"#{row.docid}"
        item["title"] = row.title
        if row.context:
            item["context"] = row.context
        if row.skip_reason is not None:
            item["skipped"] = True
            item["reason"] = row.skip_reason
        else:
            item["body"] = row.body
        out.append(item)
    return to_json(out) + "\n"


def _documents_csv(rows: Sequence[DocumentRow]) -> str:
    lines = [DOCUMENTS_CSV_HEADER]
    for row in rows:
        skipped = row.skip_reason is not None
        fields = (
            f"#{row.docid}" if row.docid else "",
            row.file,
            row.title,
            row.context or "",
            "true" if skipped else "false",
            row.skip_reason if row.skip_reason is not None else row.body,
        )
        lines.append(",".join(escape_csv(f) for f in fields))
    return "\n".join(lines) + "\n"


def _documents_files(rows: Sequence[DocumentRow]) -> str:
    out = []
    for row in rows:
        ident = f"#{row.docid}," if row.docid else ""
        status = ",[SKIPPED]" if row.skip_reason is not None else ""
        out.append(f"{ident}{row.file}{quote_context(row.context)}{status}\n")
    return "".join(out)


def _documents_md(rows: Sequence[DocumentRow]) -> str:
    out = []
    for row in rows:
        out.append(f"## {row.file}\n\n")
        if row.docid:
            out.append(f"**docid:** `#{row.docid}`\n\n")
        if row.title and row.title != row.file:
            out.append(f"**Title:** {row.title}\n\n")
        if row.context:
            out.append(f"**Context:** {row.context}\n\n")
        if row.skip_reason is not None:
            out.append(f"> {row.skip_reason}\n\n")
        else:
            out.append(f"```\n{row.body}\n```\n\n")
    return "".join(out)


def _documents_xml(rows: Sequence[DocumentRow]) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>', "<documents>"]
    for row in rows:
        docid = f' docid="#{row.docid}"' if row.docid else ""
        out.append(f"  <document{docid}>")
        out.append(f"    <file>{escape_xml(row.file)}</file>")
        out.append(f"    <title>{escape_xml(row.title)}</title>")
        if row.context:
            out.append(f"    <context>{escape_xml(row.context)}</context>")
        if row.skip_reason is not None:
            out.append("    <skipped>true</skipped>")
            out.append(f"    <reason>{escape_xml(row.skip_reason)}</reason>")
        else:
            out.append(f"    <body>{escape_xml(row.body)}</body>")
        out.append("  </document>")
    out.append("</documents>")
    return "\n".join(out) + "\n"


def _documents_cli(rows: Sequence[DocumentRow]) -> str:
    out = []
    for row in rows:
        ident = f"  #{row.docid}" if row.docid else ""
        out.append(f"\n{BANNER}\nFile: {row.file}{ident}\n{BANNER}\n\n")
        if row.skip_reason is not None:
            out.append(f"[SKIPPED: {row.skip_reason}]\n")
            continue
        if row.context:
            out.append(f"Folder Context: {row.context}\n---\n\n")
        out.append(row.body + "\n")
    return "".join(out)


def truncate_lines(body: str, max_lines: int | None) -> str:
    """`multi-get -l N`: the first N lines plus a `[... truncated K more lines]` note."""
    if max_lines is None:
        return body
    lines = body.split("\n")
    kept = "\n".join(lines[: max(0, max_lines)])
    if len(lines) > max_lines:
        kept += f"\n\n[... truncated {len(lines) - max_lines} more lines]"
    return kept


# ------------------------------------------------------------------------------ single document


def format_get(header: str, context: str | None, body: str) -> str:
    """`qmd get`: header, optional `Folder Context:`, `---`, a blank line, then the body."""
    context_line = f"Folder Context: {context}\n" if context else ""
    return f"{header}\n{context_line}---\n\n{body}\n"


def format_not_found(reference: str, suggestions: Sequence[str]) -> str:
    text = f"Document not found: {reference}\n"
    if suggestions:
        text += "Similar files:\n" + "".join(f"  {s}\n" for s in suggestions)
    return text


# ------------------------------------------------------------------------------ listings


@dataclass(frozen=True)
class LsEntry:
    """One file line of `qmd ls`."""

    size: int
    modified: datetime
    uri: str


def format_ls(entries: Sequence[LsEntry], now: datetime) -> str:
    sizes = [format_bytes(e.size) for e in entries]
    width = max((len(s) for s in sizes), default=0)
    return "".join(
        f"{size:>{width}}  {format_ls_time(e.modified, now)}  {e.uri}\n"
        for size, e in zip(sizes, entries, strict=True)
    )


def format_ls_collections(counts: Sequence[tuple[str, int]]) -> str:
    lines = "".join(f"  qmd://{name}/  ({count} files)\n" for name, count in counts)
    return f"Collections:\n\n{lines}"


def format_update_counts(indexed: int, updated: int, unchanged: int, removed: int) -> str:
    return f"Indexed: {indexed} new, {updated} updated, {unchanged} unchanged, {removed} removed"

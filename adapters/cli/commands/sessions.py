"""`qmd session …`: agent session transcripts (Claude Code JSONL, read-only) and their
summaries, the same use cases as the projmem MCP surface (docs/spec/projmem.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable
from adapters.cli.runtime import err, open_app, out
from domain.usecases.sessions import SessionMemory


def session_help(args: argparse.Namespace) -> int:
    err(
        "Usage: qmd session <list|show|summarize>\n\n"
        "Commands:\n"
        "  qmd session list [--status S] [--summarized|--unsummarized] [-n N]\n"
        "  qmd session show [ID] [--from-turn N] [--max-turns N]\n"
        "  qmd session summarize ID --overview TEXT [--decision D]... [--outcome O]...\n"
        "                          [--open-item I]... [--tag T]...   (or --from-json FILE|-)\n\n"
        "Sessions are read from QMD_SESSIONS_DIR (default ~/.claude/projects); summaries are\n"
        "exported as notes into QMD_SESSIONS_VAULT, indexed as the 'sessions' collection."
    )
    return 1


def _memory(app: Any) -> SessionMemory:
    if app.sessions is None:
        raise CommandError("Session memory is not available for this index")
    memory: SessionMemory = app.sessions
    return memory


def session_list(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        listed = _memory(app).list_sessions(args.status, args.summarized, args.limit)
    if args.json:
        rows = [
            {
                "sessionId": s.ref.session_id,
                "project": s.project,
                "status": s.status,
                "hasSummary": s.has_summary,
                "turnCount": s.turns,
                "lastSavedAt": s.ref.modified_at,
                "skippedLines": s.skipped_lines,
            }
            for s in listed
        ]
        out(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return 0
    if not listed:
        out("No sessions found.\n")
        return 0
    for s in listed:
        out(
            f"{s.ref.session_id}  {s.status:<9}  summary: {'yes' if s.has_summary else 'no '}  "
            f"turns: {s.turns:<4}  last saved: {s.ref.modified_at}  ({s.project})\n"
        )
    return 0


def session_show(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        page = _memory(app).transcript(args.session_id, args.from_turn, args.max_turns)
    out(page.text)
    return 0


def _summary_args(args: argparse.Namespace) -> dict[str, Any]:
    if args.from_json is not None:
        try:
            if args.from_json == "-":
                loaded = json.load(sys.stdin)
            else:
                with open(args.from_json, encoding="utf-8") as handle:
                    loaded = json.load(handle)
        except (OSError, ValueError) as error:
            raise CommandError(f"Cannot read the summary JSON: {error}") from None
        if not isinstance(loaded, dict):
            raise CommandError("The summary JSON must be an object")
        return loaded
    return {
        "overview": args.overview or "",
        "decisions": args.decision,
        "outcomes": args.outcome,
        "openItems": args.open_item,
        "tags": args.tag,
    }


def session_summarize(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        saved = _memory(app).summarize(args.session_id, _summary_args(args))
    out(
        f"✓ Summary saved for session {saved.summary.session_id}\n"
        f"Exported to {saved.note_path} (collection {saved.collection})\n"
    )
    return 0


def register(table: CommandTable) -> None:
    group = table.group("session", session_help, "agent session transcripts and summaries")
    listing = group.command("list", session_list, "list sessions, most recent first", "ls")
    listing.add_argument("--status", choices=["active", "compacted", "closed"])
    summarized = listing.add_mutually_exclusive_group()
    summarized.add_argument(
        "--summarized", dest="summarized", action="store_true", default=None, help="with a summary"
    )
    summarized.add_argument(
        "--unsummarized", dest="summarized", action="store_false", help="without a summary"
    )
    listing.add_argument("-n", "--limit", type=int, default=10, help="at most N (default 10)")
    listing.add_argument("--json", action="store_true", help="JSON output")
    show = group.command("show", session_show, "print a transcript (default: the latest)")
    show.add_argument("session_id", nargs="?", metavar="ID")
    show.add_argument("--from-turn", type=int, default=1, help="first turn to show")
    show.add_argument("--max-turns", type=int, default=50, help="turns per page (default 50)")
    summarize = group.command("summarize", session_summarize, "store a session summary")
    summarize.add_argument("session_id", metavar="ID")
    summarize.add_argument("--overview", help="2-3 sentences")
    for flag in ("--decision", "--outcome", "--open-item", "--tag"):
        summarize.add_argument(flag, action="append", default=[], help="repeatable")
    summarize.add_argument("--from-json", metavar="FILE", help="the summary as JSON ('-': stdin)")

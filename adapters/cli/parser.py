"""The `qmd` argument grammar (argparse), assembled from the command modules; kept out of
`main` so `--version` needs none of it."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from adapters.cli.grammar import CommandTable, Parser, add_globals
from adapters.version import IMPLEMENTS, PROG

# The command modules, in the order of `qmd --help`, each with the top-level commands (and
# aliases) it registers: a run imports only the module of its command, so `qmd search` does
# not pay for the imports of `qmd mcp` or `qmd bench` (tests/unit/test_cli_start.py checks
# this index against what each module registers).
COMMAND_MODULES: tuple[tuple[str, frozenset[str]], ...] = (
    ("collections", frozenset({"collection"})),
    ("contexts", frozenset({"context"})),
    ("project", frozenset({"init", "trust"})),
    ("indexing", frozenset({"update", "ls", "status", "cleanup"})),
    ("index", frozenset({"index"})),
    ("models", frozenset({"embed", "doctor"})),
    ("pull", frozenset({"pull"})),
    ("search", frozenset({"search", "vsearch", "vector-search", "query", "deep-search"})),
    ("documents", frozenset({"get", "multi-get"})),
    ("sessions", frozenset({"session"})),
    ("bench", frozenset({"bench"})),
    ("skills", frozenset({"skills", "skill"})),
    ("servers", frozenset({"mcp", "server"})),
)
COMMAND_NAMES = frozenset().union(*(names for _module, names in COMMAND_MODULES))

# The query grammar and examples under the command list (the original prints its grammar
# in `qmd --help` too; this text is ours).
EPILOG = """\
query syntax (qmd query):
  A query is either one line of plain text, which qmd expands into keyword and
  vector searches itself, or a query document: one search per line, each typed.

    query     = plain | "expand:" text | document
    document  = [ "intent:" text NL ] line { line }
    line      = ( "lex:" | "vec:" | "hyde:" ) text NL
    lex text  : keywords; "a phrase" in double quotes; -word excludes a word
    vec text  : a question in plain words (no -exclusions)
    hyde text : a sentence that reads like the answer you hope to find

  A plain line cannot be mixed with typed lines; every typed line is a single
  line with balanced quotes; intent: at most once, and never alone.

examples:
  qmd collection add ~/notes --name notes   index a folder
  qmd search "disk usage"                   keywords, no model needed
  qmd search --strict "disk usage"          only documents with every word
  qmd vsearch "how big is this folder"      meaning, needs the embedding model
  qmd query "how do I undo a commit" --no-rerank -C 10     faster hybrid
  qmd query $'lex: "exit code" -windows\nvec: why does the script stop'
  qmd get notes/ideas.md:40:20              20 lines from line 40
  qmd mcp                                   serve the searches to an agent

environment:
  QMD_EMBED_MODEL, QMD_RERANK_MODEL, QMD_GENERATE_MODEL   model files (or models: in index.yml)
  QMD_FORCE_CPU=1   no GPU      QMD_TRUST_LOCAL_CONFIG=1   trust a checked-in .qmd config
  INDEX_PATH        index file  QMD_EDITOR_URI   editor link template for terminal results

Run 'qmd <command> --help' for a command's options.
"""


def build_parser(command: str | None = None) -> tuple[argparse.ArgumentParser, CommandTable]:
    """The parser and its table of top-level commands: every command, or with `command`
    (a known top-level name) that command alone, from its module alone."""
    parser = Parser(
        prog=PROG,
        description=f"qmd — Quick Markdown Search (a Python implementation of QMD {IMPLEMENTS})",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_globals(parser, top=True)
    parser.add_argument("-v", "--version", action="store_true", help="print the version")
    parser.set_defaults(handler=None)  # a command sets its handler function
    table = CommandTable(parser, "command", "<command>", command)
    for name, names in COMMAND_MODULES:
        if command is None or command in names:
            importlib.import_module(f"adapters.cli.commands.{name}").register(table)
    return parser, table


def first_command(argv: Sequence[str]) -> str | None:
    """The first positional word, skipping global options (and `--index`'s value)."""
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        if token in ("--index", "--index-url"):
            skip = True
            continue
        if token == "--":
            return None
        if token.startswith("-"):
            continue
        return token
    return None

"""The `qmd` argument grammar (argparse), assembled from the command modules; kept out of
`main` so `--version` needs none of it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from adapters.cli.commands import (
    collections,
    contexts,
    documents,
    indexing,
    models,
    search,
    servers,
)
from adapters.cli.grammar import CommandTable, Parser, add_globals
from adapters.version import IMPLEMENTS, PROG

# The order of `qmd --help`.
COMMAND_MODULES = (collections, contexts, indexing, models, search, documents, servers)


def build_parser() -> tuple[argparse.ArgumentParser, CommandTable]:
    """The parser and its table of top-level commands."""
    parser = Parser(
        prog=PROG,
        description=f"qmd — Quick Markdown Search (a Python implementation of QMD {IMPLEMENTS})",
        epilog="Run 'qmd <command> --help' for a command's options.",
    )
    add_globals(parser, top=True)
    parser.add_argument("-v", "--version", action="store_true", help="print the version")
    parser.set_defaults(handler=None)  # a command sets its handler function
    table = CommandTable(parser, "command", "<command>")
    for module in COMMAND_MODULES:
        module.register(table)
    return parser, table


def first_command(argv: Sequence[str]) -> str | None:
    """The first positional word, skipping global options (and `--index`'s value)."""
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        if token == "--index":
            skip = True
            continue
        if token == "--":
            return None
        if token.startswith("-"):
            continue
        return token
    return None

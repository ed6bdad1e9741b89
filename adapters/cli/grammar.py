"""The pieces of the `qmd` argument grammar every command module uses, and the table the
modules register their commands in (each with its handler as a function object)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from adapters.cli.errors import UsageError

FORMATS = ("cli", "json", "csv", "md", "xml", "files")
DEFAULT_MULTI_GET_MAX_BYTES = 65536

Handler = Callable[[argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as `UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse builds a formatter for every argument added; without a width it imports
        # shutil (and its compression modules) to ask for the terminal's, on every start
        return self.formatter_class(prog=self.prog, width=_help_width())  # type: ignore[call-arg]


def _help_width() -> int:
    """The terminal's width less two, as argparse computes it (COLUMNS, then the terminal)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns) - 2
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns - 2  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80 - 2


def positive_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def line_number(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a line number, got {text!r}") from None


def score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value != value:  # NaN
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    return value


def chunk_strategy(text: str) -> str:
    """`regex` is the only chunker; `auto` (the original's AST chunking of code files) is
    refused with the reason rather than accepted and ignored."""
    if text == "regex":
        return text
    if text == "auto":
        raise argparse.ArgumentTypeError(
            "'auto' is not supported: it chunks code files by their syntax tree, and this "
            "implementation has only the markdown-aware 'regex' chunker (the default)"
        )
    raise argparse.ArgumentTypeError(f"expected auto or regex, got {text!r}")


def add_globals(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """`--index` and `--no-gpu` are accepted before or after the command."""
    default: object = None if top else argparse.SUPPRESS
    parser.add_argument("--index", metavar="NAME", default=default, help="use a named index")
    parser.add_argument(
        "--index-url",
        metavar="URL",
        default=default,
        help="use the index in this PostgreSQL database (postgresql://…)",
    )
    parser.add_argument(
        "--no-gpu",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="force CPU for model inference (same as QMD_FORCE_CPU=1)",
    )


def format_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", metavar="KIND", help="cli (default) | " + " | ".join(FORMATS[1:])
    )
    for legacy in FORMATS[1:]:
        parser.add_argument(
            f"--{legacy}",
            dest="legacy_format",
            action="append_const",
            const=legacy,
            help=argparse.SUPPRESS,
        )


def search_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="+", help="the query (several words are joined)")
    parser.add_argument("-n", type=positive_int, metavar="N", help="max results (default 5)")
    parser.add_argument("--all", action="store_true", help="return all matches")
    parser.add_argument("--min-score", type=score, metavar="X", help="minimum score")
    parser.add_argument(
        "-c", "--collection", action="append", metavar="NAME", help="restrict to a collection"
    )
    parser.add_argument("--full", action="store_true", help="show whole documents")
    parser.add_argument("--line-numbers", action="store_true", help="number the lines shown")
    parser.add_argument("--full-path", action="store_true", help="show on-disk paths")
    parser.add_argument("--intent", metavar="TEXT", help="what the search is for")
    parser.add_argument("--no-rerank", action="store_true", help="skip reranking")
    parser.add_argument(
        "-C", "--candidate-limit", type=positive_int, metavar="N", help="candidates to rerank"
    )
    parser.add_argument("--explain", action="store_true", help="show a score breakdown")
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no stage progress on a terminal"
    )
    parser.add_argument(
        "--chunk-strategy", type=chunk_strategy, metavar="regex", help="chunking (regex only)"
    )
    filter_options(parser)
    format_options(parser)


def filter_options(parser: argparse.ArgumentParser) -> None:
    """Metadata filters (docs/spec/filters.md): a JSON AST and its shorthands, all ANDed."""
    parser.add_argument("--filter", metavar="JSON", help="metadata filter (JSON AST)")
    parser.add_argument("--since", metavar="DATE", help="documents dated on/after DATE")
    parser.add_argument("--until", metavar="DATE", help="documents dated on/before DATE")
    parser.add_argument(
        "--type", action="append", metavar="EXT", help="file type (md, pdf, ...), repeatable"
    )
    parser.add_argument(
        "--tag", action="append", metavar="TAG", help="in tags, category or categories; repeatable"
    )


class _Unbuilt(Parser):
    """A command this run does not execute, registered by the module of the one it does: the
    options its module declares on it are dropped unbuilt (each costs a cold start)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        return argparse.Action([], argparse.SUPPRESS)

    def set_defaults(self, **kwargs: Any) -> None:
        return None


# `only` value of a table none of whose commands is built
_NO_COMMAND = ""


class CommandTable:
    """The sub-commands of one parser: `command` adds one with its handler, `group` one that
    has sub-commands of its own (`qmd collection add`). With `only` (a command name or alias),
    that command alone is built: a run parses its own command's arguments only."""

    def __init__(
        self, parent: argparse.ArgumentParser, dest: str, metavar: str, only: str | None = None
    ) -> None:
        self._sub = parent.add_subparsers(dest=dest, metavar=metavar, parser_class=Parser)
        self._only = only

    def command(
        self, name: str, handler: Handler, help_text: str, *aliases: str
    ) -> argparse.ArgumentParser:
        if self._only is not None and self._only not in (name, *aliases):
            return _Unbuilt(prog=name, add_help=False)
        child: Parser = self._sub.add_parser(name, help=help_text, aliases=list(aliases))
        add_globals(child, top=False)
        child.set_defaults(handler=handler)
        return child

    def group(self, name: str, handler: Handler, help_text: str) -> CommandTable:
        """A command whose bare form runs `handler` (its help) and which has sub-commands."""
        child = self.command(name, handler, help_text)
        only = _NO_COMMAND if isinstance(child, _Unbuilt) else None
        return CommandTable(child, "subcommand", "<subcommand>", only)

    def names(self) -> frozenset[str]:
        """Every command name and alias in this table."""
        return frozenset(self._sub.choices)

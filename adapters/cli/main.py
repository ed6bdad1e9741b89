"""`qmd` — the command line: argument parsing, dispatch and error reporting.

Start-up is kept light: only the standard library is imported here. The index, the use
cases and (for model-backed commands) the model adapters are imported by the command that
needs them, so `qmd --version` and `qmd mcp` start fast.

Exit codes: 0 success; 1 a failure the user can act on (QmdError, not found, no match,
unknown command); 2 a usage mistake (unknown flag, bad value, missing argument).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from adapters.cli.formats import FORMATS

PROG = "qmd"
IMPLEMENTS = "2.8.3"
DEFAULT_MULTI_GET_MAX_BYTES = 65536


class UsageError(Exception):
    """A command-line mistake: one line on stderr, exit 2."""


class CommandError(Exception):
    """A failure already worded for the user; `message` goes to stderr as is."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as `UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("qmd-reference")
    except PackageNotFoundError:
        return "0.0.0"


# ------------------------------------------------------------------------------ parser


def _positive_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _line_number(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a line number, got {text!r}") from None


def _score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value != value:  # NaN
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    return value


def _globals(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """`--index` and `--no-gpu` are accepted before or after the command."""
    default: object = None if top else argparse.SUPPRESS
    parser.add_argument("--index", metavar="NAME", default=default, help="use a named index")
    parser.add_argument(
        "--no-gpu",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="force CPU for model inference (same as QMD_FORCE_CPU=1)",
    )


def _format_options(parser: argparse.ArgumentParser) -> None:
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


def _search_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="+", help="the query (several words are joined)")
    parser.add_argument("-n", type=_positive_int, metavar="N", help="max results (default 5)")
    parser.add_argument("--all", action="store_true", help="return all matches")
    parser.add_argument("--min-score", type=_score, metavar="X", help="minimum score")
    parser.add_argument(
        "-c", "--collection", action="append", metavar="NAME", help="restrict to a collection"
    )
    parser.add_argument("--full", action="store_true", help="show whole documents")
    parser.add_argument("--line-numbers", action="store_true", help="number the lines shown")
    parser.add_argument("--full-path", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--intent", metavar="TEXT", help="what the search is for")
    parser.add_argument("--no-rerank", action="store_true", help="skip reranking")
    parser.add_argument(
        "-C", "--candidate-limit", type=_positive_int, metavar="N", help="candidates to rerank"
    )
    parser.add_argument("--explain", action="store_true", help="show a score breakdown")
    parser.add_argument(
        "--chunk-strategy", choices=("auto", "regex"), help="accepted; regex chunking is used"
    )
    _format_options(parser)


Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    from adapters.cli import commands as cmd

    parser = _Parser(
        prog=PROG,
        description=f"qmd — Quick Markdown Search (a Python implementation of QMD {IMPLEMENTS})",
        epilog="Run 'qmd <command> --help' for a command's options.",
    )
    _globals(parser, top=True)
    parser.add_argument("-v", "--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)

    def command(name: str, handler: Handler, help_text: str, *aliases: str) -> _Parser:
        child: _Parser = sub.add_parser(name, help=help_text, aliases=list(aliases))
        _globals(child, top=False)
        child.set_defaults(handler=handler)
        return child

    # -- collection --------------------------------------------------------------------------
    collection = command("collection", cmd.collection_help, "manage indexed folders")
    csub = collection.add_subparsers(
        dest="subcommand", metavar="<subcommand>", parser_class=_Parser
    )

    def subcommand(name: str, handler: Handler, help_text: str, *aliases: str) -> _Parser:
        child: _Parser = csub.add_parser(name, help=help_text, aliases=list(aliases))
        _globals(child, top=False)
        child.set_defaults(handler=handler)
        return child

    add = subcommand("add", cmd.collection_add, "add a folder and index it")
    add.add_argument("path", help="the folder ('.' = current directory)")
    add.add_argument("--name", help="collection name (default: the folder's name)")
    add.add_argument("--mask", "--glob", dest="mask", metavar="GLOB", help="default **/*.md")
    subcommand("list", cmd.collection_list, "list collections", "ls")
    remove = subcommand("remove", cmd.collection_remove, "remove a collection", "rm")
    remove.add_argument("name")
    rename = subcommand("rename", cmd.collection_rename, "rename a collection", "mv")
    rename.add_argument("old")
    rename.add_argument("new")
    show = subcommand("show", cmd.collection_show, "show a collection", "info")
    show.add_argument("name")
    include = subcommand("include", cmd.collection_include, "include in default queries")
    include.add_argument("name")
    exclude = subcommand("exclude", cmd.collection_exclude, "exclude from default queries")
    exclude.add_argument("name")
    update_cmd = subcommand(
        "update-cmd", cmd.collection_update_cmd, "set the pre-update command", "set-update"
    )
    update_cmd.add_argument("name")
    update_cmd.add_argument("cmd", nargs="*", help="shell command (omit to clear)")
    subcommand("help", cmd.collection_help, "show collection help")

    # -- context -----------------------------------------------------------------------------
    context = command("context", cmd.context_help, "attach descriptions to paths")
    xsub = context.add_subparsers(dest="subcommand", metavar="<subcommand>", parser_class=_Parser)

    def context_sub(name: str, handler: Handler, help_text: str, *aliases: str) -> _Parser:
        child: _Parser = xsub.add_parser(name, help=help_text, aliases=list(aliases))
        _globals(child, top=False)
        child.set_defaults(handler=handler)
        return child

    cadd = context_sub("add", cmd.context_add, "add context ([path] text; path '/' = global)")
    cadd.add_argument("words", nargs="+", metavar="[path] text")
    context_sub("list", cmd.context_list, "list contexts", "ls")
    crm = context_sub("rm", cmd.context_remove, "remove context", "remove")
    crm.add_argument("path")

    # -- indexing and maintenance ------------------------------------------------------------
    update = command("update", cmd.update, "re-index every collection")
    update.add_argument("--pull", action="store_true", help="accepted for compatibility")
    ls = command("ls", cmd.ls, "list collections or files")
    ls.add_argument("target", nargs="?", help="collection[/prefix] or qmd://collection/prefix")
    command("status", cmd.status, "show index health")
    cleanup = command("cleanup", cmd.cleanup, "drop inactive documents and orphans, vacuum")
    cleanup.add_argument("--dry-run", action="store_true", help="only report what would go")
    embed = command("embed", cmd.embed, "generate vector embeddings")
    embed.add_argument("-f", "--force", action="store_true", help="re-embed everything")
    embed.add_argument("-c", "--collection", action="append", metavar="NAME")
    embed.add_argument("--max-docs-per-batch", type=_positive_int, metavar="N")
    embed.add_argument("--max-batch-mb", type=_positive_int, metavar="N")
    embed.add_argument("--chunk-strategy", choices=("auto", "regex"))
    embed.add_argument("--timeout", type=_non_negative_int, metavar="MIN")
    command("doctor", cmd.doctor, "diagnose models and index")

    # -- search ------------------------------------------------------------------------------
    _search_options(command("search", cmd.search, "BM25 full-text search"))
    _search_options(command("vsearch", cmd.vsearch, "vector search", "vector-search"))
    _search_options(command("query", cmd.query, "hybrid search", "deep-search"))

    # -- documents ---------------------------------------------------------------------------
    get = command("get", cmd.get, "show a document")
    get.add_argument("file", help="path, qmd://c/p or #docid, optionally :from[:count]")
    get.add_argument("--from", dest="from_line", type=_line_number, metavar="N")
    get.add_argument("-l", dest="max_lines", type=_non_negative_int, metavar="N")
    get.add_argument("--no-line-numbers", action="store_true")
    get.add_argument("--line-numbers", action="store_true", help=argparse.SUPPRESS)
    get.add_argument("--full-path", action="store_true", help="show the on-disk path")
    mget = command("multi-get", cmd.multi_get, "show several documents")
    mget.add_argument("pattern", help="glob, comma-separated list or docids")
    mget.add_argument("-l", dest="max_lines", type=_non_negative_int, metavar="N")
    mget.add_argument(
        "--max-bytes", type=_positive_int, default=DEFAULT_MULTI_GET_MAX_BYTES, metavar="N"
    )
    mget.add_argument("--no-line-numbers", action="store_true")
    mget.add_argument("--line-numbers", action="store_true", help=argparse.SUPPRESS)
    mget.add_argument("--full-path", action="store_true", help="show on-disk paths")
    _format_options(mget)

    # -- servers -----------------------------------------------------------------------------
    mcp = command("mcp", cmd.mcp, "serve MCP over stdio")
    mcp.add_argument("--compat", choices=(IMPLEMENTS,), help="serve the original's surface")
    mcp.add_argument("--force-root", metavar="DIR", help="confine documents to DIR")
    mcp.add_argument("--http", action="store_true", help="HTTP transport (not implemented)")
    mcp.add_argument("--port", type=_positive_int, help=argparse.SUPPRESS)
    mcp.add_argument("--host", help=argparse.SUPPRESS)
    mcp.add_argument("--daemon", action="store_true", help=argparse.SUPPRESS)
    server = command("server", cmd.server, "serve over a transport (seed spelling)")
    server.add_argument("--transport", default="mcp", metavar="KIND", help="mcp (stdio)")
    server.add_argument("--compat", choices=(IMPLEMENTS,))
    server.add_argument("--force-root", metavar="DIR")
    return parser


COMMANDS = frozenset(
    {
        "collection",
        "context",
        "update",
        "ls",
        "status",
        "cleanup",
        "embed",
        "doctor",
        "search",
        "vsearch",
        "vector-search",
        "query",
        "deep-search",
        "get",
        "multi-get",
        "mcp",
        "server",
    }
)


def _first_command(argv: Sequence[str]) -> str | None:
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


# ------------------------------------------------------------------------------ entry point


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args_list)
    except UsageError as error:
        _err(f"{error} (see '{PROG} --help')")
        return 2
    except CommandError as error:
        if error.message:
            _err(error.message)
        return error.code
    except KeyboardInterrupt:
        _err("Interrupted.")
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `qmd ls | head`); stay quiet.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 0
    except Exception as error:  # the last line of defence: no tracebacks for users
        return _report_unexpected(error)


def _report_unexpected(error: Exception) -> int:
    from domain.errors import DocumentNotFound, QmdError

    if isinstance(error, DocumentNotFound):
        from adapters.cli.formats import format_not_found

        sys.stderr.write(format_not_found(error.reference, error.suggestions))
        return 1
    if isinstance(error, QmdError):
        _err(error.message)
        return 1
    if os.environ.get("QMD_DEBUG") == "1":
        traceback.print_exc()
    else:
        _err(
            f"qmd: internal error: {type(error).__name__}: {error} "
            "(set QMD_DEBUG=1 for the traceback)"
        )
    return 1


def _run(argv: list[str]) -> int:
    if not argv:
        build_parser().print_help()
        return 0
    word = _first_command(argv)
    if word is not None and word not in COMMANDS and not _help_or_version(argv):
        raise CommandError(f"Unknown command: {word}\nRun '{PROG} --help' for usage.")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        sys.stdout.write(f"{PROG} {package_version()} (implements QMD {IMPLEMENTS})\n")
        return 0
    if args.no_gpu:
        os.environ["QMD_FORCE_CPU"] = "1"
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    return handler(args)


def _help_or_version(argv: Sequence[str]) -> bool:
    return any(t in ("-h", "--help", "-v", "--version") for t in argv)


def _err(message: str) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())

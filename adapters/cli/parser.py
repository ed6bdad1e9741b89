"""The `qmd` argument grammar (argparse), kept out of `main` so `--version` skips it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from adapters.cli.errors import UsageError

PROG = "qmd"
IMPLEMENTS = "2.8.3"
DEFAULT_MULTI_GET_MAX_BYTES = 65536
FORMATS = ("cli", "json", "csv", "md", "xml", "files")


class _Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as `UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


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
    parser.add_argument("--full-path", action="store_true", help="show on-disk paths")
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description=f"qmd — Quick Markdown Search (a Python implementation of QMD {IMPLEMENTS})",
        epilog="Run 'qmd <command> --help' for a command's options.",
    )
    _globals(parser, top=True)
    parser.add_argument("-v", "--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)

    def command(name: str, handler: str, help_text: str, *aliases: str) -> _Parser:
        child: _Parser = sub.add_parser(name, help=help_text, aliases=list(aliases))
        _globals(child, top=False)
        child.set_defaults(handler=handler)
        return child

    # -- collection --------------------------------------------------------------------------
    collection = command("collection", "collection_help", "manage indexed folders")
    csub = collection.add_subparsers(
        dest="subcommand", metavar="<subcommand>", parser_class=_Parser
    )

    def subcommand(name: str, handler: str, help_text: str, *aliases: str) -> _Parser:
        child: _Parser = csub.add_parser(name, help=help_text, aliases=list(aliases))
        _globals(child, top=False)
        child.set_defaults(handler=handler)
        return child

    add = subcommand("add", "collection_add", "add a folder and index it")
    add.add_argument("path", help="the folder ('.' = current directory)")
    add.add_argument("--name", help="collection name (default: the folder's name)")
    add.add_argument("--mask", "--glob", dest="mask", metavar="GLOB", help="default **/*.md")
    subcommand("list", "collection_list", "list collections", "ls")
    remove = subcommand("remove", "collection_remove", "remove a collection", "rm")
    remove.add_argument("name")
    rename = subcommand("rename", "collection_rename", "rename a collection", "mv")
    rename.add_argument("old")
    rename.add_argument("new")
    show = subcommand("show", "collection_show", "show a collection", "info")
    show.add_argument("name")
    include = subcommand("include", "collection_include", "include in default queries")
    include.add_argument("name")
    exclude = subcommand("exclude", "collection_exclude", "exclude from default queries")
    exclude.add_argument("name")
    update_cmd = subcommand(
        "update-cmd", "collection_update_cmd", "set the pre-update command", "set-update"
    )
    update_cmd.add_argument("name")
    update_cmd.add_argument("cmd", nargs="*", help="shell command (omit to clear)")
    subcommand("help", "collection_help", "show collection help")

    # -- context -----------------------------------------------------------------------------
    context = command("context", "context_help", "attach descriptions to paths")
    xsub = context.add_subparsers(dest="subcommand", metavar="<subcommand>", parser_class=_Parser)

    def context_sub(name: str, handler: str, help_text: str, *aliases: str) -> _Parser:
        child: _Parser = xsub.add_parser(name, help=help_text, aliases=list(aliases))
        _globals(child, top=False)
        child.set_defaults(handler=handler)
        return child

    cadd = context_sub("add", "context_add", "add context ([path] text; path '/' = global)")
    cadd.add_argument("words", nargs="+", metavar="[path] text")
    context_sub("list", "context_list", "list contexts", "ls")
    crm = context_sub("rm", "context_remove", "remove context", "remove")
    crm.add_argument("path")

    # -- indexing and maintenance ------------------------------------------------------------
    update = command("update", "update", "re-index every collection")
    update.add_argument("--pull", action="store_true", help="accepted for compatibility")
    ls = command("ls", "ls", "list collections or files")
    ls.add_argument("target", nargs="?", help="collection[/prefix] or qmd://collection/prefix")
    command("status", "status", "show index health")
    cleanup = command("cleanup", "cleanup", "drop inactive documents and orphans, vacuum")
    cleanup.add_argument("--dry-run", action="store_true", help="only report what would go")
    embed = command("embed", "embed", "generate vector embeddings")
    embed.add_argument("-f", "--force", action="store_true", help="re-embed everything")
    embed.add_argument("-c", "--collection", action="append", metavar="NAME")
    embed.add_argument("--max-docs-per-batch", type=_positive_int, metavar="N")
    embed.add_argument("--max-batch-mb", type=_positive_int, metavar="N")
    embed.add_argument("--chunk-strategy", choices=("auto", "regex"))
    embed.add_argument("--timeout", type=_non_negative_int, metavar="MIN")
    command("doctor", "doctor", "diagnose models and index")

    # -- search ------------------------------------------------------------------------------
    _search_options(command("search", "search", "BM25 full-text search"))
    _search_options(command("vsearch", "vsearch", "vector search", "vector-search"))
    _search_options(command("query", "query", "hybrid search", "deep-search"))

    # -- documents ---------------------------------------------------------------------------
    get = command("get", "get", "show a document")
    get.add_argument("file", help="path, qmd://c/p or #docid, optionally :from[:count]")
    get.add_argument("--from", dest="from_line", type=_line_number, metavar="N")
    get.add_argument("-l", dest="max_lines", type=_non_negative_int, metavar="N")
    get.add_argument("--no-line-numbers", action="store_true")
    get.add_argument("--line-numbers", action="store_true", help=argparse.SUPPRESS)
    get.add_argument("--full-path", action="store_true", help="show the on-disk path")
    mget = command("multi-get", "multi_get", "show several documents")
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
    mcp = command("mcp", "mcp", "serve MCP over stdio")
    mcp.add_argument("--compat", choices=(IMPLEMENTS,), help="serve the original's surface")
    mcp.add_argument(
        "--surface",
        metavar="NAME",
        help="the MCP surface to serve (default: spec; 2.8.3 = --compat)",
    )
    mcp.add_argument("--force-root", metavar="DIR", help="confine documents to DIR")
    mcp.add_argument("--http", action="store_true", help="HTTP transport (not implemented)")
    mcp.add_argument("--port", type=_positive_int, help=argparse.SUPPRESS)
    mcp.add_argument("--host", help=argparse.SUPPRESS)
    mcp.add_argument("--daemon", action="store_true", help=argparse.SUPPRESS)
    server = command("server", "server", "serve over a transport (seed spelling)")
    server.add_argument("--transport", default="mcp", metavar="KIND", help="mcp (stdio)")
    server.add_argument("--compat", choices=(IMPLEMENTS,))
    server.add_argument("--surface", metavar="NAME")
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

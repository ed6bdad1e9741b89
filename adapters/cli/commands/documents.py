"""`qmd get` and `qmd multi-get`: documents by path, URI, docid or pattern."""

from __future__ import annotations

import argparse
import posixpath
from typing import TYPE_CHECKING

from adapters.cli import formats as fmt
from adapters.cli.errors import UsageError
from adapters.cli.grammar import (
    DEFAULT_MULTI_GET_MAX_BYTES,
    CommandTable,
    format_options,
    line_number,
    non_negative_int,
    positive_int,
)
from adapters.cli.runtime import (
    collection_root,
    err,
    full_path,
    open_app,
    out,
    resolve_format,
)
from adapters.version import PROG

if TYPE_CHECKING:
    pass


def get(args: argparse.Namespace) -> int:
    from domain.text import add_line_numbers, slice_lines
    from domain.usecases.retrieval import merge_get_arguments

    request = merge_get_arguments(args.file, args.from_line, args.max_lines)
    with open_app(args) as app:
        meta = app.retrieval.find(
            request.target, original=args.file, own_suggestions=True, unicode_forms=True
        )
        fetched = app.retrieval.fetch(meta)
        root = collection_root(app, meta.collection)
    body = slice_lines(fetched.body, request.from_line, request.max_lines)
    if not args.no_line_numbers:
        body = add_line_numbers(body, request.from_line or 1)
    header = f"qmd://{meta.collection}/{meta.path}  #{meta.docid}"
    if args.full_path:
        on_disk = full_path(root, meta.path)
        if on_disk is not None:
            header = on_disk
        else:
            err("Warning: 1 of 1 result has no file on disk; showing its qmd:// path.")
    out(fmt.format_get(header, fetched.context, body))
    return 0


def multi_get(args: argparse.Namespace) -> int:
    from domain.globs import is_comma_list
    from domain.paths import normalize_docid
    from domain.text import add_line_numbers

    kind = resolve_format(args)
    pattern: str = args.pattern
    stripped = pattern.strip()
    is_list = is_comma_list(stripped) or normalize_docid(stripped) is not None
    with open_app(args) as app:
        result = app.retrieval.multi_get(pattern, args.max_bytes)
        roots = {c.name: c.path for c in app.store.list_collections()}
        for message in result.errors:
            err(message)
        if not result.entries:
            return 1 if (not is_list or normalize_docid(stripped) is not None) else 0
        rows: list[fmt.DocumentRow] = []
        for entry in result.entries:
            meta = entry.meta
            shown = meta.virtual_path if is_list else meta.path
            docid: str | None = meta.docid
            if args.full_path:
                on_disk = full_path(roots.get(meta.collection), meta.path)
                if on_disk is not None:
                    shown, docid = on_disk, None
            if entry.fetched is None:
                rows.append(
                    fmt.DocumentRow(
                        shown,
                        docid,
                        posixpath.basename(shown) or shown,
                        app.retrieval.context_for(meta),
                        skip_reason=f"{entry.skipped_reason}. Use 'qmd get {shown}' to retrieve.",
                    )
                )
                continue
            body = fmt.truncate_lines(entry.fetched.body, args.max_lines)
            if not args.no_line_numbers:
                body = add_line_numbers(body)
            title = meta.title or posixpath.basename(shown)
            rows.append(fmt.DocumentRow(shown, docid, title, entry.fetched.context, body))
    out(fmt.format_documents(rows, kind))
    return 0


__all__ = ["PROG", "UsageError"]


def register(table: CommandTable) -> None:
    one = table.command("get", get, "show a document")
    one.add_argument("file", help="path, qmd://c/p or #docid, optionally :from[:count]")
    one.add_argument("--from", dest="from_line", type=line_number, metavar="N")
    one.add_argument("-l", dest="max_lines", type=non_negative_int, metavar="N")
    one.add_argument("--no-line-numbers", action="store_true")
    one.add_argument("--line-numbers", action="store_true", help=argparse.SUPPRESS)
    one.add_argument("--full-path", action="store_true", help="show the on-disk path")
    many = table.command("multi-get", multi_get, "show several documents")
    many.add_argument("pattern", help="glob, comma-separated list or docids")
    many.add_argument("-l", dest="max_lines", type=non_negative_int, metavar="N")
    many.add_argument(
        "--max-bytes", type=positive_int, default=DEFAULT_MULTI_GET_MAX_BYTES, metavar="N"
    )
    many.add_argument("--no-line-numbers", action="store_true")
    many.add_argument("--line-numbers", action="store_true", help=argparse.SUPPRESS)
    many.add_argument("--full-path", action="store_true", help="show on-disk paths")
    format_options(many)

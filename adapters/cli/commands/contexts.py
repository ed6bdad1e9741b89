"""`qmd context …`: descriptions attached to folders, collections or the whole index."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable
from adapters.cli.runtime import (
    err,
    index_writer_lock,
    open_app,
    out,
    require_collection,
)

if TYPE_CHECKING:
    pass


def context_help(args: argparse.Namespace) -> int:
    err(
        "Usage: qmd context <add|list|rm>\n\n"
        "Commands:\n"
        '  qmd context add [path] "text"  - Add context (defaults to current dir)\n'
        '  qmd context add / "text"       - Add global context to all collections\n'
        "  qmd context list                - List all contexts\n"
        "  qmd context rm <path>           - Remove context"
    )
    return 1


def _context_target(raw: str | None) -> str:
    """`/` stays global, `qmd:` paths stay virtual, anything else becomes an absolute path."""
    from domain.paths import is_virtual_path

    if raw == "/":
        return "/"
    if raw is not None and is_virtual_path(raw):
        return raw
    path = raw or "."
    if path in (".", "./"):
        return os.getcwd()
    if path.startswith("~/"):
        path = os.path.expanduser("~") + path[1:]
    return os.path.realpath(os.path.abspath(path))


def context_add(args: argparse.Namespace) -> int:
    from domain.paths import parse_virtual_path

    words: list[str] = args.words
    raw, text = (None, words[0]) if len(words) == 1 else (words[0], " ".join(words[1:]))
    target = _context_target(raw)
    with open_app(args) as app, index_writer_lock(app):
        if target.startswith(("qmd:", "//")):
            virtual = parse_virtual_path(target)
            if virtual is None:
                raise CommandError(f"Invalid virtual path: {target}")
            require_collection(app, virtual.collection)
        where = app.collections.add_context(target, text)
    if target == "/":
        out(f"✓ Set global context\nContext: {text}\n")
        return 0
    if target.startswith(("qmd:", "//")) and where.endswith("/"):
        where += " (collection root)"
    out(f"✓ Added context for: {where}\nContext: {text}\n")
    return 0


def context_list(args: argparse.Namespace) -> int:
    from domain.paths import parse_virtual_path

    with open_app(args) as app:
        rows = app.collections.list_contexts()
    if not rows:
        out("No contexts configured. Use 'qmd context add' to add one.\n")
        return 0
    lines = ["", "Configured Contexts", ""]
    last = None
    for where, text in rows:
        if where == "/":
            group, label = "*", "  /"
        else:
            virtual = parse_virtual_path(where)
            group = virtual.collection if virtual else where
            prefix = virtual.path if virtual else ""
            label = f"  {prefix}" if prefix else "  / (root)"
        if group != last:
            lines.append(group)
            last = group
        lines.append(label)
        lines.append(f"    {text}")
    out("\n".join(lines) + "\n")
    return 0


def context_remove(args: argparse.Namespace) -> int:
    target = _context_target(args.path)
    with open_app(args) as app, index_writer_lock(app):
        where = app.collections.remove_context(target)
    if target == "/":
        out("✓ Removed global context\n")
    elif target.startswith(("qmd:", "//")):
        out(f"✓ Removed context for: {args.path}\n")
    else:
        out(f"✓ Removed context for: {where}\n")
    return 0


def register(table: CommandTable) -> None:
    context = table.group("context", context_help, "attach descriptions to paths")
    add = context.command("add", context_add, "add context ([path] text; path '/' = global)")
    add.add_argument("words", nargs="+", metavar="[path] text")
    context.command("list", context_list, "list contexts", "ls")
    remove = context.command("rm", context_remove, "remove context", "remove")
    remove.add_argument("path")

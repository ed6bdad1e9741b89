"""`qmd index copy SRC DEST`: a whole index from a SQLite file to a PostgreSQL URL or back."""

from __future__ import annotations

import argparse
import sys
import time

from adapters.cli import formats as fmt
from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable
from adapters.cli.runtime import out


def index_help(args: argparse.Namespace) -> int:
    out(
        "Usage: qmd index copy SRC DEST   (SRC, DEST: an index file or a postgresql:// URL)\n"
        "       qmd index tidy            (remove what unfinished copies left beside the index)\n"
    )
    return 0


def copy(args: argparse.Namespace) -> int:
    import os

    from adapters.cli.index_copy import copy_to, describe
    from adapters.storage.registry import kind_of, open_backend
    from adapters.storage.registry import redacted as redact

    def same(a: str, b: str) -> bool:
        if kind_of(a).schemes or kind_of(b).schemes:  # a database URL
            return a == b
        return os.path.abspath(a) == os.path.abspath(b)

    if same(args.src, args.dest):
        raise CommandError("qmd index copy: SRC and DEST are the same index")
    if not kind_of(args.src).schemes and not os.path.isfile(args.src):
        raise CommandError(f"qmd index copy: no index file {args.src}")
    source = open_backend(args.src)
    try:
        live = sys.stderr.isatty()
        started = time.monotonic()
        last = 0.0

        def progress(done: int, total: int) -> None:
            nonlocal last
            now = time.monotonic()
            if live and (now - last > 0.1 or done >= total):
                last = now
                sys.stderr.write("\r" + fmt.progress_line("copy", done, total, width=20))
                sys.stderr.flush()

        try:
            found = copy_to(source, args.dest, progress)
        finally:
            if live:
                sys.stderr.write("\r\x1b[K")
    finally:
        source.close()
    elapsed = time.monotonic() - started
    out(
        f"Copied {redact(args.src)} -> {redact(args.dest)} in {elapsed:.1f}s\n"
        f"Verified: {describe(list(found.items()))} (same counts as the source)\n"
    )
    return 0


def leftover_lines(location: str) -> list[str]:
    """`qmd doctor`'s lines on what copies that did not finish left beside the index."""
    from adapters.cli.index_copy import try_file_lock
    from adapters.storage.registry import staging_leftovers

    try:
        found = staging_leftovers(location, try_file_lock)
    except Exception as error:  # a diagnosis goes on: say what could not be looked at
        return [f"  Left by a copy: could not look ({type(error).__name__}: {error})"]
    return [f"  Left by a copy: {leftover.what}" for leftover in found]


def tidy(args: argparse.Namespace) -> int:
    """Remove what copies that did not finish left beside the index (REQ-INDEX-COPY-STALE-001):
    staging files in its folder, empty staging schemas in its database."""
    from adapters.cli.index_copy import try_file_lock
    from adapters.cli.runtime import open_app
    from adapters.storage.registry import staging_leftovers

    with open_app(args) as app:
        location = app.db_path
    removed = 0
    for leftover in staging_leftovers(location, try_file_lock):
        if leftover.remove():
            removed += 1
            out(f"Removed {leftover.what}\n")
        else:
            out(f"Kept (in use again): {leftover.what}\n")
    if not removed:
        out("Nothing left by an unfinished copy.\n")
    return 0


def register(table: CommandTable) -> None:
    group = table.group("index", index_help, "copy a whole index between SQLite and PostgreSQL")
    copier = group.command("copy", copy, "copy SRC to DEST (an empty index file or schema)")
    copier.add_argument("src", help="source: an index file or a postgresql:// URL")
    copier.add_argument("dest", help="destination: a new index file or a postgresql:// URL")
    group.command("tidy", tidy, "remove what unfinished copies left beside the index")

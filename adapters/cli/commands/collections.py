"""`qmd collection …`: register, list, rename, include/exclude and remove indexed folders."""

from __future__ import annotations

import argparse
import os
import posixpath
from typing import TYPE_CHECKING

from adapters.cli import formats as fmt
from adapters.cli.commands.project import trust_own_edit
from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable
from adapters.cli.runtime import (
    ProgressBar,
    ago,
    err,
    index_writer_lock,
    open_app,
    out,
    pending_embeddings,
    report_skipped,
    require_collection,
)

if TYPE_CHECKING:
    from adapters.bootstrap import App


def collection_help(args: argparse.Namespace) -> int:
    out(
        "Usage: qmd collection <command> [options]\n\n"
        "Commands:\n"
        "  list                      List all collections\n"
        "  add <path> [--name NAME] [--mask|--glob GLOB]  Add a collection\n"
        "  remove <name>             Remove a collection\n"
        "  rename <old> <new>        Rename a collection\n"
        "  show <name>               Show collection details\n"
        "  update-cmd <name> [cmd]   Set pre-update command (e.g., 'git pull')\n"
        "  include <name>            Include in default queries\n"
        "  exclude <name>            Exclude from default queries\n\n"
        "Examples:\n"
        "  qmd collection add ~/notes --name notes\n"
        "  qmd collection add ~/notes --name notes --mask 'a.md,journals/*.md'\n"
        "  qmd collection update-cmd brain 'git pull'\n"
        "  qmd collection exclude archive\n"
    )
    return 0


def collection_add(args: argparse.Namespace) -> int:
    from domain.model import DEFAULT_PATTERN

    given: str = args.path
    root = os.getcwd() if given == "." else os.path.realpath(os.path.abspath(given))
    if not os.path.exists(root):
        raise CommandError(
            f"Collection path does not exist.\n  Received: {given}\n  Resolved: {root}\n"
            "Provide an existing directory and run 'qmd collection add <path>' again."
        )
    if not os.path.isdir(root):
        raise CommandError(
            f"Collection path is not a directory.\n  Received: {given}\n  Resolved: {root}\n"
            "Choose a directory and run 'qmd collection add <path>' again."
        )
    try:
        root.encode("utf-8")
    except UnicodeEncodeError:
        from domain.source_text import display_path

        raise CommandError(
            f"Collection path is not valid UTF-8: {display_path(root)}\n"
            "Rename the folder (or use a link with a UTF-8 name) and add it again."
        ) from None
    pattern: str = args.mask or DEFAULT_PATTERN
    name: str = args.name or (posixpath.basename(root.rstrip("/")) or "root")
    for label, value in (("Collection name", name), ("Mask", pattern)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise CommandError(f"{label} is not valid UTF-8.") from None
    with open_app(args) as app:
        # checked under the lock: two adds of one name must not both pass the check
        with index_writer_lock(app):
            if app.store.get_collection(name) is not None:
                raise CommandError(
                    f"Collection '{name}' already exists.\nUse a different name with --name <name>"
                )
            try:
                with ProgressBar(name) as progress:
                    collection, counts = app.collections.add(
                        root, name, pattern, progress.update, refuse_unmatched=True
                    )
            except Exception as error:
                failed = _add_failed(app, error, name)
                if failed is None:
                    raise
                raise CommandError(failed) from None
        trust_own_edit(app)
        out(f"Creating collection '{collection.name}'...\n")
        out(f"Collection: {collection.path} ({collection.pattern})\n\n")
        out(fmt.format_update_counts(counts.indexed, counts.updated, counts.unchanged, 0) + "\n")
        report_skipped(counts)
        if not (counts.indexed or counts.updated or counts.unchanged or counts.skipped):
            # a mask matching nothing in a folder holding files was refused above: this folder
            # is empty (REQ-INDEX-MASK-001)
            err(
                f"{collection.path} holds no file yet; 'qmd update' indexes those added later "
                f"that match '{collection.pattern}'.\n"
            )
        pending = pending_embeddings(app)
        if pending:
            out(f"\nRun 'qmd embed' to update embeddings ({pending} unique hashes need vectors)\n")
        out(f"✓ Collection '{collection.name}' created successfully\n")
    return 0


def _add_failed(app: App, error: Exception, name: str) -> str | None:
    """What a `collection add` that the storage failed (a full disk) kept, read back after
    the failure: the collection may be registered (in index.yml, in the index) while its
    files' transaction was rolled back, so "rolled back" alone would be untrue (issue 33)."""
    from adapters.storage.registry import storage_failure

    if storage_failure(error, app.db_path) is None:
        return None
    in_config = any(c.name == name for c in app.config.load_collections())
    try:
        in_index = app.store.get_collection(name) is not None
        counts = {count.name: count.documents for count in app.store.collection_counts()}
    except Exception:  # the index cannot even be read: say only what the file says
        in_index, counts = False, {}
    places = [
        place for place, there in (("index.yml", in_config), ("the index", in_index)) if there
    ]
    if not places:
        kept = (
            f"Nothing of collection '{name}' was kept: it is neither in index.yml nor in the "
            "index. Free some space on that disk and run the command again."
        )
    else:
        kept = (
            f"Kept: collection '{name}' is registered (in {' and '.join(places)}) with "
            f"{counts.get(name, 0)} of its files indexed; not kept: the indexing of its files, "
            "which was rolled back (the index holds every other collection as before). Free "
            f"some space on that disk, then run 'qmd update' to index it (or 'qmd collection "
            f"remove {name}' to drop it)."
        )
    return storage_failure(error, app.db_path, kept)


def collection_list(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        collections = app.collections.list()
        if not collections:
            out("No collections found. Run 'qmd collection add .' to create one.\n")
            return 0
        counts = {c.name: c for c in app.store.collection_counts()}
        lines = [f"Collections ({len(collections)}):", ""]
        for collection in collections:
            count = counts.get(collection.name)
            tag = "" if collection.include_by_default else " [excluded]"
            lines.append(f"{collection.name} (qmd://{collection.name}/){tag}")
            lines.append(f"  Pattern:  {collection.pattern}")
            if collection.ignore:
                lines.append(f"  Ignore:   {', '.join(collection.ignore)}")
            lines.append(f"  Files:    {count.documents if count else 0}")
            lines.append(f"  Updated:  {ago(count.last_modified if count else None)}")
            lines.append("")
        out("\n".join(lines) + "\n")
    return 0


def collection_remove(args: argparse.Namespace) -> int:
    with open_app(args) as app, index_writer_lock(app):
        require_collection(app, args.name, hint=True)
        removed = app.collections.remove(args.name)
    out(f"✓ Removed collection '{args.name}'\n  Deleted {removed} documents\n")
    return 0


def collection_rename(args: argparse.Namespace) -> int:
    with open_app(args) as app, index_writer_lock(app):
        require_collection(app, args.old, hint=True)
        if app.store.get_collection(args.new) is not None:
            raise CommandError(
                f"Collection name already exists: {args.new}\n"
                "Choose a different name or remove the existing collection first."
            )
        app.collections.rename(args.old, args.new)
    out(
        f"✓ Renamed collection '{args.old}' to '{args.new}'\n"
        f"  Virtual paths updated: qmd://{args.old}/ → qmd://{args.new}/\n"
    )
    return 0


def collection_show(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        collection = require_collection(app, args.name)
    lines = [
        f"Collection: {collection.name}",
        f"  Path:     {collection.path}",
        f"  Pattern:  {collection.pattern}",
        f"  Include:  {'yes (default)' if collection.include_by_default else 'no'}",
    ]
    if collection.update_command:
        lines.append(f"  Update:   {collection.update_command}")
    if collection.contexts:
        lines.append(f"  Contexts: {len(collection.contexts)}")
    out("\n".join(lines) + "\n")
    return 0


def _set_included(args: argparse.Namespace, included: bool) -> int:
    with open_app(args) as app, index_writer_lock(app):
        require_collection(app, args.name)
        app.collections.set_included(args.name, included)
    where = "included in" if included else "excluded from"
    out(f"✓ Collection '{args.name}' {where} default queries\n")
    return 0


def collection_include(args: argparse.Namespace) -> int:
    return _set_included(args, True)


def collection_exclude(args: argparse.Namespace) -> int:
    return _set_included(args, False)


def collection_update_cmd(args: argparse.Namespace) -> int:
    command = " ".join(args.cmd).strip() or None
    with open_app(args) as app, index_writer_lock(app):
        require_collection(app, args.name)
        app.collections.set_update_command(args.name, command)
        trust_own_edit(app)
    if command:
        out(f"✓ Set update command for '{args.name}': {command}\n")
    else:
        out(f"✓ Cleared update command for '{args.name}'\n")
    return 0


def register(table: CommandTable) -> None:
    collection = table.group("collection", collection_help, "manage indexed folders")
    add = collection.command("add", collection_add, "add a folder and index it")
    add.add_argument("path", help="the folder ('.' = current directory)")
    add.add_argument("--name", help="collection name (default: the folder's name)")
    add.add_argument("--mask", "--glob", dest="mask", metavar="GLOB", help="default **/*.md")
    collection.command("list", collection_list, "list collections", "ls")
    remove = collection.command("remove", collection_remove, "remove a collection", "rm")
    remove.add_argument("name")
    rename = collection.command("rename", collection_rename, "rename a collection", "mv")
    rename.add_argument("old")
    rename.add_argument("new")
    show = collection.command("show", collection_show, "show a collection", "info")
    show.add_argument("name")
    include = collection.command("include", collection_include, "include in default queries")
    include.add_argument("name")
    exclude = collection.command("exclude", collection_exclude, "exclude from default queries")
    exclude.add_argument("name")
    update_cmd = collection.command(
        "update-cmd", collection_update_cmd, "set the pre-update command", "set-update"
    )
    update_cmd.add_argument("name")
    update_cmd.add_argument("cmd", nargs="*", help="shell command (omit to clear)")
    collection.command("help", collection_help, "show collection help")

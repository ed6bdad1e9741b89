"""`qmd update`, `ls`, `status` and `cleanup`: keeping the index in step with the folders."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from adapters.cli import formats as fmt
from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable
from adapters.cli.runtime import (
    ProgressBar,
    ago,
    err,
    index_writer_lock,
    iso_to_datetime,
    maintenance,
    open_app,
    out,
    pending_embeddings,
    report_skipped,
)
from adapters.storage.registry import kind_named

if TYPE_CHECKING:
    from adapters.bootstrap import App
    from domain.indexing import SkippedFile
    from domain.model import Collection


def update(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        collections = app.collections.list()
        if not collections:
            out("No collections found. Run 'qmd collection add .' to index markdown files.\n")
            return 0
        from adapters.cli.commands.project import approve_for_update, outside_project

        gated_allowed = approve_for_update(app)
        _repair_memory(app)
        out(f"Updating {len(collections)} collection(s)...\n\n")
        written = 0  # by the whole run: the lexical index is tidied for it once, at the end
        for number, collection in enumerate(collections, start=1):
            out(f"[{number}/{len(collections)}] {collection.name} ({collection.pattern})\n")
            if not gated_allowed and outside_project(app, collection.name):
                out(
                    f"Skipping collection '{collection.name}' — path {collection.path} is "
                    "outside this project and this .qmd config is not trusted.\n"
                    "Approve with 'qmd trust'.\n\n"
                )
                continue
            if collection.update_command and gated_allowed:
                _run_update_command(collection)
            out(f"Collection: {collection.path} ({collection.pattern})\n")
            sys.stdout.flush()
            with index_writer_lock(app), ProgressBar(collection.name) as progress:
                counts = app.collections.update([collection.name], progress.update, tidy=False)
            result = counts[collection.name]
            written += result.written
            line = fmt.format_update_counts(
                result.indexed, result.updated, result.unchanged, result.removed
            )
            out(f"\n{line}\n\n")
            sys.stdout.flush()
            report_skipped(result)
        if written:
            with index_writer_lock(app):
                app.collections.tidy_lexical_index(written)
        pending = pending_embeddings(app)
    out("✓ All collections updated.\n")
    if pending:
        out(f"\nRun 'qmd embed' to update embeddings ({pending} unique hashes need vectors)\n")
    return 0


def _repair_memory(app: App) -> None:
    """Seed 004's memory folder, when this index has one: re-embed records edited by hand,
    finish or undo merges a crash interrupted (REQ-MEM-STORE-006)."""
    from adapters.memory_wiring import repair_memory
    from domain.errors import QmdError

    try:
        repaired = repair_memory(app)
    except QmdError as error:
        out(f"Memory not repaired: {error.message}\n\n")
        return
    if repaired:
        out(f"Memory: {repaired} record(s) repaired or re-embedded.\n\n")


def _run_update_command(collection: Collection) -> None:
    import subprocess

    command = collection.update_command or ""
    out(f"    Running update command: {command}\n")
    sys.stdout.flush()
    try:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=collection.path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as error:
        raise CommandError(
            f"✗ Update command for '{collection.name}' could not run: {error}"
        ) from None
    for stream in (done.stdout, done.stderr):
        if stream.strip():
            out("\n".join(f"    {line}" for line in stream.strip().split("\n")) + "\n")
    if done.returncode != 0:
        raise CommandError(
            f"✗ Update command for '{collection.name}' failed with exit code {done.returncode}"
            " — update aborted."
        )


def ls(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        target: str | None = args.target
        if not target:
            collections = app.store.list_collections()
            if not collections:
                out("No collections found. Run 'qmd collection add .' to index files.\n")
                return 0
            counts = {c.name: c.documents for c in app.store.collection_counts()}
            out(fmt.format_ls_collections([(c.name, counts.get(c.name, 0)) for c in collections]))
            return 0
        name, prefix = _ls_target(app, target)
        collection = app.store.get_collection(name)
        if collection is None:
            raise CommandError(
                f"Collection not found: {name}\nRun 'qmd ls' to see available collections."
            )
        documents = sorted(app.store.documents(collection.name), key=lambda m: m.path)
        # the paths just read: the scan is compared with them, not with a second query
        missing = app.collections.not_indexed(collection, {m.path for m in documents})
        if prefix:
            wanted = _ascii_lower(prefix)
            documents = [m for m in documents if _ascii_lower(m.path).startswith(wanted)]
            missing = [s for s in missing if _ascii_lower(s.path).startswith(wanted)]
    if not documents:
        if prefix:
            out(f"No files found under qmd://{name}/{prefix}\n")
        else:
            out(f"No files found in collection: {name}\n")
        _report_not_indexed(f"qmd://{name}/{prefix}", missing)
        return 0
    entries = [
        fmt.LsEntry(
            m.body_length,
            (iso_to_datetime(m.modified_at) or datetime.now(UTC)).astimezone(),
            f"qmd://{collection.name}/{m.path}",
        )
        for m in documents
    ]
    out(fmt.format_ls(entries, datetime.now().astimezone()))
    _report_not_indexed(f"qmd://{name}/{prefix}", missing)
    return 0


def _report_not_indexed(where: str, missing: list[SkippedFile]) -> None:
    """The folder's files the listing lacks, with why, on stderr: stdout keeps the original's
    listing of what is indexed (REQ-INDEX-LS-SKIPPED-001)."""
    if not missing:
        return
    lines = [f"Not listed: {len(missing)} file(s) under {where} are not indexed:"]
    lines += [f"  {skipped.path}: {skipped.reason}" for skipped in missing]
    err("\n".join(lines) + "\n")


def _ascii_lower(text: str) -> str:
    """SQLite LIKE folds ASCII letters only."""
    return "".join(ch.lower() if "A" <= ch <= "Z" else ch for ch in text)


def _ls_target(app: App, target: str) -> tuple[str, str]:
    from domain.paths import parse_virtual_path

    if target.startswith("qmd:"):
        virtual = parse_virtual_path(target)
        if virtual is None:
            raise CommandError(f"Invalid virtual path: {target}")
        return virtual.collection, virtual.path
    if target.startswith("/"):
        normalized = target.rstrip("/")
        names = sorted((c.name for c in app.store.list_collections()), key=len, reverse=True)
        for name in names:
            if normalized == name or normalized.startswith(name + "/"):
                return name, normalized[len(name) :].lstrip("/")
        return normalized, ""
    name, _, rest = target.partition("/")
    return name, rest


def status(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        report = app.status.status()
        collections = {c.name: c for c in app.store.list_collections()}
        global_context = app.store.get_global_context()
        vectors = maintenance(app).vector_count()
        size = app.index_size()
        lines = [
            "QMD Status",
            "",
            f"Index: {app.index_display}",
            f"Size:  {fmt.format_bytes(size)}",
        ]
        kind = kind_named(app.backend)
        if not kind.embedded:
            lines.append(f"Backend: {kind.label}")
        lines += [f"Config: {app.config_path}", "", "Documents"]
        lines.append(f"  Total:    {report.total_documents} files indexed")
        lines.append(f"  Vectors:  {vectors} embedded")
        orphaned = maintenance(app).orphaned_vector_count()
        if orphaned:
            lines.append(
                f"  Orphaned: {orphaned} embedding chunks of removed documents "
                "(not counted above) — run 'qmd cleanup'"
            )
        if report.needs_embedding:
            lines.append(f"  Pending:  {report.needs_embedding} need embedding (run 'qmd embed')")
        latest = max((c.last_updated for c in report.collections), default="")
        if latest:
            lines.append(f"  Updated:  {ago(latest)}")
        if not report.extraction.empty:
            from domain.extraction import report_lines

            # REQ-EXTRACT-005: every file that could not be extracted, by name and reason
            lines += ["", "Extraction"]
            lines += [f"  {line}" for line in report_lines(report.extraction, limit=20)]
        if global_context:
            lines += ["", "Global Context", f"  {_preview(global_context)}"]
        shown = list(report.collections)
        # Configured collections without one indexed file (an empty folder, every file
        # skipped) are listed too: "No collections" would contradict index.yml.
        listed = {entry.name for entry in shown}
        empty = [c for c in collections.values() if c.name not in listed]
        if shown or empty:
            lines += ["", "Collections"]
            for entry in shown:
                configured = collections.get(entry.name)
                tag = "" if configured is None or configured.include_by_default else " [excluded]"
                lines.append(f"  {entry.name} (qmd://{entry.name}/){tag}")
                lines.append(f"    Pattern:  {entry.pattern or ''}")
                lines.append(f"    Files:    {entry.documents} (updated {ago(entry.last_updated)})")
                contexts = dict(configured.contexts) if configured else {}
                if contexts:
                    lines.append(f"    Contexts: {len(contexts)}")
                    for prefix, text in contexts.items():
                        shown_prefix = "/" if prefix in ("", "/") else f"/{prefix}"
                        lines.append(f"      {shown_prefix}: {_preview(text)}")
            for collection in empty:
                tag = "" if collection.include_by_default else " [excluded]"
                lines.append(f"  {collection.name} (qmd://{collection.name}/){tag}")
                lines.append(f"    Pattern:  {collection.pattern}")
                lines.append("    Files:    0 (nothing indexed; run 'qmd update')")
            first = shown[0].name if shown else empty[0].name
            lines += [
                "",
                "Examples",
                "  # List files in a collection",
                f"  qmd ls {first}",
                "  # Get a document",
                f"  qmd get qmd://{first}/path/to/file.md",
                "  # Search within a collection",
                f'  qmd search "query" -c {first}',
            ]
        else:
            lines += ["", "No collections. Run 'qmd collection add .' to index markdown files."]
        from adapters.cli.commands.health import status_sections

        lines += status_sections(app, report, list(collections.values()), global_context)
    out("\n".join(lines) + "\n")
    return 0


def _preview(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def cleanup(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        upkeep = maintenance(app)
        if args.dry_run:
            stats = upkeep.preview_cleanup()
            lines = [
                "Dry run — no changes made.",
                "",
                f"Would clear {stats.get('cache_entries', 0)} cached API responses",
            ]
            verb = "Would remove"
        else:
            stats = upkeep.cleanup()
            if app.chunk_keeper is not None:
                app.chunk_keeper.sync()  # drop the chunk rows of the documents cleanup removed
            lines = [f"✓ Cleared {stats.get('cache_entries', 0)} cached API responses"]
            verb = "✓ Removed"
    vectors = stats.get("orphaned_vectors", 0)
    lines.append(
        f"{verb} {vectors} orphaned embedding chunks"
        if vectors
        else "No orphaned embeddings to remove"
    )
    if stats.get("inactive_documents", 0):
        lines.append(f"{verb} {stats['inactive_documents']} inactive document records")
    if stats.get("orphaned_content", 0):
        lines.append(f"{verb} {stats['orphaned_content']} orphaned content hashes")
    lines.append(
        "Would compact FTS and vacuum the database"
        if args.dry_run
        else "✓ FTS compacted, database vacuumed"
    )
    out("\n".join(lines) + "\n")
    return 0


def register(table: CommandTable) -> None:
    refresh = table.command("update", update, "re-index every collection")
    refresh.add_argument(
        "--pull",
        action="store_true",
        help="ignored, as by the original 2.8.3 (set 'collection update-cmd NAME \"git pull\"')",
    )
    listing = table.command("ls", ls, "list collections or files")
    listing.add_argument("target", nargs="?", help="collection[/prefix] or qmd://collection/prefix")
    table.command("status", status, "show index health")
    upkeep = table.command("cleanup", cleanup, "drop inactive documents and orphans, vacuum")
    upkeep.add_argument("--dry-run", action="store_true", help="only report what would go")

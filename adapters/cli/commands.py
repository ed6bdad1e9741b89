"""Command handlers: each takes the parsed arguments, drives the use cases, prints, and
returns the exit code. Heavy modules (the index, the use cases, models) are imported here,
inside the handlers, never at CLI start-up."""

from __future__ import annotations

import argparse
import os
import posixpath
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from adapters.cli import formats as fmt
from adapters.cli.errors import CommandError, UsageError
from adapters.cli.main import PROG, package_version

if TYPE_CHECKING:
    from adapters.bootstrap import App
    from domain.model import Collection, SearchResult, UpdateCounts
    from domain.usecases.collections import IndexProgress

JSON_SNIPPET_CHARS = 300
SNIPPET_CHARS = 500


def out(text: str) -> None:
    sys.stdout.write(text)


def err(text: str) -> None:
    sys.stderr.write(text.rstrip("\n") + "\n")


@contextmanager
def open_app(args: argparse.Namespace, *, with_models: bool = False) -> Iterator[App]:
    from adapters.bootstrap import build_app

    app = build_app(
        getattr(args, "index", None),
        with_models=with_models,
        force_cpu=bool(getattr(args, "no_gpu", False)),
    )
    try:
        yield app
    except Exception as error:
        from adapters.sqlite.driver import storage_failure

        message = storage_failure(error, app.db_path)
        if message is None:
            raise
        raise CommandError(message) from None
    finally:
        app.close()


def _iso_to_datetime(value: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _ago(value: str | None) -> str:
    moment = _iso_to_datetime(value) if value else None
    if moment is None:
        return "never"
    return fmt.format_time_ago(max(0.0, (datetime.now(UTC) - moment).total_seconds()))


def _pending_embeddings(app: App) -> int:
    return app.status.status().needs_embedding


# ------------------------------------------------------------------------------ collection


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
        if app.store.get_collection(name) is not None:
            raise CommandError(
                f"Collection '{name}' already exists.\nUse a different name with --name <name>"
            )
        with _index_writer_lock(app.db_path), _Progress(name) as progress:
            collection, counts = app.collections.add(root, name, pattern, progress.update)
        out(f"Creating collection '{collection.name}'...\n")
        out(f"Collection: {collection.path} ({collection.pattern})\n\n")
        out(fmt.format_update_counts(counts.indexed, counts.updated, counts.unchanged, 0) + "\n")
        _report_skipped(counts)
        pending = _pending_embeddings(app)
        if pending:
            out(f"\nRun 'qmd embed' to update embeddings ({pending} unique hashes need vectors)\n")
        out(f"✓ Collection '{collection.name}' created successfully\n")
    return 0


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
            lines.append(f"  Updated:  {_ago(count.last_modified if count else None)}")
            lines.append("")
        out("\n".join(lines) + "\n")
    return 0


def collection_remove(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        _require_collection(app, args.name, hint=True)
        removed = app.collections.remove(args.name)
    out(f"✓ Removed collection '{args.name}'\n  Deleted {removed} documents\n")
    return 0


def collection_rename(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        _require_collection(app, args.old, hint=True)
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
        collection = _require_collection(app, args.name)
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
    with open_app(args) as app:
        _require_collection(app, args.name)
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
    with open_app(args) as app:
        _require_collection(app, args.name)
        app.collections.set_update_command(args.name, command)
    if command:
        out(f"✓ Set update command for '{args.name}': {command}\n")
    else:
        out(f"✓ Cleared update command for '{args.name}'\n")
    return 0


def _require_collection(app: App, name: str, *, hint: bool = False) -> Collection:
    collection = app.store.get_collection(name)
    if collection is None:
        extra = "\nRun 'qmd collection list' to see available collections." if hint else ""
        raise CommandError(f"Collection not found: {name}{extra}")
    return collection


# ------------------------------------------------------------------------------ context


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
    with open_app(args) as app:
        if target.startswith(("qmd:", "//")):
            virtual = parse_virtual_path(target)
            if virtual is None:
                raise CommandError(f"Invalid virtual path: {target}")
            _require_collection(app, virtual.collection)
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
    with open_app(args) as app:
        where = app.collections.remove_context(target)
    if target == "/":
        out("✓ Removed global context\n")
    elif target.startswith(("qmd:", "//")):
        out(f"✓ Removed context for: {args.path}\n")
    else:
        out(f"✓ Removed context for: {where}\n")
    return 0


# ------------------------------------------------------------------------------ update


class _Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, label: str | None = None) -> None:
        self._label = label
        self._live = sys.stderr.isatty()
        self._drawn = False

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def update(self, progress: IndexProgress) -> None:
        if not self._live:
            return
        label = self._label or progress.collection
        sys.stderr.write("\r" + fmt.progress_line(label, progress.done, progress.total))
        sys.stderr.flush()
        self._drawn = True


def update(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        collections = app.collections.list()
        if not collections:
            out("No collections found. Run 'qmd collection add .' to index markdown files.\n")
            return 0
        out(f"Updating {len(collections)} collection(s)...\n\n")
        for number, collection in enumerate(collections, start=1):
            out(f"[{number}/{len(collections)}] {collection.name} ({collection.pattern})\n")
            if collection.update_command:
                _run_update_command(collection)
            out(f"Collection: {collection.path} ({collection.pattern})\n")
            sys.stdout.flush()
            with _index_writer_lock(app.db_path), _Progress(collection.name) as progress:
                counts = app.collections.update([collection.name], progress.update)
            result = counts[collection.name]
            line = fmt.format_update_counts(
                result.indexed, result.updated, result.unchanged, result.removed
            )
            out(f"\n{line}\n\n")
            sys.stdout.flush()
            _report_skipped(result)
        pending = _pending_embeddings(app)
    out("✓ All collections updated.\n")
    if pending:
        out(f"\nRun 'qmd embed' to update embeddings ({pending} unique hashes need vectors)\n")
    return 0


def _report_skipped(counts: UpdateCounts) -> None:
    """Every file found but not indexed, with its reason, on stderr (stdout keeps the
    original's report)."""
    if not counts.problems:
        return
    lines = [f"Skipped {len(counts.problems)} file(s) that cannot be indexed:"]
    lines += [f"  {problem.path}: {problem.reason}" for problem in counts.problems]
    err("\n".join(lines) + "\n")


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


# ------------------------------------------------------------------------------ ls / status


def ls(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        target: str | None = args.target
        if not target:
            collections = app.collections.list()
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
        if prefix:
            wanted = _ascii_lower(prefix)
            documents = [m for m in documents if _ascii_lower(m.path).startswith(wanted)]
    if not documents:
        if prefix:
            out(f"No files found under qmd://{name}/{prefix}\n")
        else:
            out(f"No files found in collection: {name}\n")
        return 0
    entries = [
        fmt.LsEntry(
            m.body_length,
            (_iso_to_datetime(m.modified_at) or datetime.now(UTC)).astimezone(),
            f"qmd://{collection.name}/{m.path}",
        )
        for m in documents
    ]
    out(fmt.format_ls(entries, datetime.now().astimezone()))
    return 0


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
        names = sorted((c.name for c in app.collections.list()), key=len, reverse=True)
        for name in names:
            if normalized == name or normalized.startswith(name + "/"):
                return name, normalized[len(name) :].lstrip("/")
        return normalized, ""
    name, _, rest = target.partition("/")
    return name, rest


def status(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        report = app.status.status()
        collections = {c.name: c for c in app.collections.list()}
        global_context = app.store.get_global_context()
        vectors = _vector_count(app)
        size = os.path.getsize(app.db_path) if os.path.exists(app.db_path) else 0
        lines = ["QMD Status", "", f"Index: {app.db_path}", f"Size:  {fmt.format_bytes(size)}"]
        lines += [f"Config: {app.config_path}", "", "Documents"]
        lines.append(f"  Total:    {report.total_documents} files indexed")
        lines.append(f"  Vectors:  {vectors} embedded")
        orphaned = _store_count(app, "orphaned_vector_count")
        if orphaned:
            lines.append(
                f"  Orphaned: {orphaned} embedding chunks of removed documents "
                "(not counted above) — run 'qmd cleanup'"
            )
        if report.needs_embedding:
            lines.append(f"  Pending:  {report.needs_embedding} need embedding (run 'qmd embed')")
        latest = max((c.last_updated for c in report.collections), default="")
        if latest:
            lines.append(f"  Updated:  {_ago(latest)}")
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
                lines.append(
                    f"    Files:    {entry.documents} (updated {_ago(entry.last_updated)})"
                )
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
    out("\n".join(lines) + "\n")
    return 0


def _preview(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _vector_count(app: App) -> int:
    return _store_count(app, "vector_count")


def _store_count(app: App, method: str) -> int:
    counter = getattr(app.store, method, None)
    return int(counter()) if callable(counter) else 0


def cleanup(args: argparse.Namespace) -> int:
    with open_app(args) as app:
        store = app.store
        if args.dry_run:
            preview = getattr(store, "preview_cleanup", None)
            if not callable(preview):
                raise CommandError("cleanup is not available for this index")
            stats: dict[str, int] = preview()
            lines = [
                "Dry run — no changes made.",
                "",
                f"Would clear {stats.get('cache_entries', 0)} cached API responses",
            ]
            verb = "Would remove"
        else:
            run = getattr(store, "cleanup", None)
            if not callable(run):
                raise CommandError("cleanup is not available for this index")
            stats = run()
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


# ------------------------------------------------------------------------------ models


def embed_progress_line(done: int, total: int, chunks: int, elapsed: float, width: int = 20) -> str:
    """`Embedding [#####-----] 120/240 docs, 512 chunks, 8.1 chunks/s, ETA 0:42`."""
    filled = 0 if total <= 0 else min(width, (done * width) // total)
    rate = chunks / elapsed if elapsed > 0 else 0.0
    remaining = (total - done) * (elapsed / done) if done else 0.0
    eta = f"{int(remaining // 60)}:{int(remaining % 60):02d}" if done else "?"
    return (
        f"Embedding [{'#' * filled}{'-' * (width - filled)}] {done}/{total} docs, "
        f"{chunks} chunks, {rate:.1f} chunks/s, ETA {eta}"
    )


@contextmanager
def _index_writer_lock(db_path: str) -> Iterator[None]:
    """One `qmd update` / `qmd collection add` at a time per index, waiting as long as it
    takes: a collection is rewritten in one transaction, which can outlast SQLite's busy
    timeout on a large folder. flock is released by the kernel even on SIGKILL."""
    import fcntl

    lock_path = os.path.join(os.path.dirname(os.path.abspath(db_path)), ".qmd-update.lock")
    with open(lock_path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            err("Another update of this index is running; waiting for it to finish...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def _embed_lock(db_path: str) -> Iterator[bool]:
    """An exclusive lock beside the index, so two `qmd embed` runs cannot interleave writes."""
    import fcntl

    lock_path = os.path.join(os.path.dirname(os.path.abspath(db_path)), ".qmd-embed.lock")
    with open(lock_path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def embed(args: argparse.Namespace) -> int:
    import time

    from domain.errors import UNAVAILABLE, QmdError
    from domain.usecases.embedding import EmbedIndex, EmbedProgress

    if args.collection:
        raise CommandError(
            "qmd embed -c: not supported: vectors belong to document contents, which "
            "collections share; run 'qmd embed' to embed every pending document."
        )
    with open_app(args, with_models=True) as app:
        embedder = app.models.embedder
        if embedder is None:
            raise CommandError(
                "qmd embed: llama-cpp-python is not installed, so no embedding model can run. "
                "Install it with scripts/install_llama.sh."
            )
        with _embed_lock(app.db_path) as locked:
            if not locked:
                # Nothing was embedded by this run: say so and fail (tobi/qmd #724, #935).
                err(
                    "Another embed process is already running; this run embedded nothing. "
                    "Run 'qmd embed' again when it has finished.\n"
                )
                return 1
            use_case = EmbedIndex(app.store, app.vectors, embedder, app.clock)
            pending = len(use_case.pending())
            if not pending and not args.force:
                out("✓ All documents are embedded.\n")
                return 0
            if args.force:
                out(f"Re-embedding every document (-f) with {use_case.model}\n")
            else:
                out(f"Embedding {pending} document(s) with {use_case.model}\n")
            started = time.monotonic()
            deadline = started + args.timeout * 60 if args.timeout else None
            live = sys.stderr.isatty()

            def report(progress: EmbedProgress) -> None:
                elapsed = time.monotonic() - started
                if live:
                    line = embed_progress_line(
                        progress.done_documents,
                        progress.total_documents,
                        progress.embedded_chunks,
                        elapsed,
                    )
                    sys.stderr.write("\r\x1b[K" + line)
                    sys.stderr.flush()
                if deadline is not None and time.monotonic() > deadline:
                    raise QmdError(
                        UNAVAILABLE,
                        f"Stopped after {args.timeout} minute(s) (--timeout); "
                        "run 'qmd embed' again to continue.",
                    )

            batch_bytes = args.max_batch_mb * 1024 * 1024 if args.max_batch_mb else None
            options: dict[str, int] = {}
            if args.max_docs_per_batch:
                options["batch_docs"] = args.max_docs_per_batch
            if batch_bytes:
                options["batch_bytes"] = batch_bytes
            try:
                result = use_case.run(force=args.force, progress=report, **options)
            finally:
                if live:
                    sys.stderr.write("\r\x1b[K")
                    sys.stderr.flush()
            elapsed = time.monotonic() - started
            rate = result.embedded_chunks / elapsed if elapsed > 0 else 0.0
            out(
                f"✓ Embedded {result.embedded_chunks} chunks from "
                f"{result.embedded_documents} documents in {elapsed:.1f}s "
                f"({rate:.1f} chunks/s, model {result.model}, fingerprint {result.fingerprint})\n"
            )
            for error in result.errors:
                err(f"{error}\n")
            if result.failed_documents or result.left_pending:
                err(
                    f"Embedding incomplete: {result.left_pending} document(s) still need "
                    f"embedding ({result.failed_documents} of this run's "
                    f"{result.pending_documents} failed; the others changed while it ran); "
                    "run 'qmd embed' again to retry.\n"
                )
                return 1
            return 0


def doctor(args: argparse.Namespace) -> int:
    from adapters.models.factory import configured_refs
    from adapters.models.llama import describe_backend
    from adapters.models.references import ModelResolver, model_cache_dir

    lines = ["QMD Doctor", ""]
    healthy = True
    with open_app(args) as app:
        lines.append(f"  Index:      {app.db_path}")
        config_state = "present" if os.path.exists(app.config_path) else "missing"
        lines.append(f"  Config:     {app.config_path} ({config_state})")
        total = getattr(app.store, "total_documents", None)
        lines.append(f"  Documents:  {total() if callable(total) else '?'}")
        vec = bool(getattr(app.store, "vec_available", False))
        healthy &= vec
        lines.append(f"  sqlite-vec: {'loaded' if vec else 'not available'}")
        refs = configured_refs(app.config_path, os.environ)
    info = describe_backend(
        refs,
        resolver=ModelResolver(model_cache_dir(os.environ)),
        force_cpu=bool(args.no_gpu),
    )
    if info.get("llama_cpp"):
        backend = "GPU offload" if info.get("gpu_used") else "CPU"
        support = "supported" if info.get("gpu_offload") else "not built in"
        lines.append(
            f"  llama.cpp:  llama-cpp-python {info['llama_cpp']} ({backend}; GPU {support})"
        )
    else:
        healthy = False
        lines.append(f"  llama.cpp:  not available: {info.get('error', 'unknown error')}")
    lines.append(f"  Model cache: {info.get('cache_dir')}")
    for role, entry in info.get("models", {}).items():
        if entry.get("available"):
            state = f"ok ({entry.get('path')})"
        else:
            healthy = False
            state = f"MISSING — {entry.get('error') or 'not downloaded'}; set {entry['env']} "
            state += "or models: in index.yml"
        lines.append(f"  {role:<8} {entry['reference']}: {state}")
    out("\n".join(lines) + "\n")
    return 0 if healthy else 1


# ------------------------------------------------------------------------------ servers


def mcp(args: argparse.Namespace) -> int:
    if args.http or args.daemon:
        raise CommandError(
            "qmd mcp --http: the HTTP transport is not implemented yet; use stdio (qmd mcp).",
            code=2,
        )
    return _serve_stdio(args)


def server(args: argparse.Namespace) -> int:
    transport = str(args.transport).lower()
    if transport not in ("mcp", "stdio"):
        raise CommandError(
            f"qmd server --transport {args.transport}: not implemented yet "
            "(available: mcp over stdio).",
            code=2,
        )
    return _serve_stdio(args)


def _serve_stdio(args: argparse.Namespace) -> int:
    from adapters.bootstrap import build_app
    from adapters.mcp.server import run_stdio_server

    force_root = os.path.realpath(args.force_root) if args.force_root else None
    if force_root is not None and not os.path.isdir(force_root):
        raise CommandError(f"--force-root: not a directory: {args.force_root}", code=2)
    import contextlib

    # stdout belongs to JSON-RPC frames: anything an adapter prints while the app is being
    # assembled goes to stderr instead.
    with contextlib.redirect_stdout(sys.stderr):
        app = build_app(args.index, with_models=True, force_cpu=bool(args.no_gpu))
    return run_stdio_server(app, args.compat, package_version(), force_root)


# ------------------------------------------------------------------------------ search


def resolve_format(args: argparse.Namespace) -> str:
    raw = (args.format or "").strip().lower()
    if raw:
        if raw in fmt.FORMATS:
            return raw
        raise CommandError(
            f"Unknown --format value: {args.format}\nValid: {', '.join(fmt.FORMATS)}"
        )
    legacy: list[str] = args.legacy_format or []
    for candidate in ("csv", "md", "xml", "files", "json"):
        if candidate in legacy:
            return candidate
    return "cli"


def _collections_for(app: App, names: Sequence[str] | None) -> list[str] | None:
    if names:
        for name in names:
            if app.store.get_collection(name) is None:
                raise CommandError(f"Collection not found: {name}")
        return list(dict.fromkeys(names))
    return app.searcher.default_collections() or None


def _limit(args: argparse.Namespace, kind: str, all_limit: int) -> int:
    if args.all:
        return all_limit
    if args.n is not None:
        return int(args.n)
    return 20 if kind in ("json", "files") else 5


def search(args: argparse.Namespace) -> int:
    kind = resolve_format(args)
    query = " ".join(args.query)
    limit = _limit(args, kind, 100000)
    fetch = 100000 if args.all else max(50, limit * 2)
    min_score = args.min_score or 0.0
    chars = JSON_SNIPPET_CHARS if kind == "json" else SNIPPET_CHARS
    _explain_note(args, kind, fused=False)
    with open_app(args) as app:
        names = _collections_for(app, args.collection)
        results = app.searcher.lex_search(query, fetch, names, 0.0, snippet_chars=chars)
        rows_source = [r for r in results if r.score >= min_score][:limit]
        if not results or not rows_source:
            out(fmt.format_empty_results(kind, below_min_score=bool(results)))
            return 0
        rows = _rows(app, rows_source, query, kind, args, chunked=False)
        out(fmt.format_results(rows, kind))
    return 0


def vsearch(args: argparse.Namespace) -> int:
    from domain.errors import UNAVAILABLE, QmdError

    kind = resolve_format(args)
    query = " ".join(args.query)
    limit = _limit(args, kind, 500)
    min_score = 0.3 if args.min_score is None else args.min_score
    _explain_note(args, kind, fused=False)
    with open_app(args, with_models=True) as app:
        names = _collections_for(app, args.collection)
        _warn_pending(app)
        try:
            # A missing expansion model means no expansion, not a failed search.
            results = app.searcher.vector_search(query, limit, names, min_score, degrade=True)
        except QmdError as error:
            if error.code != UNAVAILABLE:
                raise
            err(error.message)
            results = []
        if not results:
            out(fmt.format_empty_results(kind))
            return 0
        out(fmt.format_results(_rows(app, results, query, kind, args, chunked=False), kind))
    return 0


def _explain_note(args: argparse.Namespace, kind: str, *, fused: bool) -> None:
    """Say on stderr when `--explain` will show nothing, instead of ignoring it silently."""
    if not args.explain:
        return
    if not fused:
        err("Note: --explain traces fused scores; only `qmd query` records them.")
    elif kind not in ("cli", "json"):
        err("Note: --explain traces are shown in the cli and json formats only.")


def _warn_pending(app: App) -> None:
    report = app.status.status()
    if report.needs_embedding and report.total_documents:
        share = round(100 * report.needs_embedding / report.total_documents)
        err(
            f"Warning: {report.needs_embedding} documents ({share}%) need embeddings. "
            "Run 'qmd embed' for better results."
        )


def query(args: argparse.Namespace) -> int:
    from adapters.cli.querydoc import parse_query_document
    from domain.usecases.search import DEFAULT_CANDIDATE_LIMIT

    kind = resolve_format(args)
    text = " ".join(args.query)
    document = parse_query_document(text)
    limit = _limit(args, kind, 500)
    min_score = args.min_score or 0.0
    intent = args.intent or (document.intent if document else None)
    candidates = args.candidate_limit or DEFAULT_CANDIDATE_LIMIT
    with open_app(args, with_models=True) as app:
        names = _collections_for(app, args.collection)
        _warn_pending(app)
        if document is not None and document.searches:
            labels = "+".join(s.type for s in document.searches)
            err(f"Structured search: {len(document.searches)} queries ({labels})")
            if intent:
                err(f"├─ intent: {intent}")
            for sub in document.searches:
                preview = sub.query if len(sub.query) <= 72 else sub.query[:69] + "..."
                err(f"├─ {sub.type}: {preview}")
            err("└─ Searching...")
            results = app.searcher.structured_query(
                document.searches,
                limit,
                names,
                min_score,
                candidates,
                intent,
                rerank=not args.no_rerank,
                label=lambda i: f"Line {document.lines[i]}",
                explain=args.explain,
            )
            display = next((s.query for s in document.searches if s.type == "lex"), None)
            display = display or next((s.query for s in document.searches if s.type == "vec"), text)
        else:
            plain = document.expand if document is not None and document.expand else text
            results = app.searcher.hybrid_query(
                plain,
                limit,
                names,
                min_score,
                candidates,
                intent,
                rerank=not args.no_rerank,
                degrade=True,  # stages whose model cannot be had are skipped
                explain=args.explain,
            )
            display = plain
        if not results:
            out(fmt.format_empty_results(kind))
            return 0
        kept = [r for r in results if r.score >= min_score]
        if not kept:
            out(fmt.format_empty_results(kind, below_min_score=True))
            return 0
        _explain_note(args, kind, fused=True)
        out(fmt.format_results(_rows(app, kept, display, kind, args, chunked=True), kind))
    return 0


def _rows(
    app: App,
    results: Sequence[SearchResult],
    query: str,
    kind: str,
    args: argparse.Namespace,
    *,
    chunked: bool,
) -> list[fmt.ResultRow]:
    from domain.snippets import extract_snippet
    from domain.text import add_line_numbers

    chars = JSON_SNIPPET_CHARS if kind == "json" else SNIPPET_CHARS
    intent: str | None = args.intent
    rows: list[fmt.ResultRow] = []
    for result in results:
        body = result.document.body
        meta = result.document.meta
        chunk_pos: int | None = None
        chunk_len: int | None = None
        if chunked and result.chunk is not None:  # the chunk the search chose for this hit
            chunk_pos, chunk_len = result.chunk
        snippet = extract_snippet(body, query, chars, chunk_pos, chunk_len, intent)
        text = body if args.full else snippet.text
        if args.line_numbers and text:
            start = 1 if args.full or kind not in ("cli", "csv") else snippet.line
            text = add_line_numbers(text, start)
        rows.append(
            fmt.ResultRow(
                docid=meta.docid,
                score=result.score,
                file=_result_path(app, args, meta.collection, meta.path),
                title=meta.title,
                context=result.context,
                line=snippet.line,
                text=text,
                full=bool(args.full),
                line_matched=fmt.line_matched(snippet.text, query),
                explain=result.explanation if args.explain else None,
            )
        )
    return rows


def _result_path(app: App, args: argparse.Namespace, collection: str, path: str) -> str:
    """`--full-path` shows the file on disk when it still exists, else the `qmd://` URI."""
    if getattr(args, "full_path", False):
        on_disk = _full_path(_collection_root(app, collection), path)
        if on_disk is not None:
            return on_disk
    return _display_uri(args, collection, path)


def _display_uri(args: argparse.Namespace, collection: str, path: str) -> str:
    """`qmd://c/p`, with `?index=NAME` for a non-default `--index` (as the original)."""
    from urllib.parse import quote

    base = f"qmd://{collection}/{path}"
    name = getattr(args, "index", None)
    if name and name != "index":
        return f"{base}?index={quote(name, safe='')}"
    return base


# ------------------------------------------------------------------------------ documents


def get(args: argparse.Namespace) -> int:
    from domain.text import add_line_numbers, slice_lines
    from domain.usecases.retrieval import merge_get_arguments

    request = merge_get_arguments(args.file, args.from_line, args.max_lines)
    with open_app(args) as app:
        meta = app.retrieval.find(request.target, original=args.file)
        fetched = app.retrieval.fetch(meta)
        root = _collection_root(app, meta.collection)
    body = slice_lines(fetched.body, request.from_line, request.max_lines)
    if not args.no_line_numbers:
        body = add_line_numbers(body, request.from_line or 1)
    header = f"qmd://{meta.collection}/{meta.path}  #{meta.docid}"
    if args.full_path:
        on_disk = _full_path(root, meta.path)
        if on_disk is not None:
            header = on_disk
        else:
            err("Warning: 1 of 1 result has no file on disk; showing its qmd:// path.")
    out(fmt.format_get(header, fetched.context, body))
    return 0


def _collection_root(app: App, name: str) -> str | None:
    collection = app.store.get_collection(name)
    return collection.path if collection else None


def _full_path(root: str | None, relative: str) -> str | None:
    """The on-disk path: `./rel` when under the working directory, else absolute."""
    if root is None:
        return None
    absolute = os.path.realpath(os.path.join(root, relative))
    if not os.path.exists(absolute):
        return None
    cwd = os.path.realpath(os.getcwd())
    if absolute.startswith(cwd + os.sep):
        return "./" + os.path.relpath(absolute, cwd)
    return absolute


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
        roots = {c.name: c.path for c in app.collections.list()}
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
                on_disk = _full_path(roots.get(meta.collection), meta.path)
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

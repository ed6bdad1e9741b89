"""What every `qmd` command shares: output, the application for one run, formats, paths."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from adapters.cli import formats as fmt
from adapters.cli.errors import CommandError

if TYPE_CHECKING:
    from adapters.bootstrap import App
    from domain.indexing import UpdateCounts
    from domain.model import Collection
    from domain.ports import IndexMaintenance
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
        from adapters.storage.registry import storage_failure

        message = storage_failure(error, app.db_path)
        if message is None:
            raise
        raise CommandError(message) from None
    finally:
        app.close()


def lock_file_path(db_path: str, purpose: str) -> str:
    """The lock file of one SQLite index for one kind of writer (`update`, `embed`): beside the
    index file and named after it, so named indexes sharing a folder never block each other."""
    return f"{os.path.abspath(db_path)}.{purpose}.lock"


def _this_process() -> str:
    """`pid N: qmd ARGS` for a lock file (URLs and passwords masked)."""
    from adapters.storage.registry import redacted as redact

    words = [redact(word) for word in sys.argv[1:]]
    return f"pid {os.getpid()}: " + " ".join(["qmd", *words])


@contextmanager
def file_lock(
    db_path: str, purpose: str, wait: bool, waiting: Callable[[str], None] | None = None
) -> Iterator[tuple[bool, str]]:
    """flock on the index's `purpose` lock file: (held, holder). Not held (wait False): holder
    says who holds it, as that process wrote it (`pid N: qmd embed`). With `wait`, `waiting`
    hears the holder before this blocks. The kernel releases the lock even on SIGKILL."""
    import fcntl

    with open(lock_file_path(db_path, purpose), "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "a process that did not say which"
            if not wait:
                yield False, holder
                return
            if waiting is not None:
                waiting(holder)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(_this_process() + "\n")
            handle.flush()
            yield True, ""
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def index_lock(
    app: App, purpose: str, wait: bool, waiting: Callable[[str], None] | None = None
) -> Iterator[tuple[bool, str]]:
    """The lock of `app`'s index for `purpose`, per index: a lock file beside a SQLite index,
    an advisory lock in a PostgreSQL index's schema. (held, holder) as `file_lock`."""
    if app.index_lock is None:
        with file_lock(app.db_path, purpose, wait, waiting) as state:
            yield state
        return
    with app.index_lock(purpose, False) as held:
        if held or not wait:
            holder = "" if held else _advisory_holder(app, purpose)
            yield held, holder
            return
    if waiting is not None:
        waiting(_advisory_holder(app, purpose))
    with app.index_lock(purpose, True):
        yield True, ""


def _advisory_holder(app: App, purpose: str) -> str:
    found = app.lock_holder(purpose) if app.lock_holder is not None else None
    return found or "a process that did not say which"


@contextmanager
def index_writer_lock(app: App) -> Iterator[None]:
    """One `qmd update` / `qmd collection add` at a time per index, waiting as long as it
    takes: a collection is rewritten in one transaction, which can outlast SQLite's busy
    timeout on a large folder. flock is released by the kernel even on SIGKILL; on PostgreSQL
    it is an advisory lock, which the server releases when the session ends."""

    def waiting(holder: str) -> None:
        err(
            f"Another update of the index {app.index_display} is running ({holder}); "
            "waiting for it to finish..."
        )

    with index_lock(app, "update", True, waiting):
        if app.storage is not None and app.storage.replaced():
            # a copy was published over the file while this waited: this process's
            # connection is to the file it replaced, and writes there would be lost
            raise CommandError(
                f"qmd: the index {app.index_display} was replaced (by `qmd index copy`) "
                "while this command waited for it; nothing was written. Run the command "
                "again."
            )
        _mirror_config_as_it_is_now(app)
        yield


def _mirror_config_as_it_is_now(app: App) -> None:
    """Bring the index's mirror of `index.yml` in step with the file as it is now, once the
    writer lock is held. Every command mirrors the file as it read it at start, without the
    lock: one that read the file before another's edit may write that older state after it,
    and an edit made from the older mirror would drop what came between (REQ-CFG-SYNC-003)."""
    if app.storage is None or not os.path.exists(app.config_path):
        return
    from adapters.config.yaml_config import load_config, sync_config_to_store

    sync_config_to_store(
        load_config(app.config_path),
        app.storage.index,
        config_path=app.config_path,
        home=app.home,
    )


def report_skipped(counts: UpdateCounts) -> None:
    """Every file found but not indexed, with its reason, on stderr (stdout keeps the
    original's report)."""
    if not counts.problems:
        return
    lines = [f"Skipped {len(counts.problems)} file(s) that cannot be indexed:"]
    lines += [f"  {problem.path}: {problem.reason}" for problem in counts.problems]
    err("\n".join(lines) + "\n")


def iso_to_datetime(value: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def ago(value: str | None) -> str:
    moment = iso_to_datetime(value) if value else None
    if moment is None:
        return "never"
    return fmt.format_time_ago(max(0.0, (datetime.now(UTC) - moment).total_seconds()))


def pending_embeddings(app: App) -> int:
    return app.status.status().needs_embedding


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


def collections_for(app: App, names: Sequence[str] | None) -> list[str] | None:
    if names:
        for name in names:
            if app.store.get_collection(name) is None:
                raise CommandError(f"Collection not found: {name}")
        return list(dict.fromkeys(names))
    return app.searcher.default_collections() or None


def result_path(app: App, args: argparse.Namespace, collection: str, path: str) -> str:
    """`--full-path` shows the file on disk when it still exists, else the `qmd://` URI."""
    if getattr(args, "full_path", False):
        on_disk = full_path(collection_root(app, collection), path)
        if on_disk is not None:
            return on_disk
    return display_uri(args, collection, path)


def display_uri(args: argparse.Namespace, collection: str, path: str) -> str:
    """`qmd://c/p`, with `?index=NAME` for a non-default `--index` (as the original)."""
    base = f"qmd://{collection}/{path}"
    name = getattr(args, "index", None)
    if name and name != "index":
        from urllib.parse import quote  # a named index only: urllib costs every result list

        return f"{base}?index={quote(name, safe='')}"
    return base


def collection_root(app: App, name: str) -> str | None:
    collection = app.store.get_collection(name)
    return collection.path if collection else None


def full_path(root: str | None, relative: str) -> str | None:
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


class ProgressBar:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, label: str | None = None) -> None:
        self._label = label
        self._live = sys.stderr.isatty()
        self._drawn = False

    def __enter__(self) -> ProgressBar:
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


def require_collection(app: App, name: str, *, hint: bool = False) -> Collection:
    collection = app.store.get_collection(name)
    if collection is None:
        extra = "\nRun 'qmd collection list' to see available collections." if hint else ""
        raise CommandError(f"Collection not found: {name}{extra}")
    return collection


def maintenance(app: App) -> IndexMaintenance:
    """The index's upkeep port; an index without one cannot run this command."""
    if app.maintenance is None:
        raise CommandError("This index offers no maintenance operations.")
    return app.maintenance

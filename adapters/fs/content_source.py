"""`FileSystemSource`: the files of a collection folder, found the way the original's scan does.

The original runs fast-glob with the collection mask split on top-level commas, `onlyFiles`,
`followSymbolicLinks: false`, `dot: false` and the ignore list
`**/{node_modules,.git,.cache,vendor,dist,build}/**` plus the collection's `ignore` globs, then
drops every path with a segment starting with `.`. Here that is a walk of the folder with
`domain.globs.glob_match` applied to each collection-relative path:

* symbolic links are never followed and never listed (fast-glob's dirent for a link is not a
  file when links are not followed), so nothing can escape the folder through a link; a file
  whose real path still lies outside the folder is skipped as well;
* patterns are matched against `/`-separated paths relative to the folder, case-sensitively;
  patterns that climb out of the folder (`../x`) or are absolute match nothing;
* files come in the original's scan order (`domain.paths.scan_order_key`: breadth first, names
  in byte order), which becomes the index's insertion order and so the order of `multi_get`
  glob results. The original's walker reads folders concurrently, so on a very large tree its
  order can stray from this; on the fixtures it is exactly this order. (A comma mask whose
  patterns start in different folders, `*.md,notes/*.txt`, is one fast-glob walk per folder,
  listed one after the other; here it is one walk.)

Unlike the original, nothing is skipped silently (ADR 0022): `scan` reports every file that
matches the mask but cannot be indexed (a name that is not UTF-8 or holds control characters, a
symbolic link, a socket or FIFO) and every folder it cannot list, each with its reason.

`read_text` applies `domain.source_text.decode_document` (UTF-8 with U+FFFD replacement as
Node's `readFileSync(…, "utf-8")` does, UTF-16/32 by BOM, binary files refused) and returns an
`Unreadable` reason instead of text for a file that is denied, gone, not a regular file,
binary, or larger than `max_file_bytes` (never more than that is read). Whitespace-only files
are returned by `scan` and `read_text` alike: the update use case skips them silently, as the
original does.
"""

from __future__ import annotations

import os
import stat as stat_module
import struct
import sys
import time
from collections.abc import Callable, Set
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from domain.indexing import FileStamp, ScanResult, SkippedFile, SourceFile, Unreadable
from domain.model import Collection

EXCLUDED_DIRS = ("node_modules", ".git", ".cache", "vendor", "dist", "build")
DEFAULT_IGNORES = tuple(f"**/{name}/**" for name in EXCLUDED_DIRS)
_EXCLUDED_SEGMENTS = frozenset(EXCLUDED_DIRS)
# The largest file indexed (ADR 0022): indexing holds a few copies of a body (text, FTS
# columns, chunks), so this bounds an update's memory at roughly 10x this.
MAX_FILE_BYTES = 10 * 1024 * 1024


def iso_from_ns(ns: int) -> str:
    """Nanoseconds since the epoch → JS `new Date(ms).toISOString()` (ms rounded like Node)."""
    ms = (ns + 500_000) // 1_000_000
    return _iso_second(ms // 1000) + f"{ms % 1000:03d}Z"


@lru_cache(maxsize=4096)
def _iso_second(seconds: int) -> str:
    # files of one folder often share their second: formatted once (a scan does two per file)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.")


_STATX_BTIME = 0x800
_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_statx: Any = None


def _statx_birth_ns(path: str) -> int | None:
    """File birth time through Linux statx(2) (Python 3.11's os.stat has no birth time there)."""
    import ctypes  # loaded on the first file scanned, not by every command

    global _statx
    if _statx is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _statx = libc.statx
            _statx.argtypes = [
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_int,
                ctypes.c_uint,
                ctypes.c_void_p,
            ]
            _statx.restype = ctypes.c_int
        except (OSError, AttributeError):
            _statx = False
    if _statx is False:
        return None
    buffer = ctypes.create_string_buffer(256)
    flags = _AT_SYMLINK_NOFOLLOW
    if _statx(_AT_FDCWD, os.fsencode(path), flags, _STATX_BTIME, buffer) != 0:
        return None
    mask = struct.unpack_from("<I", buffer, 0)[0]
    if not mask & _STATX_BTIME:
        return None
    seconds, nanos = struct.unpack_from("<qI", buffer, 80)
    return int(seconds) * 1_000_000_000 + int(nanos)


def _birth_ns(st: os.stat_result, path: str) -> int:
    statx_birth = _statx_birth_ns(path) if sys.platform.startswith("linux") else None
    if statx_birth:
        return statx_birth
    birth = getattr(st, "st_birthtime_ns", None)
    if isinstance(birth, int) and birth > 0:
        return birth
    birth_s = getattr(st, "st_birthtime", None)
    if isinstance(birth_s, float | int) and birth_s > 0:
        return int(birth_s * 1_000_000_000)
    # Linux without statx in this Python: the inode change time is the closest stand-in.
    return min(st.st_ctime_ns, st.st_mtime_ns)


_GLOB_SPECIALS = frozenset("*?[]{}()!+@\\/,")


def _suffix_only(pattern: str) -> str | None:
    """`x` for a mask `**/*x` whose `x` is literal (the default `**/*.md`), else None.

    For the paths the walk yields (no segment starts with `.`), such a mask matches exactly
    the paths that end with `x`: `**` takes any folders, `*` any start of the name. A plain
    suffix test is a fraction of the cost of running the glob (tests/unit/test_scan_mask.py).
    """
    if not pattern.startswith("**/*"):
        return None
    suffix = pattern[4:]
    if not suffix or any(ch in _GLOB_SPECIALS for ch in suffix):
        return None
    return suffix


def _entry_mode(entry: os.DirEntry[str]) -> int:
    """The file type of a listed entry as an `st_mode`, without following links: DirEntry
    takes it from the listing (stat(2) only where the file system reports no type)."""
    if entry.is_symlink():
        return stat_module.S_IFLNK
    if entry.is_dir(follow_symlinks=False):
        return stat_module.S_IFDIR
    if entry.is_file(follow_symlinks=False):
        return stat_module.S_IFREG
    return 0  # a socket, a FIFO, a device: "not a regular file"


def _entry_problem(
    relative: str,
    st: os.stat_result | int,
    folder: str,
    real_root: str,
    folder_inside: dict[str, bool],
    name_problem: Callable[[str], str | None],
) -> str | None:
    mode = st.st_mode if isinstance(st, os.stat_result) else st
    if stat_module.S_ISLNK(mode):
        return "symbolic link (links are not followed)"
    if not stat_module.S_ISREG(mode):
        return "not a regular file"
    problem = name_problem(relative)
    if problem is not None:
        return problem
    # The file itself is no link (above), so its real path is its folder's real path
    # and its name, inside the collection folder exactly when that folder's real path is:
    # one realpath and one test per folder instead of one per file.
    inside = folder_inside.get(folder)
    if inside is None:
        inside = folder_inside[folder] = _is_inside(real_root, os.path.realpath(folder))
    return None if inside else "resolves outside the collection folder"


def _is_inside(root: str, target: str) -> bool:
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


class FileSystemSource:
    """`ContentSource` over the local file system."""

    def __init__(self, max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.max_file_bytes = max_file_bytes

    def scan(
        self,
        collection: Collection,
        *,
        stamps: bool = True,
        known: Set[str] = frozenset(),
    ) -> ScanResult:
        # the scanning rules only when a folder is scanned: a search never does
        from domain.globs import glob_match, split_glob_mask
        from domain.paths import scan_order_key
        from domain.source_text import display_path, name_problem

        root = os.path.abspath(os.path.expanduser(collection.path))
        if not os.path.isdir(root):
            # an unmounted drive or a renamed folder must not read as "every file deleted"
            return ScanResult(
                skipped=[SkippedFile("(collection folder)", f"not found: {display_path(root)}")],
                unlisted=[""],
            )
        real_root = os.path.realpath(root)
        patterns = [p for p in split_glob_mask(collection.pattern) if p]
        # before anything is listed: a file changed after this moment is never trusted by
        # its stamp on the next update (domain/stamps.py)
        result = ScanResult(started_ns=time.time_ns())
        folder_inside: dict[str, bool] = {}
        suffixes = [_suffix_only(p) for p in patterns]
        # the usual mask (`**/*.md`, or a comma list of such): one endswith per file
        only_suffixes: tuple[str, ...] | None = tuple(s for s in suffixes if s is not None)
        if len(only_suffixes or ()) < len(suffixes):
            only_suffixes = None
        for relative, absolute, st, folder, name in self._walk(root, result, stamps=stamps):
            if only_suffixes is not None:
                if not relative.endswith(only_suffixes):
                    continue
            elif not any(
                relative.endswith(suffix) if suffix is not None else glob_match(p, relative)
                for p, suffix in zip(patterns, suffixes, strict=True)
            ):
                continue
            # the default ignores name folders the walk never enters: only a file with such a
            # name (a file named `build`, say) can match one
            ignored = collection.ignore
            if name in _EXCLUDED_SEGMENTS:
                ignored = (*DEFAULT_IGNORES, *ignored)
            if ignored and any(glob_match(g, relative) for g in ignored if g):
                continue
            problem = _entry_problem(relative, st, folder, real_root, folder_inside, name_problem)
            if problem is not None:
                result.skipped.append(SkippedFile(display_path(relative), problem))
                continue
            if relative in known:
                continue
            if not isinstance(st, os.stat_result):
                result.files.append(SourceFile(relative, absolute, "", "", 0))
                continue
            result.files.append(
                SourceFile(
                    relative_path=relative,
                    absolute_path=absolute,
                    created_at=iso_from_ns(_birth_ns(st, absolute)),
                    modified_at=iso_from_ns(st.st_mtime_ns),
                    size=st.st_size,
                    stamp=FileStamp(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino),
                )
            )
        result.files.sort(key=lambda f: scan_order_key(f.relative_path))
        result.skipped.sort(key=lambda f: f.path)
        return result

    def _walk(
        self, root: str, result: ScanResult, *, stamps: bool = True
    ) -> list[tuple[str, str, os.stat_result | int, str, str]]:
        """(relative, absolute, lstat, folder, name) of every non-directory entry; folders
        that cannot be listed are added to `result.skipped` and `result.unlisted`. Without
        `stamps`, the entry's file type alone (a link, a regular file, something else) as a
        `st_mode`, from the folder listing: no stat per file on a file system that reports
        types."""
        out: list[tuple[str, str, os.stat_result | int, str, str]] = []
        from domain.source_text import display_path

        pending: list[tuple[str, str]] = [(root, "")]
        while pending:
            directory, prefix = pending.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError as error:
                shown = display_path(prefix) if prefix else "(collection folder)"
                result.skipped.append(SkippedFile(shown, f"folder not readable: {_reason(error)}"))
                result.unlisted.append(prefix)
                continue
            for entry in entries:
                name = entry.name
                # any segment starting with "." is dropped, and excluded dirs are never entered
                if name.startswith("."):
                    continue
                relative = prefix + name
                st: os.stat_result | int
                try:
                    st = entry.stat(follow_symlinks=False) if stamps else _entry_mode(entry)
                except OSError:
                    continue  # vanished since the listing
                if stat_module.S_ISDIR(st.st_mode if isinstance(st, os.stat_result) else st):
                    if name not in EXCLUDED_DIRS:
                        pending.append((entry.path, relative + "/"))
                else:
                    out.append((relative, entry.path, st, directory, name))
        return out

    def read_text(self, absolute_path: str) -> str | Unreadable:
        # O_NONBLOCK: a FIFO swapped in since the scan must not block the update forever.
        try:
            fd = os.open(absolute_path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as error:
            return Unreadable(f"cannot be read: {_reason(error)}", transient=True)
        with os.fdopen(fd, "rb") as handle:
            try:
                st = os.fstat(fd)
                if not stat_module.S_ISREG(st.st_mode):
                    return Unreadable("not a regular file")
                limit = self.max_file_bytes
                if st.st_size > limit:
                    return Unreadable(_too_large(st.st_size, limit))
                # one byte more than the limit: a file that grew since fstat is caught too
                data = handle.read(limit + 1)
            except OSError as error:
                return Unreadable(f"cannot be read: {_reason(error)}", transient=True)
        if len(data) > limit:
            return Unreadable(_too_large(len(data), limit))
        from domain.source_text import decode_document

        return decode_document(data)

    def is_directory(self, path: str) -> bool:
        return os.path.isdir(os.path.expanduser(path))


def _too_large(size: int, limit: int) -> str:
    return f"file too large ({size:,} bytes; the limit is {limit:,} bytes)"

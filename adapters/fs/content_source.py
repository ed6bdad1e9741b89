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

`read_text` decodes UTF-8 with U+FFFD replacement (as Node's `readFileSync(…, "utf-8")` does)
and returns None when the file can't be read. Whitespace-only files are returned by `scan` and
`read_text` alike: the caller (the update use case) skips them silently, as the original does.
"""

from __future__ import annotations

import ctypes
import os
import stat as stat_module
import struct
import sys
from datetime import UTC, datetime
from typing import Any

from domain.globs import glob_match, split_glob_mask
from domain.model import Collection, SourceFile
from domain.paths import scan_order_key

EXCLUDED_DIRS = ("node_modules", ".git", ".cache", "vendor", "dist", "build")
DEFAULT_IGNORES = tuple(f"**/{name}/**" for name in EXCLUDED_DIRS)


def iso_from_ns(ns: int) -> str:
    """Nanoseconds since the epoch → JS `new Date(ms).toISOString()` (ms rounded like Node)."""
    ms = (ns + 500_000) // 1_000_000
    moment = datetime.fromtimestamp(ms // 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


_STATX_BTIME = 0x800
_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_statx: Any = None


def _statx_birth_ns(path: str) -> int | None:
    """File birth time through Linux statx(2) (Python 3.11's os.stat has no birth time there)."""
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


def _is_inside(root: str, target: str) -> bool:
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


class FileSystemSource:
    """`ContentSource` over the local file system."""

    def scan(self, collection: Collection) -> list[SourceFile]:
        root = os.path.abspath(os.path.expanduser(collection.path))
        if not os.path.isdir(root):
            return []
        real_root = os.path.realpath(root)
        patterns = [p for p in split_glob_mask(collection.pattern) if p]
        ignores = (*DEFAULT_IGNORES, *(g for g in collection.ignore if g))
        found: list[SourceFile] = []
        for relative, absolute, st in self._walk(root):
            if not any(glob_match(p, relative) for p in patterns):
                continue
            if any(glob_match(g, relative) for g in ignores):
                continue
            if not _is_inside(real_root, os.path.realpath(absolute)):
                continue
            found.append(
                SourceFile(
                    relative_path=relative,
                    absolute_path=absolute,
                    created_at=iso_from_ns(_birth_ns(st, absolute)),
                    modified_at=iso_from_ns(st.st_mtime_ns),
                    size=st.st_size,
                )
            )
        found.sort(key=lambda f: scan_order_key(f.relative_path))
        return found

    def _walk(self, root: str) -> list[tuple[str, str, os.stat_result]]:
        out: list[tuple[str, str, os.stat_result]] = []
        pending: list[tuple[str, str]] = [(root, "")]
        while pending:
            directory, prefix = pending.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                name = entry.name
                # any segment starting with "." is dropped, and excluded dirs are never entered
                if name.startswith("."):
                    continue
                relative = prefix + name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat_module.S_ISDIR(st.st_mode):
                    if name not in EXCLUDED_DIRS:
                        pending.append((entry.path, relative + "/"))
                elif stat_module.S_ISREG(st.st_mode):
                    out.append((relative, entry.path, st))
        return out

    def read_text(self, absolute_path: str) -> str | None:
        try:
            with open(absolute_path, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        return data.decode("utf-8", errors="replace")

    def is_directory(self, path: str) -> bool:
        return os.path.isdir(os.path.expanduser(path))

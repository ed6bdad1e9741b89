"""qmd_rank (native/qmd_rank.c beside this file): the FTS5 rank function lexical search uses when
it is built, which gives FTS5's `bm25` to the bit while reading each row's token count once
per connection (REQ-SEARCH-RANKCACHE-001, docs/decisions/0051-fts5-rank-function-in-c.md).
A connection loads it at its second lexical search (`Connection.load_rank_function`).

    python -m adapters.sqlite.rank_ext      # build it (scripts/setup.sh does)

Without the library, search ranks with FTS5's `bm25` and finds the same pages, more slowly.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

# in a folder that is not a package: Python would take `qmd_rank.so` beside its modules for
# one of them
SOURCE = Path(__file__).with_name("native") / "qmd_rank.c"
_SUFFIX = {"darwin": ".dylib", "win32": ".dll"}.get(sys.platform, ".so")
# SQLite derives the entry point from the file name: qmd_rank -> sqlite3_qmdrank_init
LIBRARY = SOURCE.with_suffix(_SUFFIX)
RANK_FUNCTION = "qmd_bm25"


class RankBuildError(RuntimeError):
    pass


def build(target: Path = LIBRARY, compiler: str | None = None) -> Path:
    """Compile the library into `target` (replaced whole, so a running process never loads
    half a file). Needs a C compiler and SQLite's headers (Debian: gcc, libsqlite3-dev)."""
    # here, not at the top: every connection imports this module for its constants
    import subprocess
    import tempfile

    command = [compiler or os.environ.get("CC") or "cc", "-O2", "-fPIC", "-shared"]
    if sys.platform == "darwin":
        command += ["-undefined", "dynamic_lookup"]
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(prefix=".qmd_rank-", suffix=_SUFFIX, dir=target.parent)
    os.close(handle)
    try:
        try:
            done = subprocess.run(
                [*command, "-o", partial, str(SOURCE), "-lm"],
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError as exc:
            raise RankBuildError(f"no C compiler ({exc}); install gcc") from exc
        if done.returncode != 0:
            hint = " (install libsqlite3-dev)" if "sqlite3ext.h" in done.stderr else ""
            raise RankBuildError(f"compiling {SOURCE.name} failed{hint}:\n{done.stderr[-2000:]}")
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def load(raw: Any, library: Path = LIBRARY) -> str | None:
    """Load the library into a connection whose extension loading is enabled; the reason it
    was not loaded, or None."""
    if not library.is_file():
        return f"{library.name} is not built (python -m adapters.sqlite.rank_ext)"
    try:
        raw.load_extension(str(library))
    except Exception as exc:  # a stale or foreign build: search falls back to bm25
        return f"{library.name} failed to load ({exc})"
    return None


def main() -> int:
    try:
        built = build()
    except RankBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"built {built}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

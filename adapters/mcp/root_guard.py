"""`--force-root DIR` on the default surface: a request path outside DIR is refused up front.

Which documents exist at all is decided below every surface, by the root scope
(`adapters.fs.root_scope`): outside collections are simply absent, so nothing here looks a
document up. This guard only answers seed 001's "the request path must canonicalize inside
DIR" for references that are filesystem paths (absolute, or `~`), and decides on the string
and the root alone, so the refusal is the same whether or not anything exists there.
"""

from __future__ import annotations

import os

from adapters.fs.root_scope import is_inside
from domain.errors import OUT_OF_ROOT, QmdError
from domain.paths import parse_line_ref


class RootGuard:
    def __init__(self, root: str | None, home: str | None = None) -> None:
        self._root = os.path.realpath(root) if root else None
        self._home = home

    def check_reference(self, reference: str) -> None:
        """Raise `out-of-root` for a filesystem-path reference that resolves outside the root."""
        if self._root is None:
            return
        target = parse_line_ref(reference).target.strip()
        if self._home and (target == "~" or target.startswith("~/")):
            target = self._home + target[1:]
        if not os.path.isabs(target):
            return
        # Lexically outside is refused before any symlink is followed, so the answer never
        # depends on what exists outside the root.
        if not is_inside(self._root, os.path.normpath(target)) or not is_inside(
            self._root, os.path.realpath(target)
        ):
            raise QmdError(OUT_OF_ROOT, f"Outside the permitted root: {reference}")

"""`--force-root DIR`: a fail-closed boundary around what the server will serve (seed 001 INV-1).

Both the path a caller supplies (when it is a filesystem path) and the folder of the
collection a document lives in must canonicalise inside DIR; otherwise `out-of-root`.
"""

from __future__ import annotations

import os

from domain.errors import OUT_OF_ROOT, QmdError
from domain.model import DocumentMeta


class RootGuard:
    def __init__(self, root: str | None) -> None:
        self._root = os.path.realpath(root) if root else None

    @property
    def active(self) -> bool:
        return self._root is not None

    def _inside(self, path: str) -> bool:
        assert self._root is not None
        real = os.path.realpath(path)
        return real == self._root or real.startswith(self._root.rstrip(os.sep) + os.sep)

    def allows_collection(self, collection_path: str | None) -> bool:
        if self._root is None:
            return True
        return collection_path is not None and self._inside(collection_path)

    def reject(self, what: str) -> None:
        raise QmdError(OUT_OF_ROOT, f"Outside the permitted root: {what}")

    def check_reference(self, reference: str) -> None:
        """A filesystem path argument must itself lie inside the root."""
        if self._root is not None and os.path.isabs(reference) and not self._inside(reference):
            self.reject(reference)

    def check_document(self, meta: DocumentMeta, collection_path: str | None) -> None:
        if not self.allows_collection(collection_path):
            self.reject(meta.display_path)

"""Regular expressions compiled on first use.

Compiling a pattern with large character classes costs milliseconds, paid at import by every
process that imports its module: a `qmd search` would compile the title and extraction
patterns it never runs. A `LazyRegex` compiles the first time it is used, once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator


class LazyRegex:
    """`re.compile(pattern, flags)`, deferred to the first `search`, `match`, `sub` or
    `finditer`."""

    __slots__ = ("_compiled", "_flags", "_pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._pattern, self._flags)
        return self._compiled

    def search(self, string: str) -> re.Match[str] | None:
        return self.compiled.search(string)

    def match(self, string: str) -> re.Match[str] | None:
        return self.compiled.match(string)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str) -> str:
        return self.compiled.sub(repl, string)

    def finditer(self, string: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string)

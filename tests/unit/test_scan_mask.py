"""The scan's shortcut for masks `**/*x` (the default `**/*.md`) matches exactly what the glob
matcher does on every path the walk can yield (no segment starting with `.`)."""

from __future__ import annotations

import random

from adapters.fs.content_source import _suffix_only
from domain.globs import glob_match

PIECES = ["a", "md", ".md", "x.md", "notes", "MD", "é", "东京", " ", "-", "tar", ".gz", "~", "#"]


def _paths(count: int) -> list[str]:
    rng = random.Random(7)
    out = ["a.md", "md", "x/md", "x/.mdx", "x/y/z.tar.gz", "n-notes.txt", "a/b-notes.txt"]
    while len(out) < count:
        segments = []
        for _ in range(rng.randint(1, 4)):
            name = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))
            if not name.startswith("."):
                segments.append(name)
        if segments:
            out.append("/".join(segments))
    return out


def test_the_shortcut_agrees_with_the_glob() -> None:
    for pattern in ("**/*.md", "**/*.MD", "**/*md", "**/*.tar.gz", "**/*-notes.txt", "**/*é"):
        suffix = _suffix_only(pattern)
        assert suffix is not None
        for path in _paths(3000):
            assert path.endswith(suffix) == glob_match(pattern, path), (pattern, path)


def test_other_masks_take_the_glob() -> None:
    for pattern in ("**/*.{md,txt}", "**/*.m?", "docs/**/*.md", "*.md", "**/*", "**/*.md/x"):
        assert _suffix_only(pattern) is None, pattern

"""Errors the command line reports itself (no traceback, a chosen exit code)."""

from __future__ import annotations


class UsageError(Exception):
    """A command-line mistake: one line on stderr, exit 2."""


class CommandError(Exception):
    """A failure already worded for the user; `message` goes to stderr as is."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

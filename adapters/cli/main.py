"""`qmd` — the command line: dispatch and error reporting.

Start-up is kept light: `--version` needs nothing but the standard library's `os`/`sys`;
the argument grammar, the index, the use cases and (for model-backed commands) the model
adapters are imported only by the paths that need them, so `qmd mcp` starts fast.

Exit codes: 0 success; 1 a failure the user can act on (QmdError, not found, no match,
unknown command); 2 a usage mistake (unknown flag, bad value, missing argument).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from adapters.cli.errors import CommandError, UsageError
from adapters.version import IMPLEMENTS, PROG, package_version

if TYPE_CHECKING:
    import argparse

Handler = Callable[["argparse.Namespace"], int]

# A cold start allocates some 25,000 objects that live as long as the process (modules,
# classes, functions) and nearly no garbage: at Python's default young-generation threshold
# (700) the collector runs about 30 times during a `qmd search` and frees nothing, about 5 ms
# of its 100 (issue 35). Above the start-up's allocations it does not run at all; a
# long-running command (`qmd mcp`, `qmd embed`) still collects, in larger batches.
YOUNG_GENERATION_THRESHOLD = 50_000


# ------------------------------------------------------------------------------ entry point


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *thresholds[1:])
    try:
        return _dispatch(args_list)
    finally:
        gc.set_threshold(*thresholds)  # as it was, for a caller in the same process


def _dispatch(args_list: list[str]) -> int:
    try:
        return _run(args_list)
    except UsageError as error:
        _err(f"{error} (see '{PROG} --help')")
        return 2
    except CommandError as error:
        if error.message:
            _err(error.message)
        return error.code
    except KeyboardInterrupt:
        _err("Interrupted.")
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `qmd ls | head`); stay quiet.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:  # pragma: no cover - nothing left to do
            return 0
        return 0
    except Exception as error:  # the last line of defence: no tracebacks for users
        return _report_unexpected(error)


def _report_unexpected(error: Exception) -> int:
    from domain.errors import DocumentNotFoundError, QmdError

    if isinstance(error, DocumentNotFoundError):
        from adapters.cli.formats import format_not_found

        sys.stderr.write(format_not_found(error.reference, error.suggestions))
        return 1
    if isinstance(error, QmdError):
        _err(error.message)
        return 1
    storage = _storage_failure(error)
    if storage is not None:
        _err(storage)
        return 1
    if os.environ.get("QMD_DEBUG") == "1":
        import traceback

        traceback.print_exc()
    else:
        _err(
            f"qmd: internal error: {type(error).__name__}: {error} "
            "(set QMD_DEBUG=1 for the traceback)"
        )
    return 1


def _storage_failure(error: Exception) -> str | None:
    """A full disk or failing storage, said plainly instead of as an internal error."""
    import errno

    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return (
            f"qmd: no space left to write {error.filename or 'a file'} ({error.strerror}). "
            "Free some space and run the command again."
        )
    from adapters.storage.registry import storage_failure

    return storage_failure(error, "the index")


def _run(argv: list[str]) -> int:
    if argv and argv[0] in ("-v", "--version"):
        sys.stdout.write(f"{PROG} {package_version()} (implements QMD {IMPLEMENTS})\n")
        return 0
    from adapters.cli.method_cache import cached_methods
    from adapters.config.folders import cache_dir

    # before the first dataclass is created: the command's modules are imported from here on
    with cached_methods(cache_dir(os.environ)):
        return _command(argv)


def _command(argv: list[str]) -> int:
    from adapters.cli.parser import COMMAND_NAMES, build_parser, first_command

    word = first_command(argv)
    if word is not None and word not in COMMAND_NAMES and not _help_or_version(argv):
        raise CommandError(f"Unknown command: {word}\nRun '{PROG} --help' for usage.")
    # only the command's own module is imported (all of them for the top-level help)
    top_help = word is not None and _help_or_version(argv[: argv.index(word)])
    parser, _commands = build_parser(word if word in COMMAND_NAMES and not top_help else None)
    if not argv:
        # Like the original: no command prints the help and fails.
        parser.print_help()
        return 1
    args = parser.parse_args(argv)
    if args.version:
        sys.stdout.write(f"{PROG} {package_version()} (implements QMD {IMPLEMENTS})\n")
        return 0
    if args.no_gpu:
        os.environ["QMD_FORCE_CPU"] = "1"
    index_url = getattr(args, "index_url", None)
    if index_url:
        from adapters.redaction import redact
        from adapters.storage.registry import server_schemes

        schemes = server_schemes()
        if not index_url.startswith(schemes):
            raise UsageError(
                f"--index-url: expected a database URL ({', '.join(schemes)}), "
                f"got {redact(index_url)!r}"
            )
        # the environment carries it to everything this run starts (a daemon, its workers)
        os.environ["INDEX_PATH"] = index_url
    handler: Handler | None = args.handler
    if handler is None:
        parser.print_help()
        return 0
    return handler(args)


def _help_or_version(argv: Sequence[str]) -> bool:
    return any(t in ("-h", "--help", "-v", "--version") for t in argv)


def _err(message: str) -> None:
    """Every failure the command line reports ends here: whatever it quotes (a URL, a driver's
    message) is shown without its secrets (REQ-SEC-SECRET-001)."""
    from adapters.redaction import redact

    sys.stderr.write(redact(message).rstrip("\n") + "\n")
    sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())

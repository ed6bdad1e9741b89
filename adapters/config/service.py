"""The service's settings (`qmd mcp`, `qmd server`): flags, then the environment, then a
`.env` file, then the defaults (docs/decisions/0032 and its 2026-11-29 amendment).

A `.env` file named by the user (`--env-file PATH` or `QMD_ENV_FILE` in the real
environment) is their choice: its variables fill in what the real environment leaves unset,
for every setting the process reads. A surface whose seed configures its service through
`.env` (LDIMS, seed 003 §7.1) also reads the working folder's `.env` when no file is named;
that file came with the folder, so until the user approves it (`qmd trust FILE`, a digest of
its bytes) only the seed's harmless settings are taken from it (`FOLDER_ENV_VARIABLES`,
REQ-SEC-ENV-001) and every other variable it sets is refused and named (REQ-SEC-ENV-002).
The names seed 003 gives (`MCP_REQUEST_TIMEOUT_SECONDS`, `LOG_LEVEL`,
`SEARCH_MAX_RESULTS_HARD_LIMIT`) are read after the `QMD_*` ones. A bad value is refused at
start with `invalid-argument`, naming the variable and where it came from.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from domain.errors import INVALID_ARGUMENT, QmdError

T = TypeVar("T")

ENV_FILE_VAR = "QMD_ENV_FILE"
# the working folder's file, read by a surface whose seed configures it so (seed 003 §7.1)
WORKING_ENV_FILE = ".env"
# a settings file is a few lines; a folder's multi-gigabyte `.env` must not stall the start
ENV_FILE_MAX_BYTES = 1 << 20
DEFAULT_REQUEST_TIMEOUT_S = 30.0
# a call that waits on the client's LLM (sampling) may take minutes on a CPU
DEFAULT_SAMPLING_TIMEOUT_S = 300.0
LOG_LEVELS = {"DEBUG": 10, "INFO": 20, "WARN": 30, "WARNING": 30, "ERROR": 40}

# setting -> the variables that give it, first found wins
VARIABLES: dict[str, tuple[str, ...]] = {
    "request_timeout": ("QMD_REQUEST_TIMEOUT", "MCP_REQUEST_TIMEOUT_SECONDS"),
    "sampling_timeout": ("QMD_SAMPLING_TIMEOUT",),
    "log_level": ("QMD_LOG_LEVEL", "LOG_LEVEL"),
    "max_results": ("QMD_MAX_RESULTS", "SEARCH_MAX_RESULTS_HARD_LIMIT"),
    "models_idle_unload": ("QMD_MODELS_IDLE_UNLOAD",),
    "watch": ("QMD_WATCH",),
}
# What a working folder's `.env` may set before the user approves it (REQ-SEC-ENV-001): seed
# 003 §7.1's service settings, which bound a request's time, the log's detail and the number
# of results; none names a file, an address, a model, a key or a trust decision.
FOLDER_SETTINGS = ("request_timeout", "log_level", "max_results")
FOLDER_ENV_VARIABLES = frozenset(name for setting in FOLDER_SETTINGS for name in VARIABLES[setting])


@dataclass(frozen=True)
class ServiceSettings:
    request_timeout_s: float
    log_level: int
    max_results: int | None  # None: the surface's own bound
    models_idle_unload_s: float  # 0: models stay loaded
    watch: bool
    env: dict[str, str]  # the environment the process runs with (.env under the real one)
    env_file: str | None = None
    # the time limit of a call that waits on the client (REQ-MEM-SAMPLING-001)
    sampling_timeout_s: float = DEFAULT_SAMPLING_TIMEOUT_S
    # what an unapproved working-folder `.env` set and was refused (REQ-SEC-ENV-002)
    refused: tuple[str, ...] = field(default=())

    def refusal_notice(self) -> str | None:
        """One stderr line naming every refused variable and the command that approves the
        file, or None when nothing was refused."""
        if not self.refused or self.env_file is None:
            return None
        allowed = ", ".join(sorted(FOLDER_ENV_VARIABLES))
        return (
            f"qmd: ignored {', '.join(self.refused)} from {self.env_file}: a working folder's "
            f".env may set only {allowed} until you approve it; "
            f"approve it with: qmd trust {shlex.quote(self.env_file)}"
        )


@dataclass(frozen=True)
class EnvFileText:
    """A `.env` file as read once: its text and the digest of its bytes (what
    `qmd trust FILE` approves), so the variables are always those of the approved bytes."""

    path: str
    text: str
    digest: str

    def variables(self, interpolate: bool = True) -> dict[str, str]:
        """`interpolate`: expand `${VAR}` from the process environment; an unapproved file
        gets none, so it cannot copy a secret of the environment into a value that an error
        message or a log would show."""
        from dotenv import dotenv_values

        values = dotenv_values(stream=io.StringIO(self.text), interpolate=interpolate)
        return {key: value for key, value in values.items() if value is not None}


def read_env_file(path: str) -> EnvFileText:
    """A `.env` file (python-dotenv's syntax: quotes, `export`, comments, `${VAR}`
    expansion); a missing, unreadable or oversized file is `invalid-argument`. The bytes are
    read once, so the digest is of exactly what is parsed."""
    if not os.path.isfile(path):
        raise QmdError(INVALID_ARGUMENT, f"env file not found: {path}")
    try:
        with open(path, "rb") as handle:
            data = handle.read(ENV_FILE_MAX_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise QmdError(INVALID_ARGUMENT, f"env file {path} cannot be read: {error}") from error
    if len(data) > ENV_FILE_MAX_BYTES:
        raise QmdError(
            INVALID_ARGUMENT, f"env file {path} is over {ENV_FILE_MAX_BYTES} bytes; not read"
        )
    return EnvFileText(path, text, env_file_digest(data))


def env_file_digest(data: bytes) -> str:
    """sha256 of the file's bytes: any edit asks for approval again."""
    return hashlib.sha256(data).hexdigest()


def env_file_approved(env_file: EnvFileText, environ: Mapping[str, str]) -> bool:
    """Approved by `qmd trust FILE`, in the trust file of the real environment's config
    folder (never one the file itself names)."""
    from adapters.config.trust import TrustStore

    return TrustStore(environ).is_env_trusted(env_file.path, env_file.digest)


def working_env_file(folder: str) -> str | None:
    path = os.path.join(os.path.abspath(folder), WORKING_ENV_FILE)
    return path if os.path.isfile(path) else None


def resolve_settings(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    env_file: str | None = None,
    working_folder: str | None = None,
) -> ServiceSettings:
    """`flags`: the command line's values (None where not given), keyed like VARIABLES.
    `env_file` (else `QMD_ENV_FILE`) names the user's file, honoured in full; without one,
    `working_folder` (given for a surface that reads it) supplies its `.env`, honoured in full
    once approved and otherwise only for FOLDER_ENV_VARIABLES."""
    path = env_file or environ.get(ENV_FILE_VAR) or None
    refused: tuple[str, ...] = ()
    from_file: dict[str, str] = {}
    if path:
        from_file = read_env_file(path).variables()
    elif working_folder is not None and (found := working_env_file(working_folder)):
        path = found
        text = read_env_file(found)
        if env_file_approved(text, environ):
            from_file = text.variables()
        else:
            variables = text.variables(interpolate=False)
            from_file = {k: v for k, v in variables.items() if k in FOLDER_ENV_VARIABLES}
            refused = tuple(sorted(set(variables) - FOLDER_ENV_VARIABLES))
    env = {**from_file, **environ}

    def pick(setting: str, parse: Callable[[str], T], default: T) -> T:
        flag = flags.get(setting)
        if flag is not None:
            return flag  # type: ignore[no-any-return]  # argparse has checked it
        for name in VARIABLES[setting]:
            raw = env.get(name)
            if raw is None or not raw.strip():
                continue
            try:
                return parse(raw.strip())
            except ValueError as error:
                where = f" (from {path})" if name in from_file and name not in environ else ""
                raise QmdError(INVALID_ARGUMENT, f"{name}={raw!r}{where}: {error}") from None
        return default

    return ServiceSettings(
        request_timeout_s=pick("request_timeout", positive_seconds, DEFAULT_REQUEST_TIMEOUT_S),
        log_level=pick("log_level", log_level, LOG_LEVELS["INFO"]),
        max_results=pick("max_results", positive_count, None),
        models_idle_unload_s=pick("models_idle_unload", idle_seconds, 0.0),
        watch=pick("watch", boolean, False),
        env=env,
        env_file=path,
        sampling_timeout_s=pick("sampling_timeout", positive_seconds, DEFAULT_SAMPLING_TIMEOUT_S),
        refused=refused,
    )


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise ValueError(f"expected a positive number of seconds, got {text!r}")
    return value


def idle_seconds(text: str) -> float:
    """Seconds without a model call before the models are unloaded; 0 = never."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number of seconds (0 = never), got {text!r}") from None
    if not value >= 0 or math.isinf(value):
        raise ValueError(f"expected 0 or a positive number of seconds, got {text!r}")
    return value


def positive_count(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise ValueError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise ValueError(f"expected a number of at least 1, got {text!r}")
    return value


def log_level(text: str) -> int:
    level = LOG_LEVELS.get(text.upper())
    if level is None:
        raise ValueError(f"expected one of DEBUG, INFO, WARN, ERROR, got {text!r}")
    return level


def boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")

"""The service's settings (`qmd mcp`, `qmd server`): flags, then the environment, then a
`.env` file, then the defaults (docs/decisions/0032).

The `.env` file is read only when named (`--env-file PATH` or `QMD_ENV_FILE`): a file in
whatever folder the server happens to start in is not trusted to reconfigure it (the same
reason a project-local `index.yml` needs approval). The exception is a surface whose seed
says its service is configured through `.env` (LDIMS, seed 003 §7.1): it reads the working
folder's `.env` when no file is named. Its variables fill in what the real
environment leaves unset, for every `QMD_*` setting the process reads (models, token,
allow-lists too), not only the ones below. The names seed 003 gives
(`MCP_REQUEST_TIMEOUT_SECONDS`, `LOG_LEVEL`, `SEARCH_MAX_RESULTS_HARD_LIMIT`) are read too,
after the `QMD_*` ones. A bad value is refused at start with `invalid-argument`, naming the
variable and where it came from.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from domain.errors import INVALID_ARGUMENT, QmdError

T = TypeVar("T")

ENV_FILE_VAR = "QMD_ENV_FILE"
# the working folder's file, read by a surface whose seed configures it so (seed 003 §7.1)
WORKING_ENV_FILE = ".env"
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


def read_env_file(path: str) -> dict[str, str]:
    """`KEY=value` lines of a `.env` file (python-dotenv's syntax: quotes, `export`,
    comments, `${VAR}` expansion); a missing or unreadable file is `invalid-argument`."""
    from dotenv import dotenv_values

    if not os.path.isfile(path):
        raise QmdError(INVALID_ARGUMENT, f"env file not found: {path}")
    try:
        with open(path, encoding="utf-8") as handle:
            values = dotenv_values(stream=handle, interpolate=True)
    except (OSError, UnicodeDecodeError) as error:
        raise QmdError(INVALID_ARGUMENT, f"env file {path} cannot be read: {error}") from error
    return {key: value for key, value in values.items() if value is not None}


def merged_environment(
    environ: Mapping[str, str], env_file: str | None
) -> tuple[dict[str, str], dict[str, str]]:
    """(the environment with the file's variables under the real ones, the file's own)."""
    path = env_file or environ.get(ENV_FILE_VAR) or None
    from_file = read_env_file(path) if path else {}
    return {**from_file, **environ}, from_file


def resolve_settings(
    flags: Mapping[str, Any], environ: Mapping[str, str], env_file: str | None = None
) -> ServiceSettings:
    """`flags`: the command line's values (None where not given), keyed like VARIABLES."""
    env, from_file = merged_environment(environ, env_file)
    path = env_file or environ.get(ENV_FILE_VAR) or None

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

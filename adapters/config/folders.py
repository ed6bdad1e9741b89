"""The home and cache folders, from the environment: what the configuration's paths and the
start-up's caches share, in a module that creates no class, so `qmd` can find its cache folder
before it creates any (adapters/cli/method_cache.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping


def home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or env.get("USERPROFILE") or os.path.expanduser("~") or "/tmp"


def expanded(value: str, env: Mapping[str, str]) -> str:
    """A leading `~` of a folder or file setting as the home folder: a service manager or a
    `.env` file passes `~/...` unexpanded, which made a folder named `~` in the working
    folder (QMD_CONFIG_DIR) or an index that could not be opened (INDEX_PATH)."""
    if value == "~" or value.startswith("~/"):
        return home(env) + value[1:]
    return value


def cache_dir(env: Mapping[str, str]) -> str:
    base = expanded(env.get("XDG_CACHE_HOME") or "", env) or os.path.join(home(env), ".cache")
    return os.path.join(os.path.abspath(base), "qmd")

"""Where things are: the index (a SQLite file or a PostgreSQL URL) and its config file, the
memory folder, and the session transcripts and summaries. Paths and names only: nothing here
opens an index or builds an adapter (that is adapters/bootstrap.py's wiring)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adapters.config.yaml_config import (
    QmdConfig,
    cache_dir,
    first_own_config,
    is_local_config_path,
    load_config,
    own_config_path,
    resolve_paths,
    save_config,
)
from adapters.storage.registry import is_server, kind_of
from domain.errors import INVALID_ARGUMENT, QmdError
from domain.model import Collection

if TYPE_CHECKING:
    from domain.usecases.memorize import Thresholds

MEMORY_COLLECTION = "memory"

ConfigLoader = Callable[[str], QmdConfig]


def config_reader() -> ConfigLoader:
    """`load_config` that parses each file once: one command start reads `index.yml` once,
    whoever asks (location, trust, models)."""
    parsed: dict[str, QmdConfig] = {}

    def load(path: str) -> QmdConfig:
        if path not in parsed:
            parsed[path] = load_config(path)
        return parsed[path]

    return load


def index_location(
    index_name: str | None,
    env: Mapping[str, str],
    index_url: str | None = None,
    load: ConfigLoader = load_config,
) -> tuple[str, str]:
    """(index location, config path): a SQLite file or a PostgreSQL URL, chosen by
    `--index-url`, then `INDEX_PATH`, then `index_url:` in the (global) index.yml, then the
    default SQLite file. A project-local `.qmd/index.yml` cannot point the index at a database:
    a checked-out folder must not send your documents to a server it names.

    A PostgreSQL index named by `--index-url` or `INDEX_PATH` keeps its collections in its own
    `NAME@postgresql-HOST-PORT-DB-SCHEMA.yml` beside `NAME.yml`, so it never shares them with
    the SQLite index of that name, unless `NAME.yml` itself says `index_url:` that URL (the
    user chose to share it). A SQLite index keeps `NAME.yml`, as in the original."""
    db_path, config_path = resolve_paths(index_name, env)
    url = index_url or env.get("INDEX_PATH") or ""
    if is_server(url):
        if not is_local_config_path(config_path):
            named = load(config_path).extra.get("index_url")
            if isinstance(named, str) and named.strip() == url:
                return url, config_path
        return url, own_config_path(config_path, kind_of(url).config_label(url))
    if env.get("INDEX_PATH") or is_local_config_path(config_path):
        return db_path, config_path
    configured = load(config_path).extra.get("index_url")
    if isinstance(configured, str) and is_server(configured.strip()):
        return configured.strip(), config_path
    return db_path, config_path


def write_first_own_config(
    config_path: str,
    shared_path: str,
    held: list[Collection],
    global_context: str | None,
) -> None:
    """Write the first own `index.yml` of a PostgreSQL index (`index_location`): the shared
    file's settings, and the collections the index holds documents of (`held`). Before, such
    an index mirrored the shared file, so it also listed the local index's collections, with
    0 files; those are left out and forgotten by the sync that follows."""
    if not held and not os.path.exists(shared_path):
        return  # nothing to carry over: the file appears with the first `collection add`
    shared = load_config(shared_path)
    save_config(config_path, first_own_config(shared, held, global_context))


def memory_folder(index_location: str, env: Mapping[str, str] | None = None) -> str:
    """Seed 004's memory folder: `QMD_MEMORY_DIR`, else `<index name>-memory` beside the
    index (so every index has its own memory); for an index on a server, in the cache folder,
    named after the server, database and schema."""
    environ = os.environ if env is None else env
    chosen = environ.get("QMD_MEMORY_DIR")
    if chosen:
        return os.path.realpath(os.path.expanduser(chosen))
    if is_server(index_location):
        label = kind_of(index_location).index_label(index_location)
        return os.path.join(cache_dir(environ), f"{label}-memory")
    stem = os.path.splitext(os.path.basename(index_location))[0] or "index"
    return os.path.join(os.path.dirname(os.path.abspath(index_location)), f"{stem}-memory")


def memory_thresholds(env: Mapping[str, str] | None = None) -> Thresholds:
    """`QMD_MEMORY_TOPIC_THRESHOLD` and `QMD_MEMORY_FUSION_THRESHOLD`, each in 0..1; unset,
    the embedding model's calibration applies (domain/memory.py CALIBRATIONS)."""
    from domain.memory import require_threshold  # the memory's code only where it is used
    from domain.usecases.memorize import Thresholds

    environ = os.environ if env is None else env
    values: list[float | None] = []
    for name in ("QMD_MEMORY_TOPIC_THRESHOLD", "QMD_MEMORY_FUSION_THRESHOLD"):
        raw = environ.get(name, "").strip()
        try:
            number = float(raw) if raw else None
        except ValueError:
            raise QmdError(INVALID_ARGUMENT, f"{name} must be a number between 0 and 1") from None
        values.append(None if number is None else require_threshold(name, number, 0.0))
    return Thresholds(topic=values[0], fusion=values[1])


@dataclass(frozen=True)
class SessionFolders:
    """Where agent sessions are read from and their summary notes written to."""

    transcripts: str
    vault: str


def session_folders(env: Mapping[str, str]) -> SessionFolders:
    """Sessions from `QMD_SESSIONS_DIR` (default `~/.claude/projects`); summary notes into
    `QMD_SESSIONS_VAULT` (default `$XDG_DATA_HOME/qmd/sessions`, else
    `~/.local/share/qmd/sessions`)."""
    home = env.get("HOME") or os.path.expanduser("~")
    transcripts = env.get("QMD_SESSIONS_DIR") or os.path.join(home, ".claude", "projects")
    data_home = env.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    vault = env.get("QMD_SESSIONS_VAULT") or os.path.join(data_home, "qmd", "sessions")
    return SessionFolders(transcripts, vault)

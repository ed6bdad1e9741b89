"""The original QMD's `index.yml`: where it lives, how it reads and writes, and its DB mirror.

File shape (QMD 2.8.3, `src/collections.ts`)::

    global_context: "text"            # optional
    editor_uri: "vscode://file/{path}:{line}:{col}"
                  # aliases: editor_uri_template, editorUri, editor-uri
    models: {embed: URI, rerank: URI, generate: URI}
    collections:
      NAME:
        path: /abs/dir
        pattern: "**/*.md"             # default
        ignore: ["glob", ...]          # optional
        context: {"": "text", "sub/dir": "text"}   # optional
        update: "bash command"         # optional
        includeByDefault: false        # optional, default true

Unknown keys are kept and written back unchanged.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from adapters.config.folders import cache_dir as cache_dir
from adapters.config.folders import expanded as _expanded
from adapters.config.folders import home as _home
from domain.errors import CONFLICT, INVALID_ARGUMENT, NOT_FOUND, QmdError
from domain.model import DEFAULT_PATTERN, Collection

EDITOR_URI_KEYS = ("editor_uri", "editor_uri_template", "editorUri", "editor-uri")
_KNOWN_TOP = {"collections", "global_context", "models", *EDITOR_URI_KEYS}
_KNOWN_COLLECTION = {"path", "pattern", "ignore", "context", "update", "includeByDefault"}


@dataclass(frozen=True)
class QmdConfig:
    """`index.yml` parsed: what qmd reads of it, and what it keeps unchanged."""

    collections: dict[str, Collection] = field(default_factory=dict)
    global_context: str | None = None
    models: dict[str, str] = field(default_factory=dict)
    editor_uri: str | None = None
    # unknown top-level keys and unknown per-collection keys, written back unchanged
    extra: dict[str, Any] = field(default_factory=dict)
    collection_extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the parsed YAML as read (None when built in code); the config hash is taken over it so
    # that it equals the original's hash of the same file
    raw: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    # `config_hash` of `raw` when the parse cache knew it (a start then needs no sha256, and
    # no hashlib); describes `raw` only, so it is ignored once `raw` is None
    raw_hash: str | None = field(default=None, compare=False, repr=False)

    def with_collection(self, collection: Collection) -> QmdConfig:
        collections = dict(self.collections)
        collections[collection.name] = collection
        return replace(self, collections=collections, raw=None)

    def without_collection(self, name: str) -> QmdConfig:
        collections = {k: v for k, v in self.collections.items() if k != name}
        extra = {k: v for k, v in self.collection_extra.items() if k != name}
        return replace(self, collections=collections, collection_extra=extra, raw=None)

    def renamed_collection(self, old: str, new: str) -> QmdConfig:
        if old not in self.collections:
            raise QmdError(NOT_FOUND, f"Collection not found: {old}")
        if new != old and new in self.collections:
            raise QmdError(CONFLICT, f"Collection '{new}' already exists")
        collections = {
            (new if k == old else k): (replace(v, name=new) if k == old else v)
            for k, v in self.collections.items()
        }
        extra = {(new if k == old else k): v for k, v in self.collection_extra.items()}
        return replace(self, collections=collections, collection_extra=extra, raw=None)

    def with_global_context(self, text: str | None) -> QmdConfig:
        return replace(self, global_context=text, raw=None)

    def to_raw(self) -> dict[str, Any]:
        """The JSON/YAML object the original would hold for this config."""
        values: dict[str, Any] = {
            "collections": {
                name: _collection_to_raw(c, self.collection_extra.get(name, {}))
                for name, c in self.collections.items()
            }
        }
        if self.models:
            values["models"] = dict(self.models)
        if self.global_context is not None:
            values["global_context"] = self.global_context
        if self.editor_uri is not None:
            values["editor_uri"] = self.editor_uri
        values.update(self.extra)
        # keep the key order of the file that was read (editor_uri aliases map to editor_uri)
        order = ["editor_uri" if key in EDITOR_URI_KEYS else key for key in (self.raw or {})]
        out = {key: values[key] for key in order if key in values}
        out.update({key: value for key, value in values.items() if key not in out})
        return out

    def hash_source(self) -> dict[str, Any]:
        return self.raw if self.raw is not None else self.to_raw()


def _collection_to_raw(c: Collection, extra: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"path": c.path, "pattern": c.pattern or DEFAULT_PATTERN}
    if c.ignore:
        out["ignore"] = list(c.ignore)
    if c.contexts:
        out["context"] = dict(c.contexts)
    if c.update_command:
        out["update"] = c.update_command
    if not c.include_by_default:
        out["includeByDefault"] = False
    for key, value in extra.items():
        out.setdefault(key, value)
    return out


def _as_str_tuple(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value if v is not None)
    return ()


def _collection_from_raw(name: str, data: Any, source: str) -> tuple[Collection, dict[str, Any]]:
    if not isinstance(data, Mapping):
        message = f"Failed to parse {source}: collection '{name}' is invalid"
        raise QmdError(INVALID_ARGUMENT, message)
    path = data.get("path")
    context = data.get("context")
    contexts: dict[str, str] = {}
    if isinstance(context, Mapping):
        contexts = {
            ("" if k is None else str(k)): ("" if v is None else str(v)) for k, v in context.items()
        }
    update = data.get("update")
    collection = Collection(
        name=name,
        path="" if path is None else str(path),
        pattern=str(data.get("pattern") or DEFAULT_PATTERN),
        ignore=_as_str_tuple(data.get("ignore")),
        include_by_default=data.get("includeByDefault") is not False,
        update_command=str(update) if update else None,
        contexts=contexts,
    )
    extra = {str(k): v for k, v in data.items() if k not in _KNOWN_COLLECTION}
    return collection, extra


PARSED_CACHE = "parsed-config"


def _parsed_cache_file(text: str) -> str:
    # named by a CRC and the length, which need no hashlib; the entry holds the text it was
    # parsed from, so a collision is a miss, never another file's parse
    key = f"{zlib.crc32(text.encode('utf-8')):08x}-{len(text)}"
    return os.path.join(cache_dir(os.environ), PARSED_CACHE, f"{key}.json")


def _cached_parse(text: str) -> tuple[Any, str] | None:
    """(the YAML data, its config hash) kept by an earlier parse of exactly `text`: a later
    command with the same `index.yml` reads that instead of importing and running the YAML
    parser and hashing (a large share of a cold `qmd search`)."""
    try:
        with open(_parsed_cache_file(text), encoding="utf-8") as handle:
            entry = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("text") != text:
        return None
    digest = entry.get("hash")
    return (entry.get("data"), digest) if isinstance(digest, str) else None


def _safe_load(text: str, source: str) -> Any:
    """`yaml.safe_load(text)`, for a file the parse cache does not hold."""
    import yaml  # the parser only for a file not parsed before

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise QmdError(INVALID_ARGUMENT, f"Failed to parse {source}: {exc}") from exc


def _keep_parsed(text: str, data: Any, digest: str) -> None:
    """Keep the parse of `text` for the next command; a document JSON cannot hold exactly
    (dates, non-string keys) is parsed every time."""
    cached = _parsed_cache_file(text)
    try:
        if json.loads(json.dumps(data)) != data:
            return
        encoded = json.dumps({"text": text, "data": data, "hash": digest})
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        partial = f"{cached}.{os.getpid()}.tmp"
        with open(partial, "w", encoding="utf-8") as handle:
            handle.write(encoded)
        os.replace(partial, cached)
    except (OSError, TypeError, ValueError):
        pass  # a read-only or full cache folder: the next command parses again


def parse_config(text: str, source: str = "index.yml") -> QmdConfig:
    known = _cached_parse(text)
    data, known_hash = known if known is not None else (_safe_load(text, source), None)
    config = _config_from_data(data, source)
    if known_hash is not None:
        return replace(config, raw_hash=known_hash)
    if config.raw is not None:
        _keep_parsed(text, data, config_hash(config))
    return config


def _config_from_data(data: Any, source: str) -> QmdConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise QmdError(INVALID_ARGUMENT, f"Failed to parse {source}: not a mapping")
    raw: dict[str, Any] = {str(k): v for k, v in data.items()}
    if not raw.get("collections"):
        raw["collections"] = {}
    collections: dict[str, Collection] = {}
    collection_extra: dict[str, dict[str, Any]] = {}
    raw_collections = raw["collections"]
    if not isinstance(raw_collections, Mapping):
        raise QmdError(INVALID_ARGUMENT, f"Failed to parse {source}: collections is not a mapping")
    for key, value in raw_collections.items():
        name = str(key)
        collections[name], extra = _collection_from_raw(name, value, source)
        if extra:
            collection_extra[name] = extra
    models_raw = raw.get("models")
    models = (
        {str(k): str(v) for k, v in models_raw.items() if v is not None}
        if isinstance(models_raw, Mapping)
        else {}
    )
    editor_uri = next(
        (str(raw[k]) for k in EDITOR_URI_KEYS if isinstance(raw.get(k), str) and raw[k]), None
    )
    global_context = raw.get("global_context")
    return QmdConfig(
        collections=collections,
        global_context=None if global_context is None else str(global_context),
        models=models,
        editor_uri=editor_uri,
        extra={k: v for k, v in raw.items() if k not in _KNOWN_TOP},
        collection_extra=collection_extra,
        raw=raw,
    )


def dump_config(config: QmdConfig) -> str:
    import yaml

    return yaml.safe_dump(
        config.to_raw(),
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        indent=2,
        width=1 << 30,
    )


def load_config(path: str | os.PathLike[str]) -> QmdConfig:
    """Read `index.yml`; a missing file is an empty config (as in the original)."""
    target = os.fspath(path)
    if not os.path.exists(target):
        return QmdConfig()
    try:
        with open(target, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as error:
        # saved in another encoding, a folder, unreadable: the user's file, not a crash
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise QmdError(INVALID_ARGUMENT, f"Failed to read {target}: {reason}") from None
    return parse_config(text, target)


def save_config(path: str | os.PathLike[str], config: QmdConfig) -> None:
    """Write `index.yml` alone: for a file no open index mirrors yet (`qmd init`, the first own
    config of a PostgreSQL index), which the next open syncs. With an index open, use
    `write_config`, which keeps the index's `config_hash` in step."""
    _write_text(path, dump_config(config))


def _write_text(path: str | os.PathLike[str], text: str) -> None:
    from pathlib import Path  # writes only: reading the file at start needs none of it

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # a name of this process's own: two writers sharing one temporary file made the second's
    # rename fail (FileNotFoundError) or install the first one's text
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------- paths


def normalize_index_name(name: str | None, cwd: str | None = None) -> str:
    """`--index NAME`: a name with `/` becomes its absolute path with `/` → `_`."""
    if not name:
        return "index"
    if "/" in name:
        absolute = os.path.normpath(os.path.join(cwd or os.getcwd(), name))
        return absolute.replace("/", "_").lstrip("_") or "index"
    return name


def config_dir(env: Mapping[str, str]) -> str:
    if env.get("QMD_CONFIG_DIR"):
        return _expanded(env["QMD_CONFIG_DIR"], env)
    if env.get("XDG_CONFIG_HOME"):
        return os.path.join(_expanded(env["XDG_CONFIG_HOME"], env), "qmd")
    return os.path.join(_home(env), ".config", "qmd")


def find_local_config(start: str) -> str | None:
    """Nearest `.qmd/index.yaml` or `.qmd/index.yml` walking up from `start`."""
    current = os.path.abspath(start)
    while True:
        for name in ("index.yaml", "index.yml"):
            candidate = os.path.join(current, ".qmd", name)
            if os.path.isfile(candidate):
                return candidate
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def resolve_paths(
    index_name: str | None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    discover_local: bool = True,
) -> tuple[str, str]:
    """(db_path, config_path) as the original CLI picks them.

    With `--index NAME`: `INDEX_PATH` or `$XDG_CACHE_HOME/qmd/NAME.sqlite`, and
    `QMD_CONFIG_DIR | $XDG_CONFIG_HOME/qmd | ~/.config/qmd` + `NAME.yml`. Without it, a
    project-local `.qmd/index.y(a)ml` (when `discover_local`) wins, with `.qmd/index.sqlite`.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    if not index_name and discover_local:
        local = find_local_config(cwd or os.getcwd())
        if local is not None:
            return os.path.join(os.path.dirname(local), "index.sqlite"), local
    name = normalize_index_name(index_name, cwd)
    db_path = _expanded(environ.get("INDEX_PATH") or "", environ) or os.path.join(
        cache_dir(environ), f"{name}.sqlite"
    )
    return db_path, os.path.join(config_dir(environ), f"{name}.yml")


def own_config_path(shared_config_path: str, label: str) -> str:
    """The `index.yml` of an index that keeps its own collections beside the shared one:
    `NAME@LABEL.yml` next to `NAME.yml` (docs/decisions/0047)."""
    stem, extension = os.path.splitext(shared_config_path)
    return f"{stem}@{label}{extension or '.yml'}"


def first_own_config(
    shared: QmdConfig, held: Sequence[Collection], global_context: str | None
) -> QmdConfig:
    """The first `index.yml` of an index that gets its own: the shared file's settings
    (models, editor, unknown keys) once, and the collections the index itself holds documents
    of, as it stores them; never the shared file's other collections."""
    names = {collection.name for collection in held}
    return QmdConfig(
        collections={collection.name: collection for collection in held},
        global_context=global_context,
        models=dict(shared.models),
        editor_uri=shared.editor_uri,
        extra={key: value for key, value in shared.extra.items() if key != "index_url"},
        collection_extra={k: v for k, v in shared.collection_extra.items() if k in names},
    )


# ---------------------------------------------------------------------------------- sync


class ConfigMirror(Protocol):
    """What `sync_config_to_store` needs from the index (each backend's store and the test fake)."""

    def list_collections(self) -> list[Collection]: ...
    def put_collection(self, collection: Collection) -> None: ...
    def forget_collection(self, name: str) -> None: ...
    def get_config_value(self, key: str) -> str | None: ...
    def set_config_value(self, key: str, value: str | None) -> None: ...


def config_hash(config: QmdConfig) -> str:
    """sha256 of `JSON.stringify(config)` (compact, non-ASCII kept)."""
    if config.raw is not None and config.raw_hash is not None:
        return config.raw_hash  # kept by the parse cache with the file it read
    import hashlib  # OpenSSL's load costs a cold start: only when the hash is not known

    text = json.dumps(config.hash_source(), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_local_config_path(config_path: str) -> bool:
    """A project-local config lives in a folder named `.qmd` (the global one in `qmd`)."""
    return os.path.basename(os.path.dirname(os.path.abspath(config_path))) == ".qmd"


def project_root(config_path: str) -> str:
    """The project a project-local `.qmd/index.yml` belongs to: the folder holding `.qmd`."""
    return os.path.dirname(os.path.dirname(os.path.abspath(config_path)))


def relative_base(config_path: str) -> str:
    """The folder a relative collection path of this config is taken against
    (REQ-CFG-SYNC-001): the project for a project-local `.qmd/index.yml` (as the original's
    trust gate reads it, so a checked-in `path: docs` is the project's `docs`), else the folder
    of the file itself."""
    if is_local_config_path(config_path):
        return project_root(config_path)
    return os.path.dirname(os.path.abspath(config_path))


def collection_folder(path: str, config_path: str | None, home: str | None = None) -> str:
    """A collection `path` as written in `config_path` turned into its absolute, normalised
    folder: the one rule the index mirror, the trust gate and `--force-root` all use
    (REQ-CFG-SYNC-001). `~` is expanded (from `home`, else the process's); a relative path is
    taken against `relative_base`, never against the current directory (a command or server
    started elsewhere must see the same folder). Without a config a relative path stays
    relative, and an empty path stays empty: callers treat both as unknown (fail closed)."""
    path = path.strip()
    if not path:
        return ""
    if path == "~" or path.startswith("~/"):
        base = home or os.path.expanduser("~")
        path = base + path[1:]
    if os.path.isabs(path):
        return os.path.normpath(path)
    if config_path is None:
        return path
    return os.path.normpath(os.path.join(relative_base(config_path), path))


def _mirror_has_folders(
    config: QmdConfig, store: ConfigMirror, config_path: str | None, home: str | None
) -> bool:
    """Every collection of `config` is held by the index under the folder the config resolves
    it to. False for a store synced before (a relative or `~` folder, or one resolved by an
    older rule), so it is re-synced even when the file did not change."""
    held = {c.name: c.path for c in store.list_collections()}
    return all(
        held.get(name) == collection_folder(c.path, config_path, home)
        for name, c in config.collections.items()
    )


def sync_config_to_store(
    config: QmdConfig,
    store: ConfigMirror,
    force: bool = False,
    config_path: str | os.PathLike[str] | None = None,
    home: str | None = None,
) -> bool:
    """Mirror the YAML into store_collections/store_config; False when skipped (unchanged).

    Collection folders are stored absolute (`collection_folder`), so the scanner, path lookups,
    the trust gate's withheld set and `--force-root` all read one canonical folder.
    """
    where = None if config_path is None else os.fspath(config_path)
    digest = config_hash(config)
    if (
        not force
        and store.get_config_value("config_hash") == digest
        and _mirror_has_folders(config, store, where, home)
    ):
        return False
    for collection in config.collections.values():
        store.put_collection(
            replace(collection, path=collection_folder(collection.path, where, home))
        )
    for existing in store.list_collections():
        if existing.name not in config.collections:
            store.forget_collection(existing.name)
    store.set_config_value("global_context", config.global_context)
    store.set_config_value("config_hash", digest)
    return True


def write_config(
    path: str | os.PathLike[str],
    config: QmdConfig,
    mirror: ConfigMirror | None,
    home: str | None = None,
) -> None:
    """Write `index.yml` and bring its index's mirror in step (REQ-CFG-SYNC-002), as the
    original re-syncs after each of its CLI's edits: afterwards the stored `config_hash` is the
    hash of the file as the next command will read it, so that command does not sync again,
    and a hand edit back to an older file is never mistaken for one already mirrored. Every
    writer of a config whose index is open goes through here (`YamlConfigRepository.save`).
    The stored hash is cleared first: if anything below fails, the next command re-syncs."""
    if mirror is None:
        save_config(path, config)
        return
    mirror.set_config_value("config_hash", None)
    text = dump_config(config)
    _write_text(path, text)
    written = parse_config(text, os.fspath(path))  # hashed as the next reader will see it
    sync_config_to_store(written, mirror, force=True, config_path=path, home=home)


# ---------------------------------------------------------------------------------- port


class YamlConfigRepository:
    """`ConfigRepository` over one `index.yml` (read-modify-write per call). With `mirror`
    (the index the file belongs to), every save also brings the index's mirror and its
    `config_hash` in step (`write_config`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        mirror: ConfigMirror | None = None,
        home: str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self._mirror = mirror
        self._home = home

    def load(self) -> QmdConfig:
        return load_config(self.path)

    def save(self, config: QmdConfig) -> None:
        write_config(self.path, config, self._mirror, self._home)

    def load_collections(self) -> list[Collection]:
        return list(self.load().collections.values())

    def save_collection(self, collection: Collection) -> None:
        self.save(self.load().with_collection(collection))

    def delete_collection(self, name: str) -> None:
        self.save(self.load().without_collection(name))

    def rename_collection(self, old: str, new: str) -> None:
        self.save(self.load().renamed_collection(old, new))

    def load_global_context(self) -> str | None:
        return self.load().global_context

    def save_global_context(self, text: str | None) -> None:
        self.save(self.load().with_global_context(text))


if TYPE_CHECKING:  # structural conformance, checked by mypy
    from domain.ports import ConfigRepository

    def _conforms(repository: YamlConfigRepository) -> None:
        _config: ConfigRepository = repository

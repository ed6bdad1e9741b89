"""The CLI's start-up pieces: the command index that lets a run import only its command's
module, and the embedding identity worked out without a model adapter (issue 24)."""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.cli.grammar import CommandTable, Parser
from adapters.cli.method_cache import cached_methods
from adapters.cli.parser import COMMAND_MODULES, COMMAND_NAMES, build_parser
from adapters.config.yaml_config import _parsed_cache_file, config_hash, parse_config
from adapters.locations import config_reader
from adapters.models.factory import embedding_identity, models_from_config
from adapters.models.idle import never_given_up


def _registered(module_name: str) -> frozenset[str]:
    table = CommandTable(Parser(prog="qmd"), "command", "<command>")
    importlib.import_module(f"adapters.cli.commands.{module_name}").register(table)
    return table.names()


@pytest.mark.parametrize(("module_name", "names"), COMMAND_MODULES)
def test_the_command_index_names_what_each_module_registers(
    module_name: str, names: frozenset[str]
) -> None:
    assert _registered(module_name) == names


def test_the_full_parser_has_every_indexed_command_and_no_other() -> None:
    _parser, table = build_parser()
    assert table.names() == COMMAND_NAMES


def test_a_parser_for_one_command_holds_only_that_command() -> None:
    _parser, table = build_parser("search")
    assert table.names() == {"search"}
    _parser, table = build_parser("deep-search")  # an alias builds its command
    assert table.names() == {"query", "deep-search"}
    parser, table = build_parser("collection")  # a group builds all of its sub-commands
    assert table.names() == {"collection"}
    assert parser.parse_args(["collection", "add", ".", "--name", "n"]).name == "n"


def test_a_parser_for_one_command_parses_it_as_the_full_parser_does() -> None:
    argv = ["search", "-n", "3", "--json", "-c", "a", "--min-score", "0.2", "rate", "limits"]
    full, _table = build_parser()
    alone, _table = build_parser("search")
    assert vars(alone.parse_args(argv)) == vars(full.parse_args(argv))


@pytest.mark.parametrize(
    ("yaml_models", "env"),
    [
        ({}, {}),
        ({"embed": "hf:Qwen/Qwen3-Embedding-0.6B-GGUF/model.gguf"}, {}),
        ({"embed": "/models/all-MiniLM-L6-v2.gguf"}, {}),
        ({"embed": "/models/all-MiniLM-L6-v2.gguf"}, {"QMD_EMBED_FORMAT": "embeddinggemma"}),
        ({}, {"QMD_EMBED_MODEL": "/models/nomic-embed.gguf"}),
    ],
)
def test_the_identity_without_adapters_is_the_one_the_adapters_give(
    tmp_path: Path, yaml_models: dict[str, str], env: dict[str, str]
) -> None:
    environ = {"XDG_CACHE_HOME": str(tmp_path), **env}
    built = models_from_config(
        yaml_models, str(tmp_path), environ, stop_check=never_given_up
    ).identity
    assert embedding_identity(yaml_models, str(tmp_path), environ) == built


def test_the_config_reader_parses_each_file_once(tmp_path: Path) -> None:
    path = tmp_path / "index.yml"
    path.write_text("collections:\n  notes:\n    path: /notes\n", encoding="utf-8")
    load = config_reader()
    first = load(str(path))
    path.write_text("collections: {}\n", encoding="utf-8")  # a second parse would see this
    assert load(str(path)) is first
    assert "notes" in first.collections


def test_a_cached_config_parse_knows_its_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a start whose index.yml was parsed before needs neither the YAML parser nor sha256
    # (hashlib loads OpenSSL): the cache keeps the hash with the parse
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    text = "collections:\n  notes:\n    path: /notes\n    context:\n      /: Notes\n"
    first = parse_config(text)
    again = parse_config(text)
    assert again == first and again.raw_hash is not None
    assert config_hash(again) == config_hash(replace(again, raw_hash=None))
    edited = again.with_global_context("changed")  # an edit forgets the hash of the file
    assert config_hash(edited) != config_hash(again)


def test_a_parse_cache_entry_of_another_text_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    mine = "collections:\n  mine:\n    path: /mine\n"
    other = "collections:\n  other:\n    path: /other\n"
    parse_config(other)
    # the entry kept for `other` where `mine`'s would be, as a collision of the names would
    os.replace(_parsed_cache_file(other), _parsed_cache_file(mine))
    assert set(parse_config(mine).collections) == {"mine"}


# (module, modules it imports that compile patterns of their own, patterns it may compile)
_PATTERNS_AT_IMPORT = [
    # a search never redacts: only the screen that says whether a text may hold a secret
    ("adapters.redaction", "domain.lazy_regex", 1),
    # `qmd status` imports the chunker for its sizes; the break patterns wait for a document
    ("domain.chunking", "domain.lazy_regex, domain.text", 0),
]


@pytest.mark.parametrize(("module", "before", "compiled"), _PATTERNS_AT_IMPORT)
def test_importing_a_module_compiles_only_the_patterns_every_run_uses(
    module: str, before: str, compiled: int
) -> None:
    probe = (
        f"import re, {before}\n"
        "cached = len(re._cache)\n"
        f"import {module}\n"
        "print(len(re._cache) - cached)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == str(compiled), done.stdout


def test_a_dataclass_made_from_cached_methods_behaves_as_one_compiled(tmp_path: Path) -> None:
    def make() -> Any:
        @dataclasses.dataclass(frozen=True)
        class Point:
            x: int
            y: int = 2

        return Point

    plain = make()
    with cached_methods(str(tmp_path)) as first:
        make()
    with cached_methods(str(tmp_path)) as second:
        cached = make()
    assert first.compiled > 0 and second.compiled == 0
    assert repr(cached(1)) == repr(plain(1)).replace(plain.__qualname__, cached.__qualname__)
    assert cached(1) == cached(1, 2) and cached(1) != cached(2) and hash(cached(1)) == hash((1, 2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cached(1).x = 3  # type: ignore[misc]


def test_a_method_cache_folder_that_cannot_be_written_is_left_alone(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder", encoding="utf-8")
    with cached_methods(str(blocked)) as cache:

        @dataclasses.dataclass
        class Made:
            name: str

    assert cache.compiled > 0 and Made("a") == Made("a")
    assert blocked.read_text(encoding="utf-8") == "not a folder"

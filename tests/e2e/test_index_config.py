"""A PostgreSQL index keeps its collections in its own index.yml, apart from the SQLite index of
the same name, unless index.yml itself names its URL (issue 26, docs/decisions/0047). Real
`qmd` processes against the PostgreSQL of scripts/postgres.sh."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from adapters.postgres.url import config_label
from tests.mcp_harness import REPO, fixture_env
from tests.postgres_server import drop_schema, fresh_schema_url

pytestmark = pytest.mark.postgres


def qmd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        env=env,
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def pg_url() -> Iterator[str]:
    url, schema = fresh_schema_url()
    try:
        yield url
    finally:
        drop_schema(schema)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environment = {**fixture_env(tmp_path), "PYTHONPATH": str(REPO)}
    environment.pop("INDEX_PATH")  # the default index: ~/.cache/qmd/index.sqlite + index.yml
    return environment


def folder(root: Path, name: str, files: int) -> Path:
    path = root / name
    path.mkdir()
    for i in range(files):
        (path / f"{name}{i}.md").write_text(f"# {name} {i}\n\nabout {name}\n", encoding="utf-8")
    return path


def collections_in_status(env: dict[str, str], *flags: str) -> dict[str, int]:
    """`qmd status`'s Collections section: name -> files."""
    found: dict[str, int] = {}
    name = None
    section = ok(qmd(env, *flags, "status")).split("\nCollections\n", 1)[1].split("\n\n")[0]
    for line in section.splitlines():
        if line.startswith("  ") and not line.startswith("    "):
            name = line.split()[0]
        elif line.strip().startswith("Files:") and name is not None:
            found[name] = int(line.split()[1])
    return found


def test_the_readme_walkthrough_beside_a_local_index(
    tmp_path: Path, env: dict[str, str], pg_url: str
) -> None:
    notes, local = folder(tmp_path, "notes", 3), folder(tmp_path, "local", 2)
    ok(qmd(env, "collection", "add", str(notes), "--name", "notes"))
    ok(qmd(env, "collection", "add", str(local), "--name", "local"))
    shared = Path(env["QMD_CONFIG_DIR"]) / "index.yml"
    before = shared.read_bytes()

    # the README's command, for a folder the local index already has: no "already exists"
    ok(qmd(env, "--index-url", pg_url, "collection", "add", str(notes), "--name", "notes"))
    # the PostgreSQL index lists what it holds, not the local index's collections with 0 files
    assert collections_in_status(env, "--index-url", pg_url) == {"notes": 3}
    assert collections_in_status({**env, "INDEX_PATH": pg_url}) == {"notes": 3}
    own = Path(env["QMD_CONFIG_DIR"]) / f"index@{config_label(pg_url)}.yml"
    assert set(yaml.safe_load(own.read_text(encoding="utf-8"))["collections"]) == {"notes"}
    # and the local index and its index.yml (the original's) are untouched
    assert shared.read_bytes() == before
    assert collections_in_status(env) == {"notes": 3, "local": 2}
    ok(qmd(env, "--index-url", pg_url, "collection", "remove", "notes"))
    assert collections_in_status(env) == {"notes": 3, "local": 2}
    assert shared.read_bytes() == before


def test_an_index_that_shared_index_yml_gets_its_own_with_what_it_holds(
    tmp_path: Path, env: dict[str, str], pg_url: str
) -> None:
    """The layout before: a PostgreSQL index reached with --index-url mirrored index.yml. It
    held documents of `pg` only, but listed `local` too. Its first run now writes its own
    file with `pg` and the shared settings (models), and stops listing `local`."""
    pg_folder, local = folder(tmp_path, "pg", 2), folder(tmp_path, "local", 1)
    config = Path(env["QMD_CONFIG_DIR"])
    # an index holding `pg` only, put into the schema with the copy command
    staging = {**env, "INDEX_PATH": str(tmp_path / "staging.sqlite")}
    staging["QMD_CONFIG_DIR"] = str(tmp_path / "staging-config")
    ok(qmd(staging, "collection", "add", str(pg_folder), "--name", "pg"))
    ok(qmd(staging, "index", "copy", staging["INDEX_PATH"], pg_url))
    # ...and the shared index.yml of before: both collections, a model setting
    model = str(tmp_path / "embed.gguf")
    shared = config / "index.yml"
    config.mkdir(parents=True, exist_ok=True)
    shared.write_text(
        yaml.safe_dump(
            {
                "models": {"embed": model},
                "collections": {
                    "pg": {"path": str(pg_folder), "pattern": "**/*.md"},
                    "local": {"path": str(local), "pattern": "**/*.md"},
                },
            }
        ),
        encoding="utf-8",
    )
    before = shared.read_bytes()
    assert collections_in_status(env, "--index-url", pg_url) == {"pg": 2}
    own = yaml.safe_load((config / f"index@{config_label(pg_url)}.yml").read_text(encoding="utf-8"))
    assert set(own["collections"]) == {"pg"}
    assert own["models"] == {"embed": model}
    assert shared.read_bytes() == before
    search = json.loads(ok(qmd(env, "--index-url", pg_url, "search", "about", "--json")))
    assert {hit["file"].split("/")[2] for hit in search} == {"pg"}


def test_index_yml_that_names_the_url_is_shared_on_purpose(
    tmp_path: Path, env: dict[str, str], pg_url: str
) -> None:
    notes = folder(tmp_path, "notes", 2)
    config = Path(env["QMD_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "index.yml").write_text(f"index_url: {pg_url}\n", encoding="utf-8")
    ok(qmd(env, "collection", "add", str(notes), "--name", "notes"))  # into PostgreSQL
    assert collections_in_status(env) == {"notes": 2}
    assert collections_in_status(env, "--index-url", pg_url) == {"notes": 2}
    assert sorted(p.name for p in config.iterdir()) == ["index.yml"]  # no file of its own
    shared = yaml.safe_load((config / "index.yml").read_text(encoding="utf-8"))
    assert set(shared["collections"]) == {"notes"} and shared["index_url"] == pg_url

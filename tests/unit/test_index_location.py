"""Which index a run uses: `--index-url`, then INDEX_PATH, then `index_url:` in the global
index.yml, then the default SQLite file; a project-local index.yml cannot name a database."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.bootstrap import index_location
from adapters.postgres.store import is_postgres_url, redact, split_schema

URL = "postgresql://qmd:secret@db.example:5432/kb?schema=team"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    return {"HOME": str(tmp_path), "QMD_CONFIG_DIR": str(config), **extra}


def test_precedence(tmp_path: Path) -> None:
    env = _env(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache"))
    default, config = index_location("work", env)
    assert default == str(tmp_path / "cache" / "qmd" / "work.sqlite")
    Path(config).write_text(f"index_url: {URL}\ncollections: {{}}\n", encoding="utf-8")
    assert index_location("work", env) == (URL, config)
    assert index_location("work", {**env, "INDEX_PATH": "/x/i.sqlite"})[0] == "/x/i.sqlite"
    other = "postgresql://localhost/other"
    assert index_location("work", {**env, "INDEX_PATH": "/x/i.sqlite"}, other)[0] == other


def test_a_project_local_config_cannot_name_a_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project" / ".qmd"
    project.mkdir(parents=True)
    (project / "index.yml").write_text(f"index_url: {URL}\n", encoding="utf-8")
    monkeypatch.chdir(project.parent)
    location, config = index_location(None, _env(tmp_path))
    assert config == str(project / "index.yml")
    assert location == str(project / "index.sqlite")


def test_url_helpers() -> None:
    assert is_postgres_url(URL) and is_postgres_url("postgres://h/db")
    assert not is_postgres_url("/tmp/postgresql://x") and not is_postgres_url(None)
    assert redact(URL) == "postgresql://qmd:***@db.example:5432/kb?schema=team"
    assert redact("postgresql://h/db") == "postgresql://h/db"
    assert split_schema(URL) == ("postgresql://qmd:secret@db.example:5432/kb", "team")
    assert split_schema("postgresql://h/db?sslmode=require") == (
        "postgresql://h/db?sslmode=require",
        None,
    )


def test_index_label_names_server_database_and_schema_but_no_credentials() -> None:
    from adapters.postgres.url import index_label

    url = "postgresql://ana:secret@db.example:5432/team?schema=kb&sslmode=require"
    assert index_label(url) == "postgresql-db.example-team-kb"
    assert index_label("postgresql:///notes") == "postgresql-local-notes"
    assert "/" not in index_label("postgres://h/a%2Fb")


def test_a_postgresql_index_keeps_its_own_config_unless_index_yml_names_it(
    tmp_path: Path,
) -> None:
    """docs/decisions/0047: `--index-url` / INDEX_PATH=URL use `NAME@LABEL.yml`; `NAME.yml`
    that says `index_url:` that very URL is shared on purpose; SQLite keeps `NAME.yml`."""
    from adapters.postgres.url import config_label

    env = _env(tmp_path)
    shared = str(tmp_path / "config" / "work.yml")
    own = str(tmp_path / "config" / "work@postgresql-db.example-5432-kb-team.yml")
    assert config_label(URL) == "postgresql-db.example-5432-kb-team"
    assert index_location("work", {**env, "INDEX_PATH": URL}) == (URL, own)
    assert index_location("work", env, URL) == (URL, own)
    assert index_location("work", {**env, "INDEX_PATH": "/x/i.sqlite"}) == ("/x/i.sqlite", shared)
    Path(shared).write_text(f"index_url: {URL}\n", encoding="utf-8")
    assert index_location("work", env) == (URL, shared)
    assert index_location("work", env, URL) == (URL, shared)
    other = "postgresql://localhost/other"
    assert index_location("work", env, other) == (
        other,
        str(tmp_path / "config" / "work@postgresql-localhost-other.yml"),
    )


def test_a_leading_tilde_is_the_home_folder(tmp_path: Path) -> None:
    """A systemd unit or a `.env` file passes `~/...` unexpanded: QMD_CONFIG_DIR made a folder
    named `~` in the working folder, and INDEX_PATH an index that could not be opened."""
    env = {
        "HOME": str(tmp_path),
        "INDEX_PATH": "~/idx/i.sqlite",
        "QMD_CONFIG_DIR": "~/cfg",
    }
    assert index_location(None, env) == (
        str(tmp_path / "idx" / "i.sqlite"),
        str(tmp_path / "cfg" / "index.yml"),
    )
    xdg = {"HOME": str(tmp_path), "XDG_CACHE_HOME": "~/c", "XDG_CONFIG_HOME": "~/x"}
    assert index_location("n", xdg) == (
        str(tmp_path / "c" / "qmd" / "n.sqlite"),
        str(tmp_path / "x" / "qmd" / "n.yml"),
    )
    # only a leading `~/` is the home folder
    assert index_location(None, {"HOME": "/h", "INDEX_PATH": "/a/~/i.sqlite"})[0] == (
        "/a/~/i.sqlite"
    )

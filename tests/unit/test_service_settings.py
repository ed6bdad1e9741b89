"""Service settings: flags, then the environment, then the .env file, then the defaults;
bad values refused with invalid-argument naming the variable and where it came from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from adapters.config.service import (
    ENV_FILE_MAX_BYTES,
    FOLDER_ENV_VARIABLES,
    LOG_LEVELS,
    read_env_file,
    resolve_settings,
)
from adapters.config.trust import TrustStore
from domain.errors import INVALID_ARGUMENT, QmdError

REPO = Path(__file__).resolve().parents[2]


def _env_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "service.env"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_defaults() -> None:
    settings = resolve_settings({}, {})
    assert settings.request_timeout_s == 30.0
    assert settings.log_level == LOG_LEVELS["INFO"]
    assert settings.max_results is None
    assert settings.models_idle_unload_s == 0.0
    assert settings.watch is False


def test_flags_beat_environment_beats_env_file(tmp_path: Path) -> None:
    path = _env_file(
        tmp_path,
        "# service\nQMD_REQUEST_TIMEOUT=5\nQMD_LOG_LEVEL=debug\nexport QMD_MAX_RESULTS=7\n"
        "QMD_MODELS_IDLE_UNLOAD=600\nQMD_WATCH=yes\nQMD_EMBED_MODEL='hf:x/y/z.gguf'\n",
    )
    environ = {"QMD_REQUEST_TIMEOUT": "9", "QMD_LOG_LEVEL": "ERROR"}
    settings = resolve_settings({"log_level": LOG_LEVELS["WARN"]}, environ, path)
    assert settings.request_timeout_s == 9.0  # environment over the file
    assert settings.log_level == LOG_LEVELS["WARN"]  # the flag over both
    assert settings.max_results == 7  # only the file gives it
    assert settings.models_idle_unload_s == 600.0
    assert settings.watch is True
    assert settings.env["QMD_EMBED_MODEL"] == "hf:x/y/z.gguf"  # every variable comes along
    assert settings.env["QMD_REQUEST_TIMEOUT"] == "9"


def test_the_env_file_can_be_named_by_qmd_env_file(tmp_path: Path) -> None:
    path = _env_file(tmp_path, "QMD_REQUEST_TIMEOUT=12.5\n")
    assert resolve_settings({}, {"QMD_ENV_FILE": path}).request_timeout_s == 12.5


def test_seed_003_names_come_after_qmd_names(tmp_path: Path) -> None:
    path = _env_file(
        tmp_path,
        "MCP_REQUEST_TIMEOUT_SECONDS=45\nLOG_LEVEL=ERROR\nSEARCH_MAX_RESULTS_HARD_LIMIT=50\n",
    )
    settings = resolve_settings({}, {"QMD_MAX_RESULTS": "20"}, path)
    assert settings.request_timeout_s == 45.0
    assert settings.log_level == LOG_LEVELS["ERROR"]
    assert settings.max_results == 20


@pytest.mark.parametrize(
    ("line", "wording"),
    [
        ("QMD_REQUEST_TIMEOUT=soon", "expected a number of seconds"),
        ("QMD_REQUEST_TIMEOUT=-1", "expected a positive number of seconds"),
        ("QMD_LOG_LEVEL=LOUD", "expected one of DEBUG, INFO, WARN, ERROR"),
        ("QMD_MAX_RESULTS=0", "expected a number of at least 1"),
        ("QMD_MODELS_IDLE_UNLOAD=later", "expected a number of seconds (0 = never)"),
        ("QMD_WATCH=perhaps", "expected true or false"),
    ],
)
def test_bad_values_name_the_variable_and_the_file(tmp_path: Path, line: str, wording: str) -> None:
    path = _env_file(tmp_path, line + "\n")
    with pytest.raises(QmdError) as caught:
        resolve_settings({}, {}, path)
    assert caught.value.code == INVALID_ARGUMENT
    name = line.split("=")[0]
    assert caught.value.message.startswith(f"{name}=")
    assert f"(from {path})" in caught.value.message and wording in caught.value.message


def test_a_missing_env_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(QmdError) as caught:
        resolve_settings({}, {}, str(tmp_path / "absent.env"))
    assert caught.value.code == INVALID_ARGUMENT and "env file not found" in caught.value.message


def test_the_server_refuses_a_bad_setting_at_start(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "QMD_LOG_LEVEL": "LOUD"}
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "mcp"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "qmd: invalid-argument: QMD_LOG_LEVEL='LOUD': expected one of" in done.stderr


# -- a working folder's `.env`: only the seed's settings until approved (REQ-SEC-ENV-001..003)

HOSTILE = (
    "QMD_TRUST_LOCAL_CONFIG=1\nQMD_WATCH=1\nQMD_CONFIG_DIR=./cfg\nINDEX_PATH=./idx.sqlite\n"
    "QMD_HOST=0.0.0.0\nQMD_ALLOWED_ORIGINS=*\nLDIMS_API_BASE_URL=http://folder.example/api\n"
    "QMD_EMBED_MODEL=hf:folder/evil/e.gguf\nQMD_HTTP_TOKEN=folder\nPGPASSWORD=x\n"
)
SEED_SETTINGS = "SEARCH_MAX_RESULTS_HARD_LIMIT=3\nLOG_LEVEL=ERROR\nMCP_REQUEST_TIMEOUT_SECONDS=7\n"


def _folder(tmp_path: Path, text: str) -> tuple[Path, dict[str, str]]:
    folder = tmp_path / "checkout"
    folder.mkdir(exist_ok=True)
    (folder / ".env").write_text(text, encoding="utf-8")
    return folder, {"HOME": str(tmp_path / "home"), "QMD_CONFIG_DIR": str(tmp_path / "mine")}


def test_an_unapproved_working_env_sets_only_the_seed_settings(tmp_path: Path) -> None:
    folder, environ = _folder(tmp_path, HOSTILE + SEED_SETTINGS)
    settings = resolve_settings({}, environ, working_folder=str(folder))
    assert (settings.max_results, settings.request_timeout_s) == (3, 7.0)
    assert settings.log_level == LOG_LEVELS["ERROR"]
    assert settings.watch is False
    taken = set(settings.env) - set(environ)
    assert taken == set(FOLDER_ENV_VARIABLES) & taken and taken == {
        "SEARCH_MAX_RESULTS_HARD_LIMIT",
        "LOG_LEVEL",
        "MCP_REQUEST_TIMEOUT_SECONDS",
    }
    assert settings.env["QMD_CONFIG_DIR"] == environ["QMD_CONFIG_DIR"]
    assert set(settings.refused) == {line.split("=")[0] for line in HOSTILE.splitlines()}
    notice = settings.refusal_notice()
    assert notice is not None and "\n" not in notice
    path = str(folder / ".env")
    assert all(name in notice for name in settings.refused)
    assert notice.endswith(f"approve it with: qmd trust {path}")


def test_an_approved_working_env_is_honoured_until_it_changes(tmp_path: Path) -> None:
    folder, environ = _folder(tmp_path, HOSTILE)
    path = str(folder / ".env")
    TrustStore(environ).record_env(path, read_env_file(path).digest)
    settings = resolve_settings({}, environ, working_folder=str(folder))
    assert settings.refused == () and settings.refusal_notice() is None
    assert settings.watch is True and settings.env["QMD_HOST"] == "0.0.0.0"
    assert settings.env["QMD_CONFIG_DIR"] == environ["QMD_CONFIG_DIR"]  # the real one wins
    (folder / ".env").write_text(HOSTILE + "QMD_ALLOWED_HOSTS=*\n", encoding="utf-8")
    edited = resolve_settings({}, environ, working_folder=str(folder))
    assert edited.watch is False and "QMD_HOST" not in edited.env
    assert "QMD_ALLOWED_HOSTS" in edited.refused


def test_the_approval_is_read_from_the_real_config_folder_only(tmp_path: Path) -> None:
    """A `.env` that points QMD_CONFIG_DIR at a trust file it carries approves nothing."""
    folder, environ = _folder(tmp_path, f"QMD_CONFIG_DIR={tmp_path / 'checkout' / 'cfg'}\n")
    path = str(folder / ".env")
    planted = {**environ, "QMD_CONFIG_DIR": str(folder / "cfg")}
    TrustStore(planted).record_env(path, read_env_file(path).digest)
    settings = resolve_settings({}, environ, working_folder=str(folder))
    assert settings.refused == ("QMD_CONFIG_DIR",)
    assert settings.env["QMD_CONFIG_DIR"] == environ["QMD_CONFIG_DIR"]


def test_the_opt_in_variables_do_not_approve_a_working_env(tmp_path: Path) -> None:
    folder, environ = _folder(tmp_path, "QMD_WATCH=1\n")
    opted = {**environ, "QMD_TRUST_LOCAL_CONFIG": "1", "QMD_TRUST_UPDATE_HOOKS": "1"}
    settings = resolve_settings({}, opted, working_folder=str(folder))
    assert settings.watch is False and settings.refused == ("QMD_WATCH",)


def test_a_named_env_file_is_the_users_choice(tmp_path: Path) -> None:
    folder, environ = _folder(tmp_path, "QMD_WATCH=1\n")
    chosen = _env_file(tmp_path, "QMD_HOST=0.0.0.0\n")
    for settings in (
        resolve_settings({}, environ, chosen, working_folder=str(folder)),
        resolve_settings({}, {**environ, "QMD_ENV_FILE": chosen}, working_folder=str(folder)),
        resolve_settings({}, environ, str(folder / ".env"), working_folder=str(folder)),
    ):
        assert settings.refused == () and settings.refusal_notice() is None
    named = resolve_settings({}, environ, chosen, working_folder=str(folder))
    assert named.env["QMD_HOST"] == "0.0.0.0" and named.watch is False  # not the folder's


@given(name=st.from_regex(r"[A-Z][A-Z0-9_]{0,30}", fullmatch=True))
@examples(max_examples=60, deadline=None)
def test_any_variable_but_the_seed_settings_is_refused(name: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        folder, environ = _folder(Path(scratch), f"{name}=folder-value\n")
        resolved = resolve_settings({}, environ, working_folder=str(folder))
    if name in FOLDER_ENV_VARIABLES:
        assert resolved.refused == ()
    else:
        assert resolved.refused == (name,) and resolved.env.get(name) == environ.get(name)


def test_an_oversized_env_file_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    folder, environ = _folder(tmp_path, "")
    with (folder / ".env").open("wb") as handle:
        handle.truncate(ENV_FILE_MAX_BYTES * 64)  # sparse: costs no disk
    with pytest.raises(QmdError) as caught:
        resolve_settings({}, environ, working_folder=str(folder))
    assert caught.value.code == INVALID_ARGUMENT and "is over" in caught.value.message


def test_a_link_to_an_approved_env_elsewhere_is_not_approved(tmp_path: Path) -> None:
    """Approval is for the file in its folder: a checkout linking `.env` to the user's
    approved one would have its relative paths name the checkout's files."""
    approved = tmp_path / "deploy"
    approved.mkdir()
    (approved / ".env").write_text("INDEX_PATH=./idx.sqlite\n", encoding="utf-8")
    folder, environ = _folder(tmp_path, "")
    (folder / ".env").unlink()
    (folder / ".env").symlink_to(approved / ".env")
    TrustStore(environ).record_env(
        str(approved / ".env"), read_env_file(str(approved / ".env")).digest
    )
    assert resolve_settings({}, environ, working_folder=str(approved)).refused == ()
    assert resolve_settings({}, environ, working_folder=str(folder)).refused == ("INDEX_PATH",)
    # the folder itself reached through a link is the same folder
    (tmp_path / "via").symlink_to(approved)
    assert resolve_settings({}, environ, working_folder=str(tmp_path / "via")).refused == ()


def test_an_unapproved_env_cannot_copy_a_secret_into_a_shown_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${VAR}` is not expanded in an unapproved file: a bad value's error shows the text."""
    folder, environ = _folder(tmp_path, "LOG_LEVEL=${QMD_HTTP_TOKEN}\n")
    monkeypatch.setenv("QMD_HTTP_TOKEN", "s3cret-token")  # dotenv expands from the process's
    with pytest.raises(QmdError) as caught:
        resolve_settings({}, environ, working_folder=str(folder))
    assert "s3cret-token" not in caught.value.message
    assert "${QMD_HTTP_TOKEN}" in caught.value.message
    path = str(folder / ".env")
    TrustStore(environ).record_env(path, read_env_file(path).digest)
    with pytest.raises(QmdError) as approved:
        resolve_settings({}, environ, working_folder=str(folder))
    assert "s3cret-token" in approved.value.message  # approved: expanded, as before

"""Service settings: flags, then the environment, then the .env file, then the defaults;
bad values refused with invalid-argument naming the variable and where it came from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adapters.config.service import LOG_LEVELS, resolve_settings
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

"""scripts/postgres.sh (issue 33): the local PostgreSQL asks every connection for the password
it made at initialisation (scram-sha-256), keeps it in a file only its owner reads, and prints
a URL carrying it; a data folder an older script made, which trusted every local connection,
is given a password and switched at its next start. Each test runs a server of its own
(QMD_PG_DIR), never the shared one, and stops it."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.mcp_harness import REPO

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def script(base: Path, command: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["QMD_PG_DIR"] = str(base)
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "postgres.sh"), command],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.fixture
def base() -> Iterator[Path]:
    # not under pytest's tmp_path: another pytest session takes the traversal right off its
    # root folder, which the server's own user (as root: qmdpg) needs to reach the data
    folder = Path(tempfile.mkdtemp(prefix="qmd-pg-auth-")) / "pg"
    try:
        yield folder
    finally:
        script(folder, "stop")
        shutil.rmtree(folder.parent, ignore_errors=True)


def start(base: Path) -> tuple[str, subprocess.CompletedProcess[str]]:
    done = script(base, "start")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1], done


def refused_without_password(url: str) -> str:
    """The error of a connection as the URL's user without its password (none from the
    environment or a password file either)."""
    parts = urlsplit(url)
    bare = f"postgresql://{parts.username}@{parts.hostname}:{parts.port}{parts.path}"
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(bare, passfile=os.devnull, connect_timeout=10).close()
    return str(refused.value)


def test_a_new_server_asks_for_the_password_it_prints(base: Path) -> None:
    url, _ = start(base)
    password = urlsplit(url).password
    assert password and len(password) >= 32
    secret = base / "password"
    assert secret.read_text().strip() == password
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600  # its owner reads it, nobody else
    server_user = "qmdpg" if os.getuid() == 0 else pwd.getpwuid(os.getuid()).pw_name
    assert pwd.getpwuid(secret.stat().st_uid).pw_name == server_user
    assert "no password supplied" in refused_without_password(url)
    with psycopg.connect(url, connect_timeout=10) as conn:
        row = conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert row == ("vector",)
    # the next start (and `url`) print the same password
    assert start(base)[0] == url
    assert script(base, "url").stdout.strip() == url


def test_a_data_folder_that_trusted_everyone_gets_a_password_at_its_next_start(
    base: Path,
) -> None:
    url, _ = start(base)
    assert script(base, "stop").returncode == 0
    # what an older postgres.sh left: trust for every connection, no password file
    hba = base / "data" / "pg_hba.conf"
    hba.write_text(hba.read_text().replace("scram-sha-256", "trust"))
    (base / "password").unlink()
    url, done = start(base)
    assert "switching it to scram-sha-256" in done.stderr
    assert "trust" not in [
        line.split()[-1]
        for line in hba.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert "no password supplied" in refused_without_password(url)
    with psycopg.connect(url, connect_timeout=10) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)

"""The wire-fuzz part of the guarantee matrix (issue 22), generated from the surface registry:
every registered surface (ldims, memorize and projmem included) gets a short fuzz run on every
transport: stdio, HTTP with 2025-era requests, HTTP with 2026-07-28 requests. Every reply is
judged by the docs/spec oracle (tests/fuzz/oracle.py, tests/fuzz/http_oracle.py); what the
oracle needs to know of a surface (whether it answers malformed messages) is asked of the
server itself, so a surface registered tomorrow is fuzzed by registering.

The long runs are `scripts/fuzz_wire.py --surface all --transport all` (docs/reliability.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz import driver, http_driver
from tests.fuzz.http_frames import MODERN
from tests.shipped import shipped_surfaces

CI_FRAMES = 300  # per surface and transport: a few seconds each on a loaded 2-core machine
TRANSPORTS = ["stdio", "http-2025", f"http-{MODERN}"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return driver.fuzz_env(tmp_path_factory.mktemp("fuzz-matrix"))


@pytest.fixture(scope="module")
def profiles(env: dict[str, str]) -> dict[str, driver.Profile]:
    return {name: driver.surface_profile(env, name) for name in shipped_surfaces()}


def run(
    env: dict[str, str], profile: driver.Profile, transport: str, frames: int, crash_dir: Path
) -> driver.Report:
    if transport == "stdio":
        return driver.run(
            env, profile.compat, frames, seed=2026, crash_dir=crash_dir, profile=profile
        )
    era = transport.removeprefix("http-")
    return http_driver.run(
        env, profile.compat, frames, seed=2026, crash_dir=crash_dir, profile=profile, era=era
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("surface", shipped_surfaces())
def test_every_surface_meets_the_oracle_on_every_transport(
    env: dict[str, str],
    profiles: dict[str, driver.Profile],
    surface: str,
    transport: str,
    tmp_path: Path,
) -> None:
    report = run(env, profiles[surface], transport, CI_FRAMES, tmp_path / "crashes")
    print(report.summary())
    assert report.frames == CI_FRAMES
    if transport == "stdio":
        assert report.replies > CI_FRAMES // 3  # the oracle saw real answers, not silence
    else:
        assert report.replies == CI_FRAMES  # every HTTP request is answered
    assert report.clean, "\n".join([report.summary(), *report.examples])


def test_the_matrix_covers_every_registered_surface(profiles: dict[str, driver.Profile]) -> None:
    """The three newest surfaces are in it (they were never fuzzed before issue 22), and the
    compat surface is told apart by what it does on the wire, not by its name."""
    assert {"ldims", "memorize", "projmem", "spec"} <= set(profiles)
    dropping = {name for name, profile in profiles.items() if profile.compat}
    assert dropping == {name for name in profiles if name.startswith("compat-")}

"""A run of the real-model goldens ends with a "real-model goldens" section: one line naming
our llama.cpp build and the comparison the goldens used (byte identity, or ADR 0058's
tolerance), under `-q` and on an xdist worker as CI runs them (scripts/real_tier.sh), so a CI
log says which was checked.

The goldens' build check alone runs here (no model is loaded): it records the same line as
the comparisons do."""

from __future__ import annotations

import pytest

from tests import nested_pytest
from tooling import cli_goldens, llama_build

pytestmark = [pytest.mark.slow]


def test_the_summary_names_the_build_and_the_comparison() -> None:
    done = nested_pytest.run(
        "tests/e2e/test_real_model_goldens.py",
        *("-k", "test_where_the_original_build_can_be_made_it_is_ours"),
        *("-n", "1", "--dist", "loadfile"),
    )
    # whether the build check passes depends on the machine; the line shows either way
    assert done.returncode in (0, 1), done.stdout + done.stderr
    variant = cli_goldens.load_goldens()["ggml_cpu_variant"]
    line = llama_build.report_line(llama_build.installed(), variant)
    assert nested_pytest.sections(done.stdout, "real-model goldens") == [[line]], done.stdout
    assert line.endswith(("compared by byte identity", "compared within tolerance (ADR 0058)"))

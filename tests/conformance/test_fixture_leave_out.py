"""The real-models fixture's copy leaves out the files fixtures/setup.json names under
`leave_out` (the two long references, too slow to embed with EmbeddingGemma on CPU); every
other fixture copies the whole corpus."""

from __future__ import annotations

from pathlib import Path

from conformance import fixture
from tooling import cli_goldens

LONG = ("reference/large reference.md", "reference/operator guide.md")


def test_only_the_real_models_copy_leaves_the_long_references_out(tmp_path: Path) -> None:
    src = fixture.default_fixtures_dir()
    real = fixture.make_scratch(tmp_path / "real", src, "real-models")
    whole = fixture.make_scratch(tmp_path / "default", src, "default")
    for rel in LONG:
        assert not (real.fixtures / "corpora/handbook" / rel).exists()
        assert (whole.fixtures / "corpora/handbook" / rel).is_file()
    assert (real.fixtures / "corpora/handbook/engineering/api/authentication.md").is_file()
    # the CLI goldens' corpus leaves out the same two
    assert cli_goldens.LEAVE_OUT == LONG

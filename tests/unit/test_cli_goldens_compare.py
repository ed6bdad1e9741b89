"""The comparison of the real-model CLI goldens (tooling/cli_goldens.py, REQ-SEARCH-VEC-002):
bytes outside the printed scores must be identical, a score may move within the tolerance."""

from __future__ import annotations

from tooling import cli_goldens

GOLDENS = cli_goldens.load_goldens()


def test_a_score_beyond_the_tolerance_or_a_changed_rank_is_a_difference() -> None:
    csv = next(c["stdout"] for c in GOLDENS["cases"] if "csv" in c["argv"])
    first = csv.splitlines()[1].split(",")
    moved = f"{float(first[1]) - 0.02:.4f}"
    assert cli_goldens.differences(csv, csv.replace(f",{first[1]},", f",{moved},", 1))
    within = f"{float(first[1]) - 0.004:.4f}"
    assert cli_goldens.differences(csv, csv.replace(f",{first[1]},", f",{within},", 1)) == []
    docids = [line.split(",")[0] for line in csv.splitlines()[1:] if line.startswith("#")]
    swapped = csv.replace(docids[0], "#tmp").replace(docids[1], docids[0])
    assert cli_goldens.differences(csv, swapped.replace("#tmp", docids[1]))


def test_every_printed_score_format_is_found() -> None:
    """cli (whole %), json, csv and files formats: each case's scores are all compared."""
    for case in GOLDENS["cases"]:
        assert cli_goldens._SCORES.findall(case["stdout"]), case["argv"]
    cli = GOLDENS["cases"][0]["stdout"]
    first = cli_goldens._SCORES.findall(cli)[0]
    percent = int(first.strip()[:-1])
    assert cli_goldens.differences(cli, cli.replace(first, f"  {percent + 2}%", 1))
    assert cli_goldens.differences(cli, cli.replace(first, f"  {percent + 1}%", 1)) == []

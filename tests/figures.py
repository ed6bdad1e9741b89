"""Figures the robustness tests print (counts of tried inputs, kills, requests), collected so
the end of a pytest run lists them even without `-s` (see tests/e2e/conftest.py)."""

from __future__ import annotations

FIGURES: list[str] = []


def report(line: str) -> None:
    """Print one summary line now (visible with -s) and keep it for the terminal summary."""
    text = line.strip()
    print("\n" + text)
    FIGURES.append(text)

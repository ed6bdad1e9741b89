"""Documents written from the code or from other documents stay current: each generator's
`--check` passes on the tree, and each generator notices what it must notice."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Protocol

import pytest

from tooling.marked_section import splice

REPO = Path(__file__).resolve().parents[2]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _check(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / f"{name}.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )


def test_the_adr_index_is_current() -> None:
    done = _check("gen_adr_index")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_adr_index_lists_each_record_with_status_and_summary(tmp_path: Path) -> None:
    adr = _script("gen_adr_index")
    (tmp_path / "0001-first.md").write_text(
        "# 0001 — First | choice\n\nStatus: accepted\n\nSummary: We chose A.\n\n## Context\nx\n"
    )
    (tmp_path / "0002-second.md").write_text(
        "# 0002: Second\n\nStatus: superseded by 0003\n\n## Decision\nUse B. Then more.\n"
    )
    (tmp_path / "notes.md").write_text("# not a record\n")
    rendered = adr.render(tmp_path)
    rows = [line for line in rendered.splitlines() if line.startswith("| [")]
    assert rows == [
        "| [0001](0001-first.md) | First \\| choice | accepted | We chose A. |",
        "| [0002](0002-second.md) | Second | superseded by 0003 | Use B. |",
    ]


def test_a_record_without_a_status_is_refused(tmp_path: Path) -> None:
    adr = _script("gen_adr_index")
    (tmp_path / "0007-bare.md").write_text("# 0007 — Bare\n\n## Decision\nSomething.\n")
    with pytest.raises(SystemExit, match=r"0007-bare\.md: no `Status:` line"):
        adr.render(tmp_path)


@pytest.fixture(scope="module")
def ports_table() -> tuple[ModuleType, str]:
    """The generator and its table, rendered once: rendering imports and inspects every
    adapter, the cost of both tests below (in process, not `--check` in a subprocess)."""
    arch = _script("gen_architecture")
    return arch, arch.render()


def test_the_ports_table_is_current(ports_table: tuple[ModuleType, str]) -> None:
    arch, rendered = ports_table
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    updated = splice(text, arch.START, arch.END, rendered)
    assert updated is not None, "ARCHITECTURE.md lost its table markers"
    assert updated == text, "ARCHITECTURE.md is out of date: run `make gen`"


class _Greeter(Protocol):
    name: str

    def greet(self, whom: str) -> str: ...


class _FullGreeter:
    def __init__(self) -> None:
        self.name = "full"  # a data member only the constructor shows

    def greet(self, whom: str) -> str:
        return f"hello {whom}"


class _MuteGreeter:
    name = "mute"


def test_a_class_implements_a_port_when_it_has_every_member() -> None:
    arch = _script("gen_architecture")
    port = arch.Port("_Greeter", __name__, arch._protocol_members(_Greeter), _Greeter)
    assert port.members == {"name", "greet"}
    assert arch._provides(_FullGreeter, port)
    assert not arch._provides(_MuteGreeter, port)
    assert not arch._provides(_Greeter, port)  # the port itself is no implementation


def test_the_ports_table_names_the_stores_behind_the_document_store(
    ports_table: tuple[ModuleType, str],
) -> None:
    arch, rendered = ports_table
    by_name = {port.name: port for port in arch.ports()}
    assert {"DocumentStore", "Embedder", "ConfigRepository"} <= set(by_name)
    row = next(line for line in rendered.splitlines() if line.startswith("| `DocumentStore` |"))
    assert "SqliteIndex" in row and "InMemoryStore" in row

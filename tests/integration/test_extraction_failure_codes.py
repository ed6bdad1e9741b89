"""Each Office failure label reaches the seed-003 envelope as its stable code (REQ-EXTRACT-013):
real files, indexed through the composition root with the real extractor (worker process),
then read through the LDIMS document resource. Before issue 36 an encrypted workbook, a legacy
binary file under a new name and a file the parser refused were all `corrupt`."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.bootstrap import build_app
from adapters.mcp.ldims import LdimsSurface
from tests.mcp_harness import fixture_env
from tooling.docgen import write_docx

ENCRYPTED = Path(__file__).resolve().parents[1] / "data" / "extraction" / "encrypted.docx"
MACRO_TYPE = "application/vnd.ms-word.document.macroEnabled.main+xml"
MAIN_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"


def _legacy_word_file(path: Path) -> None:
    """The head of an OLE compound file whose directory (sector 0) names a .doc's streams."""
    header = bytearray(512)
    header[:8] = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
    header[30:32] = (9).to_bytes(2, "little")  # 512-byte sectors
    header[48:52] = (0).to_bytes(4, "little")  # the directory starts at sector 0
    names = ("Root Entry", "WordDocument", "1Table")
    directory = b"".join(n.encode("utf-16-le").ljust(64, b"\0") + b"\0" * 64 for n in names)
    path.write_bytes(bytes(header) + directory)


def _macro_enabled(source: Path, path: Path) -> None:
    """A well-formed DOCX declaring a macro-enabled main part, which python-docx refuses."""
    with zipfile.ZipFile(source) as archive:
        parts = {info.filename: archive.read(info) for info in archive.infolist()}
    types = parts["[Content_Types].xml"].decode()
    parts["[Content_Types].xml"] = types.replace(MAIN_TYPE, MACRO_TYPE).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)


@pytest.fixture(scope="module")
def surface(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LdimsSurface]:
    root = tmp_path_factory.mktemp("labels")
    folder = root / "docs"
    folder.mkdir()
    whole = write_docx(root / "whole.docx", "Ducks", [("Migration", ["Ducks fly south."])])
    shutil.copy(ENCRYPTED, folder / "encrypted.docx")
    _legacy_word_file(folder / "legacy.docx")
    _macro_enabled(whole, folder / "macros.docx")
    (folder / "damaged.docx").write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    app = build_app(env=fixture_env(root), with_models=False)
    app.collections.add(str(folder), "c", "**/*.docx")
    services = app.services()
    yield LdimsSurface(services, services.extraction, env={})
    app.close()


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("encrypted.docx", "encrypted"),
        ("legacy.docx", "unsupported-variant"),
        ("macros.docx", "parser-error"),
        ("damaged.docx", "corrupt"),
    ],
)
def test_the_failure_label_is_the_envelopes_code(
    surface: LdimsSurface, name: str, code: str
) -> None:
    content = surface.read_resource(f"ldims://docs/c%2F{name}/extracted_content")["contents"][0]
    body = json.loads(content["text"])
    assert body["errorCode"] == "CONTENT_UNAVAILABLE_OR_FAILED"
    assert body["errorDetails"]["code"] == code
    assert body["errorDetails"]["reason"].startswith(f"{code}: ")

"""An index holding our document metadata is still the original's index (REQ-META-004).

`qmd update` (ours) records front matter and extractor fields in `py_document_metadata`; the
original 2.8.3 then lists, searches, gets, re-indexes and cleans that index as its own, and
our metadata and filters still work afterwards. Opening an index never adds the table: only
a metadata write does. Needs the original (scripts/install_original.sh); never skips.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.bootstrap import App
from adapters.config.yaml_config import QmdConfig, load_config, save_config, sync_config_to_store
from adapters.fs.content_source import FileSystemSource
from adapters.sqlite.driver import dbapi
from adapters.sqlite.metadata import METADATA_TABLE
from adapters.sqlite.store import SqliteIndex
from domain.filters import parse_filter
from domain.model import Collection
from domain.usecases.search import SearchRequest
from tests.fakes import FixedClock
from tests.integration.test_original_index_interop import status_counts
from tests.original import MISSING_MODELS, original_qmd

pytestmark = pytest.mark.original

NOTES = {
    "report.md": "---\ndate: 2024-05-02\nauthor: Ana\ntags: [quarterly, sales]\n---\n"
    "# Q2 Report\n\nSales grew in the second quarter.\n",
    "memo.md": "# Memo\n\nSales meeting moved to Friday.\n",
    "plain.md": "# Plain\n\nNothing about the quarter here, only sales words.\n",
}


def _tables(db: Path) -> set[str]:
    conn = dbapi.connect(str(db))
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()


def test_original_serves_an_index_with_our_metadata(tmp_path: Path) -> None:
    qmd = original_qmd(tmp_path / "home")
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    save_config(
        qmd.config_path,
        QmdConfig(
            collections={"notes": Collection(name="notes", path=str(notes))},
            models={
                "embed": MISSING_MODELS["QMD_EMBED_MODEL"],
                "generate": MISSING_MODELS["QMD_GENERATE_MODEL"],
                "rerank": MISSING_MODELS["QMD_RERANK_MODEL"],
            },
        ),
    )
    index = SqliteIndex.open(qmd.db_path)
    try:
        assert METADATA_TABLE not in _tables(qmd.db_path)  # opening adds nothing
        sync_config_to_store(load_config(qmd.config_path), index)
        app = App(
            store=index,
            lexical=index,
            vectors=index,
            cache=index,
            config=_Config(),
            source=FileSystemSource(),
            clock=FixedClock(),
            maintenance=index,
            metadata_index=index,
        )
        manager = app.collections
        manager.index(manager.get("notes"), extra_metadata={"memo.md": {"pages": 2}})
        ids = {m.path: m.id for m in index.documents()}
        assert index.metadata_by_id([ids["report.md"]])[ids["report.md"]]["author"] == "Ana"
    finally:
        index.close()
    assert METADATA_TABLE in _tables(qmd.db_path)

    assert status_counts(qmd) == {"notes": 3}
    found = json.loads(qmd.run("search", "--format", "json", "-n", "10", "sales"))
    assert {r["file"] for r in found} == {f"qmd://notes/{name}" for name in NOTES}
    assert "Sales grew in the second quarter." in qmd.run("get", "qmd://notes/report.md")
    update = qmd.run("update")
    assert "0 new, 0 updated, 3 unchanged, 0 removed" in update, update
    qmd.run("cleanup")

    index = SqliteIndex.open(qmd.db_path)
    try:
        stored = index.metadata_by_id(list(ids.values()))
        assert stored[ids["report.md"]]["tags"] == ("quarterly", "sales")
        assert stored[ids["memo.md"]]["pages"] == 2
        app = App(
            store=index,
            lexical=index,
            vectors=index,
            cache=index,
            config=_Config(),
            source=FileSystemSource(),
            clock=FixedClock(),
            metadata_index=index,
        )
        assert app.metadata is not None
        within = app.metadata.scope(
            parse_filter({"key": "author", "operator": "eq", "value": "Ana"})
        )
        hits = app.searcher.lex_search("sales", SearchRequest(limit=1, within=within))
        assert [h.document.meta.path for h in hits] == ["report.md"]
    finally:
        index.close()


class _Config:
    """A config repository that keeps nothing (the YAML file is the original's)."""

    def load_collections(self) -> list[Collection]:
        return []

    def save_collection(self, collection: Collection) -> None: ...
    def delete_collection(self, name: str) -> None: ...
    def rename_collection(self, old: str, new: str) -> None: ...
    def load_global_context(self) -> str | None:
        return None

    def save_global_context(self, text: str | None) -> None: ...

"""LlmCache contract: InMemoryStore and SqliteIndex keep and forget entries alike."""

from __future__ import annotations

from tests.contract.conftest import StoreLike


def test_get_put_clear(store: StoreLike) -> None:
    assert store.get("k") is None
    store.put("k", '{"a": 1}')
    store.put("k2", "日本")
    assert store.get("k") == '{"a": 1}'
    assert store.get("k2") == "日本"
    store.put("k", "replaced")
    assert store.get("k") == "replaced"
    store.clear()
    assert store.get("k") is None
    assert store.get("k2") is None

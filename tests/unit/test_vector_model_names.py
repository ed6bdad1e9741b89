"""The pure half of REQ-VEC-MODEL-001: which other stored names count as the configured
embedding model, and under which fingerprint (the file-system rule is handed in)."""

from __future__ import annotations

from domain.usecases.embedding import (
    FingerprintProbes,
    fingerprint_for,
    fingerprint_probes,
    other_names_of_model,
    same_text,
)
from tests.model_fakes import FakeEmbedder


def test_a_name_of_the_same_model_gets_its_fingerprint_under_the_current_formats() -> None:
    probes = fingerprint_probes(FakeEmbedder(model_name="/b/x.gguf"))
    also = other_names_of_model(
        "/b/x.gguf",
        probes,
        ["/a/x.gguf", "/b/x.gguf", "/c/y.gguf", "/a/x.gguf"],
        lambda stored, current: stored == "/a/x.gguf",
    )
    # what an embedder configured by that name would have stored (formats unchanged)
    assert also == (("/a/x.gguf", fingerprint_for(FakeEmbedder(model_name="/a/x.gguf"))),)


def test_other_formats_give_another_fingerprint_for_the_same_name() -> None:
    plain = FingerprintProbes("q", "d")
    prompted = FingerprintProbes("task: search result | query: q", "title: none | text: d")
    assert plain.fingerprint("/a/x.gguf") != prompted.fingerprint("/a/x.gguf")


def test_no_other_name_without_probes_or_with_the_text_rule() -> None:
    probes = FingerprintProbes("q", "d")
    assert other_names_of_model("m", None, ["n"], lambda s, c: True) == ()
    assert other_names_of_model("m", probes, ["n", "m"], same_text) == ()

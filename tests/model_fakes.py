"""Deterministic stand-ins for the model ports, held to the same contract tests as llama.cpp.

* `FakeEmbedder`: hashed bag of words (sha256 of each lower-cased word picks a dimension and a
  sign), L2-normalised. Texts that share words are close; texts that share none are orthogonal
  up to hash collisions.
* `FakeReranker`: share of query terms found in the document, in [0, 1].
* `FakeExpander`: one lex, one vec and one hyde line built from the query.
* `FlakyEmbedder`: a `FakeEmbedder` that fails after a number of calls, to test interruption.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from adapters.models.references import PREPARED_DIR_NAME
from domain.model import SubQuery
from tests import needs

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


class FakeEmbedder:
    def __init__(self, dimensions: int = 64, model_name: str = "fake-embed") -> None:
        self.dimensions = dimensions
        self._name = model_name
        self.calls = 0

    @property
    def model_name(self) -> str:
        return self._name

    def format_query(self, text: str) -> str:
        return text

    def format_document(self, title: str, text: str) -> str:
        return f"{title}\n{text}" if title else text

    def count_tokens(self, text: str) -> int:
        return len(words(text))

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return [self._vector(self.format_query(t)) for t in texts]

    def embed_documents(self, items: Sequence[tuple[str, str]]) -> list[list[float]]:
        self.calls += 1
        return [self._vector(self.format_document(title, text)) for title, text in items]

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in words(text):
            digest = hashlib.sha256(word.encode("utf-8")).digest()
            index = int.from_bytes(digest[:4], "big") % self.dimensions
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0.0:
            # Empty text still gets a unit vector, as a real model would return one.
            return [1.0] + [0.0] * (self.dimensions - 1)
        return [x / norm for x in vector]


class FlakyEmbedder(FakeEmbedder):
    """Succeeds for `ok_calls` `embed_documents` calls, then raises `error` on every call."""

    def __init__(self, ok_calls: int, error: BaseException, dimensions: int = 64) -> None:
        super().__init__(dimensions)
        self.ok_calls = ok_calls
        self.error = error
        self.document_calls = 0

    def embed_documents(self, items: Sequence[tuple[str, str]]) -> list[list[float]]:
        self.document_calls += 1
        if self.document_calls > self.ok_calls:
            raise self.error
        return super().embed_documents(items)


class FakeReranker:
    def __init__(self, model_name: str = "fake-rerank") -> None:
        self._name = model_name

    @property
    def model_name(self) -> str:
        return self._name

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        terms = set(words(query))
        if not terms:
            return [0.5 for _ in documents]
        return [len(terms & set(words(doc))) / len(terms) for doc in documents]


class FakeExpander:
    def __init__(self, model_name: str = "fake-expand") -> None:
        self._name = model_name

    @property
    def model_name(self) -> str:
        return self._name

    def expand(self, query: str) -> list[SubQuery]:
        terms = words(query)
        return [
            SubQuery("lex", " ".join([*terms, "basics"])),
            SubQuery("vec", f"{query} explained"),
            SubQuery("hyde", f"This document describes {query} in detail."),
        ]


# ------------------------------------------------------------------ prepared real models

REPO_ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = REPO_ROOT / PREPARED_DIR_NAME


def prepared_model(file_name: str) -> Path:
    """Path of a model built by scripts/prepare_models.py; fails (never skips) when absent."""
    needs.require("models", f"the prepared model {file_name}")
    path = MODELS_DIR / file_name
    if not path.is_file():
        pytest.fail(
            f"{path} is missing: the `models` tests need the prepared test models. "
            "Run `python scripts/prepare_models.py` (after `scripts/install_llama.sh`), "
            "or deselect them with `-m 'not models'`.",
            pytrace=False,
        )
    return path


def real_prepared_model(role: str) -> Path:
    """Path of the real set's `role` model (`prepare_models.py --set real`, opt-in); the test
    must be marked `real_models`, and it fails (never skips) when the set was not prepared."""
    from tooling.real_models import load_pins

    needs.require("real_models", f"the real set's {role} model")
    path = MODELS_DIR / load_pins()[role].file
    if not path.is_file():
        pytest.fail(
            f"{path} is missing: the `real_models` tests need the real model set. Run "
            "`python scripts/prepare_models.py --set real` (or set-up with "
            "QMD_SETUP_MODELS=real), or deselect them with `-m 'not real_models'`.",
            pytrace=False,
        )
    return path


def real_prepared_source() -> Path:
    """The checked upstream EmbeddingGemma folder `prepare_models.py --set real` keeps."""
    from tooling import real_models

    needs.require("real_models", "the real set's upstream EmbeddingGemma files")
    folder = real_models.source_dir(real_models.default_wheel_dir())
    if not (folder / "model.safetensors").is_file():
        pytest.fail(
            f"{folder} is missing: run `python scripts/prepare_models.py --set real` again "
            "(it keeps the checked upstream files there).",
            pytrace=False,
        )
    return folder

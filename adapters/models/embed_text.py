"""What an embedding model is fed, by its prompt family: the strings behind the embedding
fingerprint. Kept apart from the llama.cpp adapter so `qmd status` can name the configured
model's fingerprint without importing any model code."""

from __future__ import annotations

import re
from typing import Literal

EmbedFamily = Literal["embeddinggemma", "qwen3", "plain"]

QWEN_EMBED_INSTRUCTION = "Retrieve relevant documents for the given query"

_QWEN_EMBED = re.compile(r"qwen.*embed|embed.*qwen", re.IGNORECASE)
_PLAIN_EMBED = re.compile(r"minilm|mpnet|bge-|/bge|e5-|gte-|nomic|bert", re.IGNORECASE)


def detect_family(reference: str) -> EmbedFamily:
    """Prompt format by model name: Qwen3-Embedding, classic sentence encoders, else gemma."""
    if _QWEN_EMBED.search(reference):
        return "qwen3"
    if _PLAIN_EMBED.search(reference):
        return "plain"
    # The original formats every other model the embeddinggemma way.
    return "embeddinggemma"


def format_query(family: EmbedFamily, text: str) -> str:
    if family == "embeddinggemma":
        return f"task: search result | query: {text}"
    if family == "qwen3":
        return f"Instruct: {QWEN_EMBED_INSTRUCTION}\nQuery: {text}"
    return text


def format_document(family: EmbedFamily, title: str, text: str) -> str:
    if family == "embeddinggemma":
        return f"title: {title or 'none'} | text: {text}"
    return f"{title}\n{text}" if title else text


class EmbedText:
    """A configured local embedding model as far as its fingerprint goes: its name and the
    strings it is fed (domain/usecases/embedding.py `fingerprint_for`); it loads nothing."""

    def __init__(self, model: str, family: EmbedFamily | None = None) -> None:
        self.model_name = model
        self.family: EmbedFamily = family or detect_family(model)

    def format_query(self, text: str) -> str:
        return format_query(self.family, text)

    def format_document(self, title: str, text: str) -> str:
        return format_document(self.family, title, text)

"""Seed 004's agent memory, as plain data and pure rules (REQ-MEM-*).

A QA record is a question an agent answered; a knowledge record is what the client's LLM
fused from a group of similar QA records. Both belong to a topic; topics are reused by vector
similarity. Records are kept as markdown files with front matter (see `render_record` and
`parse_record`), so people can read, edit and version them; the values in the front matter are
JSON scalars and lists, which YAML reads the same way.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from domain.errors import INVALID_ARGUMENT, QmdError
from domain.model import model_file_name

QA: str = "qa"
KNOWLEDGE: str = "knowledge"

# Limits of the seed-001 envelope checks (REQ-MEM-INPUT-001).
MAX_QUESTION_CHARS = 4_000
MAX_ANSWER_CHARS = 32_000
MAX_TOPIC_CHARS = 200
MAX_CONTEXT_CHARS = 8_000
MAX_RESOURCE_CHARS = 16_000  # a knowledge:// read is bounded (REQ-MEM-RES-002)
MAX_KNOWLEDGE_CHARS = 32_000  # a fused text longer than this is cut, with a marker

DEFAULT_QUERY_LIMIT = 5
MAX_GROUP_SIZE = 8


# -- thresholds per embedding model (REQ-MEM-CAL-*) -----------------------------------------

LATIN = "latin"
OTHER = "other"


def script_of(text: str) -> str:
    """`latin` when every letter of `text` is Latin (English, most European languages), else
    `other` (Chinese, Japanese, Cyrillic, ...): models separate the two very differently."""
    for char in text:
        if char.isalpha() and not unicodedata.name(char, "").startswith("LATIN"):
            return OTHER
    return LATIN


@dataclass(frozen=True)
class Calibration:
    """The thresholds measured for one embedding model on the labelled sets of
    benchmarks/data/memorize-*, by benchmarks/bench_memorize_fusion.py (docs/decisions/0049).

    `model` is the model file's name (or a served model's id) the figures belong to and `sha256`
    the digest of the file measured. Each threshold is for one script class (`script_of`); None
    means the model cannot tell that script's texts apart at any threshold, so similarity alone
    never reuses a topic or suggests a fusion there (an exact topic name still matches).

    `multilingual` declares that the model was measured to separate non-Latin text (Chinese and
    Japanese): only then do the `_other` thresholds apply; otherwise every comparison involving
    such text is refused, and a non-multilingual entry may not carry `_other` thresholds, so the
    table cannot say two things (REQ-MEM-CAL-004)."""

    model: str
    sha256: str
    topic: float | None
    fusion: float | None
    topic_other: float | None
    fusion_other: float | None
    multilingual: bool = False

    def __post_init__(self) -> None:
        if not self.multilingual and (self.topic_other, self.fusion_other) != (None, None):
            raise ValueError(f"{self.model}: other-script thresholds need multilingual=True")

    def topic_for(self, *texts: str) -> float | None:
        """The topic threshold for comparing `texts`: the stricter class when they differ."""
        return self._other(self.topic_other) if _any_other(texts) else self.topic

    def fusion_for(self, *texts: str) -> float | None:
        return self._other(self.fusion_other) if _any_other(texts) else self.fusion

    def _other(self, threshold: float | None) -> float | None:
        return threshold if self.multilingual else None


def _any_other(texts: Sequence[str]) -> bool:
    return any(script_of(t) == OTHER for t in texts)


CALIBRATIONS: tuple[Calibration, ...] = (
    # The bundled test model (scripts/prepare_models.py). English: topics 0.45 (pairwise
    # precision 0.979), fusion 0.60 (precision 0.960, recall 0.471). Chinese and Japanese:
    # its vocabulary maps most CJK characters to one unknown token (报税 and 长跑 embed
    # identically), and precision stays below 0.6 at every threshold: refused.
    Calibration(
        model="all-MiniLM-L6-v2-f16.gguf",
        sha256="fbfdb16fe16c84d1190abc8d3b235cd19dc9fe5d18b90830236e626fa38ba8bd",
        topic=0.45,
        fusion=0.60,
        topic_other=None,
        fusion_other=None,
        multilingual=False,
    ),
    # The real set's embedder (issue 34; scripts/prepare_models.py --set real), converted from
    # google/embeddinggemma-300m. English: topics 0.55 (precision 0.990, recall 0.915), fusion
    # 0.65 (1.000, 0.627). Chinese and Japanese: topics 0.60 (0.975, 0.771), fusion 0.60
    # (0.984, 0.827); a Chinese question and its Japanese translation score like paraphrases.
    # Measured on the original's own vectors (ADR 0059's build): at 0.55 CJK topics reach
    # precision 0.949, below the rule's 0.95 (0.956 with the earlier build's vectors).
    # The closest wrong pairs are near misses sharing a word (Java 打包 / Python打包 0.61).
    Calibration(
        model="embeddinggemma-300M-Q8_0.gguf",
        sha256="6e01648e169d633042fd5e2c5c554bfb0e2caf2b1c2cc904c804e6ff04126b19",
        topic=0.55,
        fusion=0.65,
        topic_other=0.60,
        fusion_other=0.60,
        multilingual=True,
    ),
)

# A model nobody measured: only near-identical texts are treated as the same, in any script (it
# is not assumed blind to other scripts, only not trusted beyond near-identity). A wrong reuse
# mixes unrelated knowledge, which costs more than a duplicate topic or a missed suggestion;
# QMD_MEMORY_TOPIC_THRESHOLD / QMD_MEMORY_FUSION_THRESHOLD set measured values instead.
FALLBACK_CALIBRATION = Calibration(
    model="",
    sha256="",
    topic=0.90,
    fusion=0.90,
    topic_other=0.95,
    fusion_other=0.95,
    multilingual=True,
)

# What the tests and the conformance profile report for the bundled model (kept for callers).
DEFAULT_TOPIC_THRESHOLD = CALIBRATIONS[0].topic
DEFAULT_FUSION_THRESHOLD = CALIBRATIONS[0].fusion


def calibration_for(model: str) -> Calibration:
    """The calibration measured for `model` (matched by file name), else the fallback."""
    name = model_file_name(model)
    for calibration in CALIBRATIONS:
        if calibration.model.lower() == name:
            return calibration
    return FALLBACK_CALIBRATION


@dataclass(frozen=True)
class Topic:
    name: str
    vector: tuple[float, ...]


@dataclass(frozen=True)
class MemoryRecord:
    """One QA or knowledge record. `text` is the answer (QA) or the fused text (knowledge);
    `question` is empty for knowledge; `sources` lists the QA ids a knowledge record fused;
    `merged_into` is the knowledge id that absorbed a QA record (empty while unmerged)."""

    id: str
    kind: str
    topic: str
    question: str
    text: str
    created: str
    updated: str
    merged: bool = False
    merged_into: str = ""
    sources: tuple[str, ...] = ()
    source_questions: tuple[str, ...] = ()
    vector: tuple[float, ...] = field(default=(), compare=False)

    def merged_by(self, knowledge_id: str, when: str) -> MemoryRecord:
        return replace(self, merged=True, merged_into=knowledge_id, updated=when)

    def unmerged(self, when: str) -> MemoryRecord:
        return replace(self, merged=False, merged_into="", updated=when)


@dataclass(frozen=True)
class Scored:
    record: MemoryRecord
    score: float


@dataclass(frozen=True)
class MergeGroup:
    """QA records similar enough to fuse; `key` names the group in a sampling round trip."""

    key: str
    topic: str
    members: tuple[MemoryRecord, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.members)


# -- validation ---------------------------------------------------------------------------


def require_text(name: str, value: str, limit: int) -> str:
    """The trimmed value, or `invalid-argument` when it is empty, longer than `limit`, or holds
    a NUL or a lone surrogate (neither survives a UTF-8 markdown file, REQ-MEM-STORE-007)."""
    text = value.strip()
    if not text:
        raise QmdError(INVALID_ARGUMENT, f"{name} must not be empty")
    if "\x00" in text:
        raise QmdError(INVALID_ARGUMENT, f"{name} must not contain NUL (U+0000)")
    if any("\ud800" <= c <= "\udfff" for c in text):
        raise QmdError(INVALID_ARGUMENT, f"{name} must not contain lone surrogates")
    if len(text) > limit:
        raise QmdError(
            INVALID_ARGUMENT, f"{name} is {len(text)} characters long; the limit is {limit}"
        )
    return text


def require_threshold(name: str, value: float | None, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise QmdError(INVALID_ARGUMENT, f"{name} must be a number between 0 and 1")
    if not 0.0 <= float(value) <= 1.0:
        raise QmdError(INVALID_ARGUMENT, f"{name} must be between 0 and 1, got {value}")
    return float(value)


# -- similarity ---------------------------------------------------------------------------


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if not a or not b or len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return dot / (na * nb)


def closest_topic(vector: Sequence[float], topics: Sequence[Topic]) -> tuple[Topic, float] | None:
    """The most similar topic (ties: the name that sorts first), or None without topics."""
    best: tuple[Topic, float] | None = None
    for topic in sorted(topics, key=lambda t: t.name):
        score = cosine(vector, topic.vector)
        if best is None or score > best[1]:
            best = (topic, score)
    return best


def reusable_topic(
    vector: Sequence[float],
    text: str,
    topics: Sequence[Topic],
    threshold: Callable[[str, str], float | None],
) -> tuple[Topic, float] | None:
    """The most similar topic whose similarity to `text` reaches `threshold(text, name)`
    (None: never by similarity), ties to the name that sorts first; None when no topic does."""
    best: tuple[Topic, float] | None = None
    for topic in sorted(topics, key=lambda t: t.name):
        limit = threshold(text, topic.name)
        score = cosine(vector, topic.vector)
        if limit is not None and score >= limit and (best is None or score > best[1]):
            best = (topic, score)
    return best


def similar_groups(
    records: Sequence[MemoryRecord],
    threshold: float | Callable[[str, str], float | None],
    max_size: int = MAX_GROUP_SIZE,
) -> list[MergeGroup]:
    """Groups of at least two unmerged QA records of one topic, each member at least
    `threshold` similar to the group's first record (its seed); a callable threshold is asked
    per pair of questions (None: that pair is never grouped). Seeds are taken oldest first,
    so the grouping of the same records is always the same."""

    def limit(a: MemoryRecord, b: MemoryRecord) -> float | None:
        if isinstance(threshold, int | float):
            return float(threshold)
        return threshold(a.question, b.question)

    pending = sorted(
        (r for r in records if r.kind == QA and not r.merged), key=lambda r: (r.created, r.id)
    )
    used: set[str] = set()
    groups: list[MergeGroup] = []
    for seed in pending:
        if seed.id in used:
            continue
        mates = []
        for r in pending:
            if r.id in used or r.id == seed.id or r.topic != seed.topic:
                continue
            bound = limit(seed, r)
            if bound is not None and cosine(seed.vector, r.vector) >= bound:
                mates.append(r)
        mates = mates[: max_size - 1]
        if not mates:
            continue
        members = (seed, *mates)
        used.update(m.id for m in members)
        groups.append(MergeGroup(f"g{len(groups) + 1}", seed.topic, members))
    return groups


# -- identity and names -------------------------------------------------------------------


def normalized(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def qa_id(question: str, answer: str) -> str:
    """Identical pairs (same words, whatever the spacing) get the same id (REQ-MEM-STORE-003)."""
    digest = hashlib.sha256(f"{normalized(question)}\0{normalized(answer)}".encode()).hexdigest()
    return "qa-" + digest[:16]


def knowledge_id(source_ids: Sequence[str]) -> str:
    digest = hashlib.sha256("\0".join(sorted(source_ids)).encode()).hexdigest()
    return "kn-" + digest[:16]


def topic_slug(topic: str) -> str:
    """A folder name for a topic: lower-case words joined by '-', at most 60 characters."""
    slug = re.sub(r"[^\w]+", "-", unicodedata.normalize("NFC", topic).lower()).strip("-_")
    return slug[:60].strip("-_") or "topic"


def record_path(record: MemoryRecord) -> str:
    """Where a record lives inside the memory folder."""
    folder = "qa" if record.kind == QA else "knowledge"
    return f"{folder}/{topic_slug(record.topic)}/{record.id}.md"


# -- markdown with front matter -----------------------------------------------------------

_FIELDS = (
    "id",
    "kind",
    "topic",
    "question",
    "merged",
    "merged_into",
    "sources",
    "source_questions",
    "created",
    "updated",
)


def render_record(record: MemoryRecord) -> str:
    values: dict[str, object] = {
        "id": record.id,
        "kind": record.kind,
        "topic": record.topic,
        "question": record.question,
        "merged": record.merged,
        "merged_into": record.merged_into,
        "sources": list(record.sources),
        "source_questions": list(record.source_questions),
        "created": record.created,
        "updated": record.updated,
    }
    if record.kind == KNOWLEDGE:
        del values["question"], values["merged"], values["merged_into"]
    else:
        del values["sources"], values["source_questions"]
    lines = ["---", *(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in values.items())]
    lines += ["---", "", record.text.rstrip("\n"), ""]
    return "\n".join(lines)


def _value(raw: str) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.strip().strip("'")  # a hand edit without quotes: keep the words


def parse_record(text: str) -> MemoryRecord | None:
    """The record a file holds, or None when it is not one (no front matter, no id/kind)."""
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        return None
    fields: dict[str, object] = {}
    # only "\n" ends a front-matter line: str.splitlines() would also cut at U+2028, U+2029,
    # U+0085 and others inside a value (REQ-MEM-STORE-007)
    for line in text[3:end].split("\n"):
        key, sep, raw = line.partition(":")
        if sep and key.strip() in _FIELDS:
            fields[key.strip()] = _value(raw.strip())
    body = text[end + 4 :].lstrip("\n").rstrip("\n")
    kind = fields.get("kind")
    record_id = fields.get("id")
    topic = fields.get("topic")
    if kind not in (QA, KNOWLEDGE) or not isinstance(record_id, str) or not record_id:
        return None
    if not isinstance(topic, str) or not topic.strip():
        return None

    def text_of(name: str) -> str:
        value = fields.get(name, "")
        return value if isinstance(value, str) else str(value)

    def list_of(name: str) -> tuple[str, ...]:
        value = fields.get(name, [])
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    return MemoryRecord(
        id=record_id,
        kind=str(kind),
        topic=topic.strip(),
        question=text_of("question"),
        text=body,
        created=text_of("created"),
        updated=text_of("updated"),
        merged=fields.get("merged") is True,
        merged_into=text_of("merged_into") if fields.get("merged_into") else "",
        sources=list_of("sources"),
        source_questions=list_of("source_questions"),
    )


def fusion_prompt(group: MergeGroup) -> str:
    """What the client's LLM is asked to fuse (REQ-MEM-MERGE-002)."""
    parts = [
        f"Topic: {group.topic}",
        "",
        "Fuse the question/answer pairs below into one short, self-contained piece of "
        "knowledge. Keep every fact that the answers agree on, say where they disagree, "
        "and answer in plain markdown without a preamble.",
    ]
    for number, member in enumerate(group.members, start=1):
        parts += ["", f"Q{number}: {member.question}", f"A{number}: {member.text}"]
    return "\n".join(parts)


def bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n\n[... truncated {len(text) - limit} characters]"

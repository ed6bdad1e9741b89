"""Seed 004's memory use cases: store a QA pair, query by context and question, fuse similar
pairs into knowledge through a `Fuser` (the client's LLM), read a topic's knowledge, and repair
what a crash or a hand edit left (REQ-MEM-*)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from domain.errors import MODEL_UNAVAILABLE, UNAVAILABLE, QmdError
from domain.memory import (
    DEFAULT_QUERY_LIMIT,
    KNOWLEDGE,
    MAX_ANSWER_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_KNOWLEDGE_CHARS,
    MAX_QUESTION_CHARS,
    MAX_TOPIC_CHARS,
    QA,
    Calibration,
    MemoryRecord,
    MergeGroup,
    Scored,
    Topic,
    bounded,
    calibration_for,
    closest_topic,
    cosine,
    fusion_prompt,
    knowledge_id,
    qa_id,
    require_text,
    require_threshold,
    reusable_topic,
    similar_groups,
)
from domain.ports import Clock, Embedder, Fuser, MemoryStore


@dataclass(frozen=True)
class Thresholds:
    """Thresholds in force. Given to `Memorizer`, a number overrides the model's calibration
    for every script (QMD_MEMORY_*_THRESHOLD) and None keeps it; reported with a stored record,
    None means similarity alone cannot reuse a topic or suggest a fusion for its text."""

    topic: float | None = None
    fusion: float | None = None


@dataclass(frozen=True)
class TopicChoice:
    name: str
    reused: bool
    requested: str
    similarity: float | None  # to the closest existing topic, None when there was none


@dataclass(frozen=True)
class Stored:
    record: MemoryRecord
    created: bool  # False: the identical pair was stored before (nothing written)
    topic: TopicChoice
    suggestion: list[Scored]
    thresholds: Thresholds
    calibration: str  # the model file the thresholds were measured on; "" for the fallback


@dataclass(frozen=True)
class Found:
    topic: str | None
    similarity: float | None
    answers: list[Scored]
    threshold: float | None


@dataclass(frozen=True)
class Skipped:
    group: MergeGroup
    reason: str


@dataclass
class MergeReport:
    threshold: float | None
    merged: list[MemoryRecord] = field(default_factory=list)  # the knowledge records made
    skipped: list[Skipped] = field(default_factory=list)


class Memorizer:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder | None,
        clock: Clock,
        thresholds: Thresholds | None = None,
        calibration: Calibration | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._clock = clock
        self.thresholds = thresholds or Thresholds()
        # Similarities mean different things per model: use the figures measured for this one
        # (REQ-MEM-CAL-001), the conservative fallback for a model nobody measured.
        self.calibration = calibration or calibration_for(
            embedder.model_name if embedder is not None else ""
        )
        self._repaired = False
        self._repair_lock = threading.Lock()
        self._listeners: list[Callable[[str], None]] = []
        self._writers: list[Callable[[], None]] = []

    # -- plumbing -------------------------------------------------------------------------

    def on_topic_changed(self, listener: Callable[[str], None]) -> None:
        """`listener(topic)` runs after that topic's knowledge changed (REQ-MEM-RES-003)."""
        self._listeners.append(listener)

    def on_written(self, listener: Callable[[], None]) -> None:
        """`listener()` runs after records were written (the composition root re-indexes
        the memory collection so `search` and `get` see them at once)."""
        self._writers.append(listener)

    def _written(self) -> None:
        for listener in list(self._writers):
            listener()

    def _changed(self, topic: str) -> None:
        self._written()
        for listener in list(self._listeners):
            listener(topic)

    def _embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        if self._embedder is None:
            raise QmdError(
                MODEL_UNAVAILABLE,
                "No embedding model is configured; the memory needs one to compare questions "
                "and topics (set QMD_EMBED_MODEL or the models section of the config).",
            )
        return [tuple(v) for v in self._embedder.embed_queries(list(texts))]

    def topic_threshold(self, a: str, b: str) -> float | None:
        """The similarity at which texts `a` and `b` name one topic (None: never)."""
        if self.thresholds.topic is not None:
            return self.thresholds.topic
        return self.calibration.topic_for(a, b)

    def fusion_threshold(self, a: str, b: str) -> float | None:
        """The similarity at which questions `a` and `b` may be fused (None: never)."""
        if self.thresholds.fusion is not None:
            return self.thresholds.fusion
        return self.calibration.fusion_for(a, b)

    def _reported(self, topic: str, question: str) -> Thresholds:
        return Thresholds(self.topic_threshold(topic, topic), self.fusion_threshold(question, ""))

    def ensure_repaired(self) -> None:
        """Repair once per process, before the first use (REQ-MEM-STORE-006)."""
        with self._repair_lock:
            if not self._repaired:
                self.repair()
                self._repaired = True

    # -- store ----------------------------------------------------------------------------

    def store_qa(
        self,
        question: str,
        answer: str,
        topic: str,
        may_write: Callable[[], bool] | None = None,
    ) -> Stored:
        """`may_write`: asked just before anything is written; False (the call was
        cancelled) writes nothing and fails with `unavailable`."""
        question = require_text("question", question, MAX_QUESTION_CHARS)
        answer = require_text("answer", answer, MAX_ANSWER_CHARS)
        topic = require_text("topic", topic, MAX_TOPIC_CHARS)
        question_vector, topic_vector = self._embed([question, topic])
        self.ensure_repaired()
        record_id = qa_id(question, answer)
        with self._store.exclusive():
            existing = self._store.get(record_id)
            if existing is not None:
                choice = TopicChoice(existing.topic, True, topic, None)
                return self._stored(existing, False, choice)
            if may_write is not None and not may_write():
                raise QmdError(UNAVAILABLE, "The call was cancelled; nothing was stored.")
            choice = self._choose_topic(topic, topic_vector)
            now = self._clock.now_iso()
            record = MemoryRecord(
                id=record_id,
                kind=QA,
                topic=choice.name,
                question=question,
                text=answer,
                created=now,
                updated=now,
                vector=question_vector,
            )
            self._store.put([record])
        self._written()
        return self._stored(record, True, choice)

    def _stored(self, record: MemoryRecord, created: bool, choice: TopicChoice) -> Stored:
        return Stored(
            record,
            created,
            choice,
            self._suggest(record),
            self._reported(choice.requested, record.question),
            self.calibration.model,
        )

    def _choose_topic(self, requested: str, vector: tuple[float, ...]) -> TopicChoice:
        topics = self._store.topics()
        exact = next((t for t in topics if t.name == requested), None)
        if exact is not None:
            return TopicChoice(exact.name, True, requested, 1.0)
        reuse = reusable_topic(vector, requested, topics, self.topic_threshold)
        if reuse is not None:
            return TopicChoice(reuse[0].name, True, requested, reuse[1])
        best = closest_topic(vector, topics)
        self._store.add_topic(Topic(requested, vector))
        return TopicChoice(requested, False, requested, None if best is None else best[1])

    def _suggest(self, record: MemoryRecord) -> list[Scored]:
        """Unmerged QA records of the topic similar enough to fuse with `record`."""
        if record.merged:
            return []
        hits = []
        for other in self._store.records(record.topic, QA):
            if other.id == record.id or other.merged:
                continue
            limit = self.fusion_threshold(record.question, other.question)
            score = cosine(record.vector, other.vector)
            if limit is not None and score >= limit:
                hits.append(Scored(other, score))
        return sorted(hits, key=lambda s: (-s.score, s.record.id))

    # -- query ----------------------------------------------------------------------------

    def query_qa(self, question: str, context: str, limit: int = DEFAULT_QUERY_LIMIT) -> Found:
        question = require_text("question", question, MAX_QUESTION_CHARS)
        context = require_text("context", context, MAX_CONTEXT_CHARS)
        question_vector, context_vector = self._embed([question, context])
        self.ensure_repaired()
        topics = self._store.topics()
        exact = next((t for t in topics if t.name == context), None)
        reuse = (exact, 1.0) if exact is not None else None
        # a refused threshold still lets the topic's own name find it (REQ-MEM-CAL-003)
        reuse = reuse or reusable_topic(context_vector, context, topics, self.topic_threshold)
        if reuse is None:
            best = closest_topic(context_vector, topics)
            near = None if best is None else best[0].name
            threshold = self.topic_threshold(context, near or context)
            return Found(None, None if best is None else best[1], [], threshold)
        topic, similarity = reuse
        threshold = self.topic_threshold(context, topic.name)
        scored = [
            Scored(r, cosine(question_vector, r.vector))
            for r in self._store.records(topic.name, QA)
            if not r.merged
        ]
        scored.sort(key=lambda s: (-s.score, s.record.id))
        return Found(topic.name, similarity, scored[:limit], threshold)

    # -- merge ----------------------------------------------------------------------------

    def resolve_topic(self, name: str) -> str | None:
        """An existing topic by exact name, else the closest one above the topic threshold."""
        topics = self._store.topics()
        if any(t.name == name for t in topics):
            return name
        (vector,) = self._embed([name])
        reuse = reusable_topic(vector, name, topics, self.topic_threshold)
        return None if reuse is None else reuse[0].name

    def plan_merge(
        self, topic: str | None, threshold: float | None
    ) -> tuple[list[MergeGroup], float | None]:
        """The groups to fuse and the threshold reported: the one given, else the fusion
        threshold of Latin-script questions (other scripts have their own, REQ-MEM-CAL-002)."""
        given = None if threshold is None else require_threshold("threshold", threshold, 0.0)
        limit: float | Callable[[str, str], float | None]
        limit = self.fusion_threshold if given is None else given
        chosen = given if given is not None else self.fusion_threshold("", "")
        if topic is not None:
            topic = require_text("topic", topic, MAX_TOPIC_CHARS)
        self._embed([topic or "merge"])  # a missing model fails here, at once
        self.ensure_repaired()
        if topic is None:
            return similar_groups(self._store.records(None, QA), limit), chosen
        resolved = self.resolve_topic(topic)
        if resolved is None:
            return [], chosen
        return similar_groups(self._store.records(resolved, QA), limit), chosen

    def regroup(self, key: str, topic: str, ids: object) -> MergeGroup | None:
        """A planned group again, from its record ids (a 2026-07-28 retry carries only those);
        None when the ids are not a list of at least two record ids."""
        if not isinstance(ids, list) or len(ids) < 2 or not all(isinstance(i, str) for i in ids):
            return None
        members = [self._store.get(i) for i in ids]
        present = tuple(m for m in members if m is not None)
        if len(present) != len(ids):
            return MergeGroup(key, topic, tuple(_placeholder(i, topic) for i in ids))
        return MergeGroup(key, topic, present)

    def merge(self, topic: str | None, threshold: float | None, fuser: Fuser) -> MergeReport:
        """Fuse every group through `fuser`; a group whose fusion fails stays as it was."""
        groups, chosen = self.plan_merge(topic, threshold)
        report = MergeReport(chosen)
        for group in groups:
            fusion = fuser.fuse(group, fusion_prompt(group))
            self.apply_fusion(group, fusion.text, fusion.reason, report)
        return report

    def apply_fusion(
        self, group: MergeGroup, text: str | None, reason: str, report: MergeReport
    ) -> None:
        """Store one group's fused text as knowledge and mark its members merged, all or
        nothing; skip it when there is no text or a member changed since it was planned."""
        fused = (text or "").strip()
        if not fused:
            report.skipped.append(Skipped(group, reason or "the client's LLM returned no text"))
            return
        (vector,) = self._embed([fused])
        with self._store.exclusive():
            members = [self._store.get(i) for i in group.ids]
            current = [m for m in members if m is not None and m.kind == QA and not m.merged]
            if len(current) != len(group.ids) or any(m.topic != group.topic for m in current):
                report.skipped.append(Skipped(group, "a record of the group changed meanwhile"))
                return
            now = self._clock.now_iso()
            knowledge = MemoryRecord(
                id=knowledge_id(group.ids),
                kind=KNOWLEDGE,
                topic=group.topic,
                question="",
                text=bounded(fused, MAX_KNOWLEDGE_CHARS),
                created=now,
                updated=now,
                sources=group.ids,
                source_questions=tuple(m.question for m in current),
                vector=vector,
            )
            # the knowledge file first: once it exists the merge is decided (repair finishes it)
            self._store.put([knowledge, *(m.merged_by(knowledge.id, now) for m in current)])
        report.merged.append(knowledge)
        self._changed(group.topic)

    # -- knowledge ------------------------------------------------------------------------

    def knowledge(self, topic: str, query: str, limit: int = 3) -> tuple[str | None, list[Scored]]:
        topic = require_text("topic", topic, MAX_TOPIC_CHARS)
        query = require_text("query", query, MAX_QUESTION_CHARS)
        self.ensure_repaired()
        resolved = self.resolve_topic(topic)
        if resolved is None:
            return None, []
        (vector,) = self._embed([query])
        scored = [
            Scored(r, cosine(vector, r.vector)) for r in self._store.records(resolved, KNOWLEDGE)
        ]
        scored.sort(key=lambda s: (-s.score, s.record.id))
        return resolved, scored[:limit]

    # -- repair ---------------------------------------------------------------------------

    def repair(self) -> int:
        """Make the files and the index agree again (REQ-MEM-STORE-005/006): finish a merge
        whose knowledge file exists, undo a merge mark whose knowledge file does not, embed
        records the index does not know in their current form, and give every topic named by
        a record a vector. Returns how many records it rewrote or re-embedded."""
        with self._store.exclusive():
            records = {r.id: r for r in self._store.load()}
            knowledge = {r.id: r for r in records.values() if r.kind == KNOWLEDGE}
            now = self._clock.now_iso()
            changed: dict[str, MemoryRecord] = {}
            for k in sorted(knowledge.values(), key=lambda r: r.id):
                for source in k.sources:
                    qa = changed.get(source, records.get(source))
                    if qa is not None and qa.kind == QA and not qa.merged:
                        changed[source] = qa.merged_by(k.id, now)
            for qa in records.values():
                if qa.kind == QA and qa.merged and qa.merged_into not in knowledge:
                    changed[qa.id] = qa.unmerged(now)
            stale = [r for r in records.values() if not r.vector]
            if stale:
                vectors = self._embed([r.question if r.kind == QA else r.text for r in stale])
                for record, vector in zip(stale, vectors, strict=True):
                    base = changed.get(record.id, record)
                    changed[record.id] = _with_vector(base, vector)
            for record_id, record in list(changed.items()):
                if not record.vector:
                    changed[record_id] = _with_vector(record, records[record_id].vector)
            ordered = sorted(changed.values(), key=lambda r: r.kind != KNOWLEDGE)
            if ordered:
                self._store.put(ordered)
            known = {t.name for t in self._store.topics()}
            missing = sorted({r.topic for r in records.values()} - known)
            if missing:
                for name, vector in zip(missing, self._embed(missing), strict=True):
                    self._store.add_topic(Topic(name, vector))
        return len(changed)


def _with_vector(record: MemoryRecord, vector: tuple[float, ...]) -> MemoryRecord:
    return replace(record, vector=vector)


def _placeholder(record_id: str, topic: str) -> MemoryRecord:
    """A member that no longer exists: `apply_fusion` finds it missing and skips the group."""
    return MemoryRecord(record_id, QA, topic, "", "", "", "")

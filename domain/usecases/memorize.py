"""Seed 004's memory use cases: store a QA pair, query by context and question, fuse similar
pairs into knowledge through a `Fuser` (the client's LLM), read a topic's knowledge, and repair
what a crash or a hand edit left (REQ-MEM-*)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from domain.errors import MODEL_UNAVAILABLE, UNAVAILABLE, QmdError
from domain.memory import (
    DEFAULT_FUSION_THRESHOLD,
    DEFAULT_QUERY_LIMIT,
    DEFAULT_TOPIC_THRESHOLD,
    KNOWLEDGE,
    MAX_ANSWER_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_KNOWLEDGE_CHARS,
    MAX_QUESTION_CHARS,
    MAX_TOPIC_CHARS,
    QA,
    MemoryRecord,
    MergeGroup,
    Scored,
    Topic,
    bounded,
    closest_topic,
    cosine,
    fusion_prompt,
    knowledge_id,
    qa_id,
    require_text,
    require_threshold,
    similar_groups,
)
from domain.ports import Clock, Embedder, Fuser, MemoryStore


@dataclass(frozen=True)
class Thresholds:
    topic: float = DEFAULT_TOPIC_THRESHOLD
    fusion: float = DEFAULT_FUSION_THRESHOLD


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


@dataclass(frozen=True)
class Found:
    topic: str | None
    similarity: float | None
    answers: list[Scored]
    threshold: float


@dataclass(frozen=True)
class Skipped:
    group: MergeGroup
    reason: str


@dataclass
class MergeReport:
    threshold: float
    merged: list[MemoryRecord] = field(default_factory=list)  # the knowledge records made
    skipped: list[Skipped] = field(default_factory=list)


class Memorizer:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder | None,
        clock: Clock,
        thresholds: Thresholds | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._clock = clock
        self.thresholds = thresholds or Thresholds()
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
                return Stored(existing, False, choice, self._suggest(existing), self.thresholds)
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
        return Stored(record, True, choice, self._suggest(record), self.thresholds)

    def _choose_topic(self, requested: str, vector: tuple[float, ...]) -> TopicChoice:
        topics = self._store.topics()
        exact = next((t for t in topics if t.name == requested), None)
        if exact is not None:
            return TopicChoice(exact.name, True, requested, 1.0)
        best = closest_topic(vector, topics)
        if best is not None and best[1] >= self.thresholds.topic:
            return TopicChoice(best[0].name, True, requested, best[1])
        self._store.add_topic(Topic(requested, vector))
        return TopicChoice(requested, False, requested, None if best is None else best[1])

    def _suggest(self, record: MemoryRecord) -> list[Scored]:
        """Unmerged QA records of the topic similar enough to fuse with `record`."""
        if record.merged:
            return []
        scored = [
            Scored(other, cosine(record.vector, other.vector))
            for other in self._store.records(record.topic, QA)
            if other.id != record.id and not other.merged
        ]
        hits = [s for s in scored if s.score >= self.thresholds.fusion]
        return sorted(hits, key=lambda s: (-s.score, s.record.id))

    # -- query ----------------------------------------------------------------------------

    def query_qa(self, question: str, context: str, limit: int = DEFAULT_QUERY_LIMIT) -> Found:
        question = require_text("question", question, MAX_QUESTION_CHARS)
        context = require_text("context", context, MAX_CONTEXT_CHARS)
        question_vector, context_vector = self._embed([question, context])
        self.ensure_repaired()
        best = closest_topic(context_vector, self._store.topics())
        threshold = self.thresholds.topic
        if best is None or best[1] < threshold:
            return Found(None, None if best is None else best[1], [], threshold)
        topic, similarity = best
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
        best = closest_topic(vector, topics)
        return best[0].name if best is not None and best[1] >= self.thresholds.topic else None

    def plan_merge(
        self, topic: str | None, threshold: float | None
    ) -> tuple[list[MergeGroup], float]:
        chosen = require_threshold("threshold", threshold, self.thresholds.fusion)
        if topic is not None:
            topic = require_text("topic", topic, MAX_TOPIC_CHARS)
        self._embed([topic or "merge"])  # a missing model fails here, at once
        self.ensure_repaired()
        if topic is None:
            return similar_groups(self._store.records(None, QA), chosen), chosen
        resolved = self.resolve_topic(topic)
        if resolved is None:
            return [], chosen
        return similar_groups(self._store.records(resolved, QA), chosen), chosen

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

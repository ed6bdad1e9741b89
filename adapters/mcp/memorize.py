"""The `memorize` surface: seed 004's QA memory over MCP (docs/spec/memorize.md, REQ-MEM-*).

Tools `store_qa`, `query_qa`, `merge_knowledge`; the resource template
`knowledge://{topic}/{query}` with `resources/subscribe`. `merge_knowledge` fuses records with
the client's LLM: in the 2025 era it sends `sampling/createMessage` requests to the client and
waits for each answer; in the 2026-07-28 era (no server-to-client requests) it answers with an
`input_required` result that carries one sampling request per group and the plan as
`requestState`, and the client's retry, carrying the answers, stores the knowledge
(docs/decisions/0039). The state is signed with a key this process draws at start (HMAC) and
bound to the call's arguments: a forged, altered, expired or re-aimed one is refused
(REQ-SEC-OUT-002).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from adapters.mcp.formatting import text_result
from adapters.mcp.tools import (
    CLIENT_BUDGET,
    NO_CLIENT,
    BaseSurface,
    CallContext,
    ToolFacts,
    error_result,
    tool,
)
from adapters.mcp.wording import JsonRpcError
from domain.errors import INVALID_ARGUMENT, UNAVAILABLE, QmdError, error_envelope
from domain.memory import (
    MAX_ANSWER_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_QUESTION_CHARS,
    MAX_RESOURCE_CHARS,
    MAX_TOPIC_CHARS,
    MergeGroup,
    fusion_prompt,
    record_path,
)
from domain.ports import Fusion
from domain.usecases.memorize import Memorizer, MergeReport

log = logging.getLogger("qmd.mcp")

SCHEME = "knowledge://"
MISSING_CAPABILITY = -32021  # 2026-07-28: the request needs a capability the client lacks
METHOD_NOT_FOUND = -32601
INVALID_REQUEST = -32600
SAMPLING_MAX_TOKENS = 1024
SYSTEM_PROMPT = (
    "You merge an agent's notes. Answer with the fused knowledge only, as plain markdown."
)
NO_SAMPLING = (
    "merge_knowledge fuses records with the client's LLM through MCP sampling "
    "(sampling/createMessage), and this client did not declare the sampling capability. "
    "Nothing was changed."
)

RESOURCE_TEMPLATE = {
    "uriTemplate": "knowledge://{topic}/{query}",
    "name": "knowledge",
    "title": "Knowledge of a topic",
    "description": (
        "The fused knowledge of a topic most relevant to the query (URL-encode both parts)."
    ),
    "mimeType": "text/markdown",
}


def _sampling_params(group: MergeGroup) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": {"type": "text", "text": fusion_prompt(group)}}],
        "systemPrompt": SYSTEM_PROMPT,
        "maxTokens": SAMPLING_MAX_TOKENS,
        "temperature": 0.2,
    }


def sampled_text(result: Any) -> str | None:
    """The text of a `CreateMessageResult` (one content block or a list of them)."""
    if not isinstance(result, dict):
        return None
    content = result.get("content")
    blocks = content if isinstance(content, list) else [content]
    texts = [
        b["text"]
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n".join(texts) if texts else None


class _AskingFuser:
    """2025 era: one `sampling/createMessage` request per group, answered by the client."""

    def __init__(self, ask: Callable[[str, dict[str, Any]], dict[str, Any]]) -> None:
        self._ask = ask
        self.unsupported = False
        self._answered = False

    def fuse(self, group: MergeGroup, prompt: str) -> Fusion:
        from adapters.mcp.outgoing import ClientRequestError

        if self.unsupported:
            return Fusion(None, "the client cannot sample")
        try:
            result = self._ask("sampling/createMessage", _sampling_params(group))
        except ClientRequestError as failure:
            if failure.code in (METHOD_NOT_FOUND, INVALID_REQUEST) and not self._answered:
                self.unsupported = True  # the client cannot sample at all (e.g. the SDK's default)
            return Fusion(None, f"sampling failed: {failure}")
        self._answered = True
        text = sampled_text(result)
        return Fusion(text, "" if text else "the client's LLM returned no text")


@dataclass(frozen=True)
class _Answers:
    """2026-07-28 era: the answers the client's retry carries, by group key."""

    responses: dict[str, Any]

    def fuse(self, group: MergeGroup, prompt: str) -> Fusion:
        text = sampled_text(self.responses.get(group.key))
        return Fusion(text, "" if text else "no answer for this group in inputResponses")


# Signs the requestState this process hands out; a restart invalidates outstanding ones.
_STATE_KEY = secrets.token_bytes(32)
STATE_TTL_S = 3600.0
BAD_STATE = (
    "requestState was not issued by this server for this call (forged, altered, expired, or "
    "made for other arguments); call merge_knowledge again without it. Nothing was changed."
)


def _call_digest(arguments: dict[str, Any]) -> str:
    """What binds a state to its call: the arguments that chose the groups."""
    bound = {"tool": "merge_knowledge", **{k: arguments.get(k) for k in ("topic", "threshold")}}
    canonical = json.dumps(bound, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(canonical).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _encode_state(state: dict[str, Any], arguments: dict[str, Any]) -> str:
    payload = json.dumps({**state, "call": _call_digest(arguments), "issued": time.time()})
    signature = hmac.new(_STATE_KEY, payload.encode(), hashlib.sha256).digest()
    return f"{_b64(payload.encode())}.{_b64(signature)}"


def _decode_state(raw: str, arguments: dict[str, Any]) -> Any:
    payload_text, _, signature_text = raw.partition(".")
    try:
        payload, signature = _unb64(payload_text), _unb64(signature_text)
    except (ValueError, binascii.Error) as error:
        raise QmdError(INVALID_ARGUMENT, BAD_STATE) from error
    expected = hmac.new(_STATE_KEY, payload, hashlib.sha256).digest()
    if not hmac.compare_digest(signature, expected):
        raise QmdError(INVALID_ARGUMENT, BAD_STATE)
    try:
        state = json.loads(payload)
    except ValueError as error:
        raise QmdError(INVALID_ARGUMENT, BAD_STATE) from error
    if (
        not isinstance(state, dict)
        or state.get("v") != 1
        or not isinstance(state.get("groups"), dict)
        or state.get("call") != _call_digest(arguments)
        or not isinstance(state.get("issued"), float | int)
        or not 0 <= time.time() - state["issued"] <= STATE_TTL_S
    ):
        raise QmdError(INVALID_ARGUMENT, BAD_STATE)
    return state


class MemorizeSurface(BaseSurface):
    name = "memorize"
    instructions_text = (
        "A memory for agents. store_qa what you learned, query_qa before you work out an "
        "answer again, merge_knowledge when store_qa suggests fusing similar pairs, and "
        "read knowledge://{topic}/{query} for the fused knowledge of a topic."
    )
    templates = (RESOURCE_TEMPLATE,)
    subscribable = True  # a topic's knowledge can be watched (REQ-MEM-RES-003)

    def __init__(self, memory: Memorizer, version: str) -> None:
        super().__init__(version)
        self._memory = memory
        self._context = NO_CLIENT
        self._subscriptions: dict[str, Callable[[str, dict[str, Any]], None]] = {}
        self._lock = threading.Lock()
        memory.on_topic_changed(self._topic_changed)

    # -- calls that talk back to the client -----------------------------------------------

    def call_tool(self, name: str, arguments: Any, context: CallContext) -> dict[str, Any]:
        self._context = context
        if name == "merge_knowledge" and context.era == "modern":
            declared = context.client_capabilities or {}
            if "sampling" not in declared:
                raise JsonRpcError(
                    MISSING_CAPABILITY,
                    NO_SAMPLING,
                    {"requiredCapabilities": {"sampling": {}}},
                )
        return super().call_tool(name, arguments, context)

    # -- tools ----------------------------------------------------------------------------

    @tool(
        "store_qa",
        "Remember a question/answer pair under a topic. The topic is matched by meaning with "
        "the existing topics and the closest one is reused above the topic threshold; similar "
        "pairs of the topic are returned as a fusion suggestion. Storing the identical pair "
        "again changes nothing.",
        title="Store a question and its answer",
        schema={
            "type": "object",
            "properties": {
                "question": {"type": "string", "maxLength": MAX_QUESTION_CHARS},
                "answer": {"type": "string", "maxLength": MAX_ANSWER_CHARS},
                "topic": {"type": "string", "maxLength": MAX_TOPIC_CHARS},
            },
            "required": ["question", "answer", "topic"],
            "additionalProperties": False,  # REQ-MEM-SCHEMA-001
        },
        facts=ToolFacts(runs_model=True, writes=True),  # it embeds the pair
        example={
            "question": "How long does a refresh token live?",
            "answer": "Thirty days, renewed on each use.",
            "topic": "authentication",
        },
    )
    def _store(self, args: dict[str, Any]) -> dict[str, Any]:
        stored = self._memory.store_qa(
            args["question"], args["answer"], args["topic"], may_write=self._context.commit
        )
        record = stored.record
        suggestion = [
            {"id": s.record.id, "question": s.record.question, "score": round(s.score, 4)}
            for s in stored.suggestion
        ]
        payload = {
            "id": record.id,
            "created": stored.created,
            "path": record_path(record),
            "topic": {
                "name": stored.topic.name,
                "requested": stored.topic.requested,
                "reused": stored.topic.reused,
                "similarity": _round(stored.topic.similarity),
            },
            "thresholds": {
                "topic": stored.thresholds.topic,
                "fusion": stored.thresholds.fusion,
                "calibratedFor": stored.calibration or None,
            },
            "suggestion": {"mergeable": bool(suggestion), "records": suggestion},
        }
        verb = "Stored" if stored.created else "Already stored"
        how = "reused" if stored.topic.reused else "new"
        lines = [f"{verb} {record.id} under topic {stored.topic.name!r} ({how} topic)."]
        if suggestion:
            lines.append(
                f"{len(suggestion)} similar pair(s) in this topic could be fused: call "
                f"merge_knowledge with topic {stored.topic.name!r}."
            )
        result = text_result("\n".join(lines))
        result["structuredContent"] = payload
        return result

    @tool(
        "query_qa",
        "The context picks the topic (no topic close enough: an empty answer); the question "
        "is then searched among that topic's unmerged pairs.",
        title="Find stored answers",
        schema={
            "type": "object",
            "properties": {
                "question": {"type": "string", "maxLength": MAX_QUESTION_CHARS},
                "context": {"type": "string", "maxLength": MAX_CONTEXT_CHARS},
                "limit": {"type": "number", "default": 5},
            },
            "required": ["question", "context"],
            "additionalProperties": False,  # REQ-MEM-SCHEMA-001
        },
        facts=ToolFacts(runs_model=True),  # it embeds the context and the question
        example={"question": "How long does a refresh token live?", "context": "authentication"},
    )
    def _query(self, args: dict[str, Any]) -> dict[str, Any]:
        limit = max(1, min(50, int(args["limit"])))
        found = self._memory.query_qa(args["question"], args["context"], limit)
        answers = [
            {
                "id": s.record.id,
                "question": s.record.question,
                "answer": s.record.text,
                "score": round(s.score, 4),
            }
            for s in found.answers
        ]
        payload: dict[str, Any] = {
            "topic": found.topic,
            "topicSimilarity": _round(found.similarity),
            "threshold": found.threshold,
            "answers": answers,
        }
        if found.topic is None:
            text = (
                "No topic matches this context closely enough "
                f"(threshold {found.threshold}); nothing is stored for it yet."
                if found.threshold is not None
                else "The embedding model cannot tell topics apart in this context's script, "
                "so none is matched by similarity (REQ-MEM-CAL-003); give a topic's exact "
                "name as the context."
            )
            payload["message"] = text
        elif not answers:
            text = f"Topic {found.topic!r} has no unmerged answers."
        else:
            shown = [f"{a['score']:.2f} {a['question']}\n{a['answer']}" for a in answers]
            text = f"Topic {found.topic!r}:\n\n" + "\n\n".join(shown)
        result = text_result(text)
        result["structuredContent"] = payload
        return result

    @tool(
        "merge_knowledge",
        "Group similar unmerged pairs (of one topic, or of every topic) and ask the client's "
        "LLM, through MCP sampling, to fuse each group into a knowledge record. Fused pairs "
        "are kept, marked merged, and no longer searched.",
        title="Fuse similar pairs into knowledge",
        schema={
            "type": "object",
            "properties": {
                "topic": {"type": "string", "maxLength": MAX_TOPIC_CHARS},
                "threshold": {"type": "number"},
            },
            "additionalProperties": False,  # REQ-MEM-SCHEMA-001
        },
        # it embeds the records and waits on the client's LLM (sampling)
        facts=ToolFacts(runs_model=True, writes=True, waits_on_client=True, budget=CLIENT_BUDGET),
        example={"topic": "authentication"},
    )
    def _merge(self, args: dict[str, Any]) -> dict[str, Any]:
        topic = args.get("topic")
        threshold = args.get("threshold")
        context = self._context
        if context.era == "modern":
            return self._merge_modern(args, context)
        if context.client_capabilities is not None and "sampling" not in (
            context.client_capabilities
        ):
            return error_result(UNAVAILABLE, NO_SAMPLING)
        if context.ask is None:
            return error_result(
                UNAVAILABLE,
                "This transport has no way to send the client a sampling request. Nothing "
                "was changed.",
            )
        fuser = _AskingFuser(context.ask)
        report = self._memory.merge(topic, threshold, fuser)
        if fuser.unsupported and not report.merged:
            return error_result(UNAVAILABLE, NO_SAMPLING)
        return _merge_result(report)

    def _merge_modern(self, args: dict[str, Any], context: CallContext) -> dict[str, Any]:
        if context.request_state is None:
            groups, chosen = self._memory.plan_merge(args.get("topic"), args.get("threshold"))
            if not groups:
                return _merge_result(MergeReport(chosen))
            state = {
                "v": 1,
                "threshold": chosen,
                "groups": {g.key: {"topic": g.topic, "ids": list(g.ids)} for g in groups},
            }
            return {
                "resultType": "input_required",
                "inputRequests": {
                    g.key: {"method": "sampling/createMessage", "params": _sampling_params(g)}
                    for g in groups
                },
                "requestState": _encode_state(state, args),
            }
        state = _decode_state(context.request_state, args)
        planned = state.get("threshold")  # None: refused for Latin text (REQ-MEM-CAL-003)
        report = MergeReport(None if planned is None else float(planned))
        answers = _Answers(context.input_responses or {})
        for key, entry in sorted(state["groups"].items()):
            group = self._memory.regroup(key, str(entry.get("topic")), entry.get("ids"))
            if group is None:
                continue
            fusion = answers.fuse(group, "")
            self._memory.apply_fusion(group, fusion.text, fusion.reason, report)
        return _merge_result(report)

    # -- resources ------------------------------------------------------------------------

    def read_resource(self, uri: str) -> dict[str, Any]:
        if not uri.startswith(SCHEME) or "/" not in uri[len(SCHEME) :]:
            raise JsonRpcError(-32602, f"Resource not found: {uri}", {"uri": uri})
        raw_topic, _, raw_query = uri[len(SCHEME) :].partition("/")
        topic, query = unquote(raw_topic), unquote(raw_query)
        try:
            resolved, hits = self._memory.knowledge(topic, query)
        except QmdError as error:
            return _contents(
                uri, "application/json", json.dumps(error_envelope(error.code, error.message))
            )
        if resolved is None:
            text = f"No topic matches {topic!r}; there is no knowledge for it yet."
        elif not hits:
            text = f"Topic {resolved!r} has no fused knowledge yet."
        else:
            parts = [f"# Knowledge: {resolved}"]
            for hit in hits:
                parts += ["", f"<!-- {hit.record.id} score {hit.score:.2f} -->", hit.record.text]
            text = "\n".join(parts)
        if len(text) > MAX_RESOURCE_CHARS:  # REQ-MEM-RES-002
            text = text[:MAX_RESOURCE_CHARS] + "\n\n[... truncated]"
        return _contents(uri, "text/markdown", text)

    def subscribe(self, uri: str, notify: Callable[[str, dict[str, Any]], None]) -> None:
        if not uri.startswith(SCHEME):
            raise JsonRpcError(-32602, f"Resource not found: {uri}", {"uri": uri})
        with self._lock:
            self._subscriptions[uri] = notify

    def unsubscribe(self, uri: str) -> None:
        with self._lock:
            self._subscriptions.pop(uri, None)

    def _topic_changed(self, topic: str) -> None:
        with self._lock:
            watched = list(self._subscriptions.items())
        for uri, notify in watched:
            named = unquote(uri[len(SCHEME) :].partition("/")[0])
            try:
                matches = named == topic or self._memory.resolve_topic(named) == topic
            except QmdError:
                matches = False
            if matches:
                notify("notifications/resources/updated", {"uri": uri})


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _contents(uri: str, mime: str, text: str) -> dict[str, Any]:
    return {"contents": [{"uri": uri, "mimeType": mime, "text": text}]}


def _merge_result(report: MergeReport) -> dict[str, Any]:
    merged = [
        {
            "id": k.id,
            "topic": k.topic,
            "sources": list(k.sources),
            "path": record_path(k),
            "text": k.text,
        }
        for k in report.merged
    ]
    skipped = [{"sources": list(s.group.ids), "reason": s.reason} for s in report.skipped]
    if not merged and not skipped:
        text = f"Nothing to merge: no unmerged pairs are {report.threshold} similar."
    else:
        text = f"Merged {len(merged)} group(s) into knowledge; skipped {len(skipped)}."
    result = text_result(text)
    result["structuredContent"] = {
        "threshold": report.threshold,
        "merged": merged,
        "skipped": skipped,
    }
    return result

"""Runs one case in one era against one freshly started server, and checks what came back."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from conformance.cases import Case
from conformance.compare import MISSING, Difference, check_matcher, diff, tolerances
from conformance.http_transport import HttpTarget, describe, messages_of, request_body
from conformance.normalize import WANTED, Problem, Rule, builtin_rules, normalize
from conformance.transport import Frame, ServerStartError, StdioServer

MODERN = "2026-07-28"
ENVELOPE: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
# Fixed, not the package version: it is part of every recorded handshake request.
CLIENT_INFO = {"name": "qmd-conformance", "version": "1.0.0"}
LEGACY_VERSION = "2025-06-18"
DEFAULT_QUIET_MS = 500
FIXTURE_ROOT = "${FIXTURE_ROOT}"


@dataclass(frozen=True)
class Failure:
    step: int | None  # None: outside any step (start-up, handshake)
    label: str
    message: str
    difference: Difference | None = None
    # The requirement(s) the server breaks, named where the runner knows them (a handshake,
    # a volatile field, a non-JSON line) or, for other runner messages, the case's.
    requirements: tuple[str, ...] = ()

    def render(self) -> str:
        where = "setup" if self.step is None else f"step {self.step}"
        if self.label:
            where += f" ({self.label})"
        body = self.difference.render() if self.difference else self.message
        if self.difference and self.message:
            body = f"{self.message}\n  {body}"
        if self.requirements:
            body += f"\n    breaks {', '.join(self.requirements)}"
        return f"{where}: {body}"

    @property
    def root_cause(self) -> tuple[str, str]:
        """(JSON path with indexes as [*], kind of difference): one root cause shows up in
        many cases at the same place, in the same way."""
        if self.difference is None:
            return "-", re.sub(r"\d+(\.\d+)?", "N", self.message.splitlines()[0])[:120]
        return re.sub(r"\[\d+\]", "[*]", self.difference.path), self.difference.kind


def _handshake_requirement(era: str) -> tuple[str, ...]:
    return ("REQ-MCP-ERA-001",) if era == MODERN else ("REQ-MCP-INIT-001",)


def _normalisation_failure(n: int, label: str, issue: Problem) -> Failure:
    """A volatile field that is missing or malformed: what was wanted, what the server sent."""
    wanted = f"<{WANTED.get(issue.kind, 'a value')}>"
    return Failure(
        n,
        label,
        f"volatile field ({issue.kind})",
        Difference(issue.path, wanted, issue.value, issue.message),
        (issue.requirement,) if issue.requirement else (),
    )


def _blame_case(out: Outcome) -> None:
    """Runner messages without a requirement of their own break the case's requirements."""
    out.failures = [
        f
        if f.requirements or f.difference is not None or f.message.startswith(_SUITE_SIDE)
        else replace(f, requirements=tuple(out.case.requirements))
        for f in out.failures
    ]


# Messages about the suite's own data (goldens), not about what the server did.
_SUITE_SIDE = ("no golden", "golden ")


@dataclass
class Outcome:
    case: Case
    era: str
    failures: list[Failure] = field(default_factory=list)
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    stderr_tail: str = ""

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class ServerSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    fixture_roots: list[str]
    logs: Path  # where each server's stderr goes
    request_timeout: float = 15.0


def handshake_request(era: str, req_id: int) -> dict[str, Any]:
    if era == MODERN:
        return {
            "jsonrpc": "2.0",
            "id": req_id,
            "method": "server/discover",
            "params": {"_meta": dict(ENVELOPE)},
        }
    return {
        "jsonrpc": "2.0",
        "id": req_id,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": dict(CLIENT_INFO),
        },
    }


def with_envelope(message: dict[str, Any], era: str, enabled: bool) -> dict[str, Any]:
    """2026-07-28 requests carry the protocol envelope in params._meta; the case stays neutral."""
    if era != MODERN or not enabled:
        return message
    params = dict(message.get("params") or {})
    meta = dict(ENVELOPE)
    meta.update(params.get("_meta") or {})
    params["_meta"] = meta
    return {**message, "params": params}


def build_request(
    send: dict[str, Any], era: str, envelope: bool, ids: Iterator[int]
) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": send["id"] if "id" in send else next(ids),
        "method": send["method"],
    }
    if "params" in send:
        msg["params"] = send["params"]
    return with_envelope(msg, era, envelope)


def substitute(value: Any, fixture_root: str) -> Any:
    """Expand ${FIXTURE_ROOT} in request strings (cases about absolute paths)."""
    if isinstance(value, str):
        return value.replace(FIXTURE_ROOT, fixture_root)
    if isinstance(value, list):
        return [substitute(v, fixture_root) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, fixture_root) for k, v in value.items()}
    return value


def _frame_value(frame: Frame) -> Any:
    return frame.parsed if frame.parsed is not None else {"$nonJson": frame.raw}


def start_and_handshake(spec: ServerSpec, era: str, tag: str) -> tuple[StdioServer, Any]:
    """Used by the pre-flight check: raises ServerStartError when the server is unusable."""
    server = StdioServer(spec.argv, spec.env, spec.cwd, spec.logs / f"{tag}.stderr")
    server.start()
    req = handshake_request(era, 1)
    try:
        server.send(req)
        frame = server.wait_for_id(1, spec.request_timeout * 2)
    except (TimeoutError, EOFError, ServerStartError) as exc:
        tail = server.stderr_tail()
        server.close()
        sent = "closed stdout" if isinstance(exc, EOFError) else "sent nothing"
        raise ServerStartError(
            f"the server {sent} in answer to {req['method']} ({type(exc).__name__}); "
            f"stderr:\n{tail}"
        ) from exc
    if not isinstance(frame.parsed, dict) or "result" not in frame.parsed:
        server.close()
        raise ServerStartError(
            f"{req['method']} failed: the server sent {frame.raw[:500]}"
            f" (breaks {_handshake_requirement(era)[0]})"
        )
    return server, frame.parsed


def execute(
    case: Case, era: str, spec: ServerSpec, golden: dict[str, Any] | None, recording: bool
) -> Outcome:
    out = Outcome(case, era)
    started = time.monotonic()
    server = StdioServer(spec.argv, spec.env, spec.cwd, spec.logs / f"{case.id}.{era}.stderr")
    try:
        server.start()
        _run_steps(server, case, era, spec, golden, recording, out)
    except ServerStartError as exc:
        out.failures.append(Failure(None, "", f"server: {exc}"))
    finally:
        server.close()
        out.seconds = time.monotonic() - started
        if out.failures:
            out.stderr_tail = server.stderr_tail()
    _blame_case(out)
    return out


def _run_steps(
    server: StdioServer,
    case: Case,
    era: str,
    spec: ServerSpec,
    golden: dict[str, Any] | None,
    recording: bool,
    out: Outcome,
) -> None:
    ids = itertools.count(1)
    steps = list(case.steps)
    if case.handshake and not (steps and "handshake" in steps[0]):
        req = handshake_request(era, next(ids))
        server.send(req)
        try:
            frame = server.wait_for_id(req["id"], spec.request_timeout)
        except (TimeoutError, EOFError) as exc:
            sent = "closed stdout" if isinstance(exc, EOFError) else "sent nothing"
            out.failures.append(
                Failure(
                    None,
                    "handshake",
                    f"the server {sent} in answer to {req['method']} "
                    f"within {spec.request_timeout:g}s",
                    requirements=_handshake_requirement(era),
                )
            )
            return
        if not isinstance(frame.parsed, dict) or "result" not in frame.parsed:
            out.failures.append(
                Failure(
                    None,
                    "handshake",
                    f"{req['method']} was not answered with a result; the server sent "
                    f"{frame.raw[:300]}",
                    requirements=_handshake_requirement(era),
                )
            )
            return
        if era != MODERN:
            server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    golden_steps = {ex["step"]: ex for ex in (golden or {}).get("exchanges", [])}
    for n, step in enumerate(steps):
        label = step.get("label", "")
        step_era = step.get("era", era)  # a step may speak another era on this connection
        request, frames, problem = _perform(server, step, step_era, ids, spec)
        if problem:
            out.failures.append(Failure(n, label, problem))
        responses: list[Any] = []
        for frame in frames:
            if frame.parsed is None:
                out.failures.append(
                    Failure(
                        n,
                        label,
                        f"the server wrote a line that is not JSON: {frame.raw[:200]!r}",
                        requirements=("REQ-WIRE-ENCODE-001",),
                    )
                )
            value = _frame_value(frame)
            rules = builtin_rules(
                step_era,
                request if "send" in step or "handshake" in step else None,
                value,
                # an enveloped request on a 2025-era connection is answered undecorated; the
                # golden, not this rule, says whether `_meta` belongs in the answer
                meta_required="era" not in step,
            )
            rules += [
                Rule(r["path"], r["kind"], r.get("why", "")) for r in step.get("normalize", [])
            ]
            fixed, issues = normalize(value, rules, spec.fixture_roots)
            out.failures += [_normalisation_failure(n, label, issue) for issue in issues]
            responses.append(fixed)
        out.exchanges.append(
            {"step": n, "label": label, "request": request, "responses": responses}
        )
        _check(step, n, label, request, responses, golden_steps.get(n), golden, recording, out)


def _perform(
    server: StdioServer, step: dict[str, Any], era: str, ids: Iterator[int], spec: ServerSpec
) -> tuple[Any, list[Frame], str | None]:
    exp = step["expect"]
    quiet = exp.get("noReplyWithinMs") or exp.get("quietMs") or DEFAULT_QUIET_MS
    if "raw" in step:
        server.send_line(step["raw"])
        return {"raw": step["raw"]}, server.collect_quiet(quiet / 1000), None
    if "oversize" in step:
        size = step["oversize"]["bytes"]
        head = '{"jsonrpc":"2.0","id":"oversize","method":"ping","params":{"pad":"'
        server.send_line(head + "x" * max(0, size - len(head) - 3) + '"}}')
        return {"oversize": size}, server.collect_quiet(quiet / 1000), None
    if "notify" in step:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": step["notify"]["method"]}
        if "params" in step["notify"]:
            msg["params"] = step["notify"]["params"]
        msg = with_envelope(msg, era, step.get("envelope", True))
        server.send(msg)
        return msg, server.collect_quiet(quiet / 1000), None
    if "handshake" in step:
        req = handshake_request(era, next(ids))
    else:
        req = build_request(step["send"], era, step.get("envelope", True), ids)
    server.send(substitute(req, spec.fixture_roots[0]))
    try:
        frame = server.wait_for_id(req["id"], spec.request_timeout)
    except TimeoutError:
        return (
            req,
            [],
            f"the server sent no reply to id {req['id']!r} within "
            + (f"{spec.request_timeout:g}s"),
        )
    except EOFError:
        return req, [], f"the server closed stdout without replying to id {req['id']!r}"
    if (
        "handshake" in step
        and era != MODERN
        and isinstance(frame.parsed, dict)
        and "result" in frame.parsed
    ):
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return req, [frame], None


def _check(
    step: dict[str, Any],
    n: int,
    label: str,
    request: Any,
    responses: list[Any],
    golden_step: dict[str, Any] | None,
    golden: dict[str, Any] | None,
    recording: bool,
    out: Outcome,
) -> None:
    exp = step["expect"]
    if exp.get("golden") and not recording:
        if golden is None:
            out.failures.append(
                Failure(
                    n,
                    label,
                    "no golden recorded for this case and era (run `qmd-conformance record`)",
                )
            )
        elif golden_step is None:
            out.failures.append(
                Failure(n, label, "golden has no exchange for this step; re-record")
            )
        else:
            if diff(golden_step["request"], request):
                out.failures.append(
                    Failure(
                        n,
                        label,
                        "golden is out of date: the case sends a different request now; re-record",
                    )
                )
            expected = golden_step["responses"]
            if len(expected) != len(responses):
                out.failures.append(
                    Failure(
                        n,
                        label,
                        "",
                        Difference(
                            "$",
                            expected[0] if expected else "<no reply>",
                            responses[0] if responses else "<no reply>",
                            f"expected {len(expected)} message(s), got {len(responses)}",
                        ),
                    )
                )
            else:
                for exp_msg, got_msg in zip(expected, responses, strict=True):
                    tolerant = tolerances(got_msg, step.get("tolerance", []))
                    for d in diff(exp_msg, got_msg, tolerant=tolerant):
                        out.failures.append(Failure(n, label, "", d))
    for matcher in exp.get("match", []):
        target = responses[0] if responses else MISSING
        if target is MISSING:
            out.failures.append(
                Failure(
                    n,
                    label,
                    "",
                    Difference(
                        matcher["path"],
                        {k: v for k, v in matcher.items() if k != "path"},
                        "<no reply>",
                        "no reply to match against",
                    ),
                )
            )
            continue
        for d in check_matcher(target, matcher):
            out.failures.append(Failure(n, label, "", d))
    if exp.get("noResult"):
        for got in responses:
            if not (isinstance(got, dict) and "error" in got and "result" not in got):
                out.failures.append(
                    Failure(
                        n,
                        label,
                        "",
                        Difference(
                            "$", "<no reply, or an error>", got, "the input must not be served"
                        ),
                    )
                )
    if "noReplyWithinMs" in exp and responses:
        out.failures.append(
            Failure(
                n,
                label,
                "",
                Difference(
                    "$",
                    "<no reply>",
                    responses[0],
                    f"expected no reply within {exp['noReplyWithinMs']} ms",
                ),
            )
        )


# -- HTTP ------------------------------------------------------------------------------------


def execute_http(
    case: Case,
    era: str,
    target: HttpTarget,
    spec: ServerSpec,
    golden: dict[str, Any] | None,
    recording: bool,
) -> Outcome:
    """Run an HTTP case's steps against a server that is already listening."""
    out = Outcome(case, era)
    started = time.monotonic()
    golden_steps = {ex["step"]: ex for ex in (golden or {}).get("exchanges", [])}
    for n, step in enumerate(case.steps):
        label = step.get("label", "")
        request = substitute(step["http"], spec.fixture_roots[0])
        quiet_ms = step["expect"].get("noReplyWithinMs")
        # A request the server must hold open (subscriptions/listen): no response may start
        # within the time; giving up closes the connection, as a client that leaves.
        wait = target if quiet_ms is None else HttpTarget(target.base_url, quiet_ms / 1000)
        try:
            status, headers, body = wait.exchange(
                request.get("method", "POST"),
                request["path"],
                request.get("headers", {}),
                request_body(request),
            )
        except TimeoutError as exc:
            if quiet_ms is None:
                out.failures.append(
                    Failure(n, label, f"the server sent no HTTP response within "
                            f"{target.timeout:g}s: {exc!r}")
                )  # fmt: skip
            else:
                out.exchanges.append(
                    {"step": n, "label": label, "request": request, "responses": []}
                )
                _check(step, n, label, request, [], golden_steps.get(n), golden, recording, out)
            continue
        except OSError as exc:
            out.failures.append(
                Failure(n, label, f"the server gave no complete HTTP response: {exc!r}")
            )
            continue
        described = describe(status, headers, body)
        sent = request.get("json") if isinstance(request.get("json"), dict) else None
        for path, message in messages_of(described):
            rules = builtin_rules(era, sent, message)
            fixed, issues = normalize(message, rules, spec.fixture_roots)
            out.failures += [_normalisation_failure(n, label, issue) for issue in issues]
            _set_path(described, path, fixed)
        rules = [Rule(r["path"], r["kind"], r.get("why", "")) for r in step.get("normalize", [])]
        described, issues = normalize(described, rules, spec.fixture_roots)
        out.failures += [_normalisation_failure(n, label, issue) for issue in issues]
        out.exchanges.append(
            {"step": n, "label": label, "request": request, "responses": [described]}
        )
        _check(step, n, label, request, [described], golden_steps.get(n), golden, recording, out)
    out.seconds = time.monotonic() - started
    _blame_case(out)
    return out


def _set_path(root: Any, path: list[str | int], value: Any) -> None:
    node = root
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value

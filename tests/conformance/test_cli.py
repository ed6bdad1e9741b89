"""The command line end to end against a tiny real stdio server (no QMD needed)."""

from __future__ import annotations

import json
import shlex
import sys
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.helpers import HERE, run_cli

MINI = [sys.executable, str(HERE / "mini_server.py")]


def _case(
    cid: str,
    steps: list[dict[str, Any]],
    eras: tuple[str, ...] = ("2025",),
    fixture: str = "default",
) -> dict[str, Any]:
    return {
        "id": cid,
        "title": cid,
        "requirements": ["REQ-SPEC-RPC-003"],
        "surfaces": ["spec"],
        "fixture": fixture,
        "eras": list(eras),
        "transports": ["stdio"],
        "steps": steps,
    }


def _cases_dir(tmp_path: Path) -> Path:
    d = tmp_path / "cases"
    d.mkdir()
    cases = [
        _case(
            "mini.tools",
            [
                {
                    "send": {"method": "tools/list"},
                    "expect": {"match": [{"path": "$.result.tools[0].name", "equals": "echo"}]},
                }
            ],
        ),
        _case(
            "mini.unknown",
            [
                {
                    "send": {"method": "foo/bar"},
                    "expect": {"match": [{"path": "$.error.code", "equals": -32601}]},
                }
            ],
        ),
        _case(
            "mini.silence",
            [
                {"notify": {"method": "notifications/x"}, "expect": {"noReplyWithinMs": 200}},
                {
                    "raw": "not json",
                    "expect": {
                        "quietMs": 500,
                        "match": [
                            {"path": "$.error.code", "equals": -32700},
                            {"path": "$.id", "equals": None},
                        ],
                    },
                },
                {
                    "send": {"method": "ping", "id": "s"},
                    "expect": {
                        "match": [
                            {"path": "$.id", "equals": "s"},
                            {"path": "$.result", "equals": {}},
                        ]
                    },
                },
            ],
        ),
    ]
    for c in cases:
        (d / f"{c['id']}.json").write_text(json.dumps(c))
    return d


def _run(tmp_path: Path, *extra: str, wrong: bool = False) -> Any:
    server = shlex.join([*MINI, "--wrong"] if wrong else MINI)
    return run_cli(
        "run",
        "--server-cmd",
        server,
        "--surface",
        "spec",
        "--cases-dir",
        str(_cases_dir(tmp_path)),
        *extra,
        timeout=120,
    )


def test_conformant_server_exits_0_with_summary_and_reports(tmp_path: Path) -> None:
    proc = _run(
        tmp_path,
        "--report-json",
        str(tmp_path / "r.json"),
        "--report-junit",
        str(tmp_path / "r.xml"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.rstrip().splitlines()
    assert lines[0].startswith("Running 3 cases (3 case/era runs) covering 1 requirement IDs")
    assert lines[-1] == "3 passed, 0 failed, 0 skipped"
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["summary"] == {"passed": 3, "failed": 0, "skipped": 0}
    assert data["requirements"] == ["REQ-SPEC-RPC-003"]
    suite = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "3" and suite.get("failures") == "0"


def test_a_wrong_answer_exits_1_naming_case_era_and_path(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--report-junit", str(tmp_path / "r.xml"), wrong=True)
    assert proc.returncode == 1
    assert "FAIL  mini.tools [2025]" in proc.stdout
    assert "case mini.tools, era 2025" in proc.stdout
    assert "$.result.tools[0].name" in proc.stdout
    assert 'expected "echo"' in proc.stdout and 'got      "ekho"' in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1] == "2 passed, 1 failed, 0 skipped"
    failure = ET.parse(tmp_path / "r.xml").getroot().find(".//testcase[@name='mini.tools']/failure")
    assert failure is not None and "$.result.tools[0].name" in (failure.text or "")


def test_baseline_turns_a_known_failure_into_an_expected_one(tmp_path: Path) -> None:
    base = tmp_path / "b.yaml"
    base.write_text("expected_failures:\n  - {case: mini.tools, era: all, reason: seeded}\n")
    proc = _run(tmp_path, "--baseline", str(base), wrong=True)
    assert proc.returncode == 0, proc.stdout
    assert "XFAIL mini.tools [2025]" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1] == "2 passed, 0 failed, 1 skipped"


def test_stale_baseline_entry_fails_the_run(tmp_path: Path) -> None:
    base = tmp_path / "b.yaml"
    base.write_text("expected_failures:\n  - {case: mini.tools, era: '2025', reason: old}\n")
    proc = _run(tmp_path, "--baseline", str(base))
    assert proc.returncode == 1
    assert "STALE mini.tools [2025]" in proc.stdout and "remove it" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1] == "2 passed, 1 failed, 0 skipped"


def test_cases_run_only_against_a_profile_that_builds_their_fixture(tmp_path: Path) -> None:
    cases = _cases_dir(tmp_path)
    ping = [{"send": {"method": "ping"}, "expect": {"match": [{"path": "$.result", "equals": {}}]}}]
    (cases / "mini.vectors.json").write_text(
        json.dumps(_case("mini.vectors", ping, fixture="embedded"))
    )
    common = ["--server-cmd", shlex.join(MINI), "--surface", "spec", "--cases-dir", str(cases)]
    default = run_cli("run", *common, timeout=120)
    assert default.returncode == 0, default.stdout + default.stderr
    assert "mini.vectors" not in default.stdout and "Running 3 cases" in default.stdout
    embedded = run_cli("run", *common, "--fixture", "embedded", "--setup-cmd", "true", timeout=120)
    assert embedded.returncode == 0, embedded.stdout + embedded.stderr
    assert "PASS  mini.vectors [2025]" in embedded.stdout and "Running 1 cases" in embedded.stdout


def test_an_embedded_profile_without_an_embed_step_is_rejected(tmp_path: Path) -> None:
    shipped = json.loads(
        (HERE.parent.parent / "conformance/profiles/ours-spec-models.json").read_text()
    )
    del shipped["setup"]["embed"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(shipped))
    proc = run_cli("run", "--profile", str(bad), timeout=60)
    assert proc.returncode == 4
    assert "setup.embed" in proc.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run_cli("run", timeout=60).returncode == 2
    assert run_cli("run", "--impl", "nosuch", timeout=60).returncode == 2
    both = run_cli("run", "--impl", "ours-spec", "--server-cmd", "x", timeout=60)
    assert both.returncode == 2
    assert run_cli("run", "--impl", "ours-spec", "--setup-cmd", "x", timeout=60).returncode == 2


def test_server_that_cannot_start_exits_3(tmp_path: Path) -> None:
    proc = run_cli(
        "run",
        "--server-cmd",
        str(tmp_path / "no-such-server"),
        "--surface",
        "spec",
        "--cases-dir",
        str(_cases_dir(tmp_path)),
        timeout=60,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "could not start" in proc.stderr


def test_failing_setup_exits_3(tmp_path: Path) -> None:
    proc = run_cli(
        "run",
        "--server-cmd",
        shlex.join(MINI),
        "--setup-cmd",
        "exit 7",
        "--surface",
        "spec",
        "--cases-dir",
        str(_cases_dir(tmp_path)),
        timeout=60,
    )
    assert proc.returncode == 3
    assert "setup" in proc.stderr


def test_a_failing_setup_step_is_named_and_the_cases_still_run(tmp_path: Path) -> None:
    marker = tmp_path / "first-step-ran"
    report = tmp_path / "report.json"
    proc = run_cli(
        "run",
        "--server-cmd",
        shlex.join(MINI),
        "--setup-cmd",
        f"touch {shlex.quote(str(marker))}",
        "--setup-cmd",
        "echo 'no global context here' >&2; exit 5",
        "--surface",
        "spec",
        "--cases-dir",
        str(_cases_dir(tmp_path)),
        "--report-json",
        str(report),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert marker.exists()
    assert "SETUP FAILED setup step 2/2 (shell) failed:" in proc.stdout
    assert "exited 5: no global context here" in proc.stdout
    assert "PASS  mini.tools" in proc.stdout
    data = json.loads(report.read_text())
    assert data["setup_failures"][0]["step"] == 2 and data["setup_failures"][0]["kind"] == "shell"
    assert data["setup_failures"][0]["reason"] == "exited 5: no global context here"


def test_invalid_case_data_exits_4(tmp_path: Path) -> None:
    d = tmp_path / "cases"
    d.mkdir()
    (d / "bad.json").write_text(json.dumps({"id": "bad", "title": "no steps"}))
    proc = run_cli("run", "--server-cmd", shlex.join(MINI), "--cases-dir", str(d), timeout=60)
    assert proc.returncode == 4
    assert "invalid case data" in proc.stderr


def test_help_explains_the_one_command_run() -> None:
    proc = run_cli("run", "--help", timeout=60)
    assert proc.returncode == 0
    assert "--server-cmd" in proc.stdout and "--setup-cmd" in proc.stdout
    assert "exit codes" in proc.stdout


def test_validate_and_list() -> None:
    proc = run_cli("validate", timeout=120)
    assert proc.returncode == 0, proc.stderr
    listed = run_cli("list", timeout=120)
    assert listed.returncode == 0
    assert "requirement IDs covered" in listed.stdout


def test_a_2025_only_server_gets_its_2025_cases_and_the_first_line_says_so(
    tmp_path: Path,
) -> None:
    # mini_server answers `initialize` but not `server/discover`: a 2025-era-only port.
    d = tmp_path / "cases"
    d.mkdir()
    case = _case(
        "mini.both-eras",
        [
            {
                "send": {"method": "tools/list"},
                "expect": {"match": [{"path": "$.result.tools[0].name", "equals": "echo"}]},
            }
        ],
        eras=("2025", "2026-07-28"),
    )
    (d / "mini.both-eras.json").write_text(json.dumps(case))
    common = ["run", "--server-cmd", shlex.join(MINI), "--surface", "spec", "--cases-dir", str(d)]
    proc = run_cli(*common, "--report-json", str(tmp_path / "r.json"), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "era 2025 only: the 2026-07-28 handshake failed" in first, first
    assert "-32601" in first  # what the server sent instead
    assert "(1 case/era runs)" in first
    assert proc.stdout.rstrip().splitlines()[-1] == "1 passed, 0 failed, 0 skipped"
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["eras"] == ["2025"] and report["era_fallback"].startswith("era 2025 only")
    # --era still forces an era: the modern handshake failing then stops the run.
    forced = run_cli(*common, "--era", "2026-07-28", timeout=120)
    assert forced.returncode == 3
    assert "2026-07-28 handshake" in forced.stderr


def test_failures_are_grouped_by_root_cause_and_summary_gives_one_line_per_area(
    tmp_path: Path,
) -> None:
    d = tmp_path / "cases"
    d.mkdir()
    step = {
        "send": {"method": "tools/list"},
        "expect": {"match": [{"path": "$.result.tools[0].name", "equals": "echo"}]},
    }
    for n in range(3):  # one defect (--wrong names the tool "ekho") fails all three
        case = _case(f"mini.tools-{n}", [step])
        if n:
            case["requirements"] = ["REQ-SPEC-RPC-003", "REQ-SPEC-TOOLS-001"]
        (d / f"mini.tools-{n}.json").write_text(json.dumps(case))
    ping_step = {
        "send": {"method": "ping"},
        "expect": {"match": [{"path": "$.result", "equals": {}}]},
    }
    ping = _case("mini.ping", [ping_step])
    ping["requirements"] = ["REQ-WIRE-ENCODE-001"]
    (d / "mini.ping.json").write_text(json.dumps(ping))
    server = shlex.join([*MINI, "--wrong"])
    common = ["run", "--server-cmd", server, "--surface", "spec", "--cases-dir", str(d)]
    proc = run_cli(*common, "--report-json", str(tmp_path / "r.json"), timeout=120)
    assert proc.returncode == 1
    assert "Failures by root cause (1; same JSON path, same kind):" in proc.stdout
    assert "   3 run(s)  $.result.tools[*].name: strings differ  (mini.tools-0 [2025]" in (
        proc.stdout
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert [(c["path"], c["kind"], c["runs"]) for c in report["root_causes"]] == [
        ("$.result.tools[*].name", "strings differ", 3)
    ]
    summary = run_cli(*common, "--summary", timeout=120)
    lines = summary.stdout.splitlines()
    assert not any(line.startswith(("PASS  mini.", "FAIL  mini.")) for line in lines)
    areas = [line for line in lines if line.startswith(("PASS ", "FAIL "))]
    assert len(areas) == len({line.split(":")[0] for line in areas}) >= 2
    assert any(line.startswith("PASS ") and "1/1 requirements, 1/1 runs" in line for line in areas)
    assert any(line.startswith("FAIL ") and "0/" in line for line in areas)
    assert lines[-1] == "1 passed, 3 failed, 0 skipped"


class _Http2025Only(BaseHTTPRequestHandler):
    """A 2025-era-only Streamable HTTP server: `server/discover` is a -32601 error."""

    def log_message(self, *args: Any) -> None:  # keep the test output clean
        pass

    def do_GET(self) -> None:
        self._send(200, "application/json", b'{"status":"ok"}')

    def do_POST(self) -> None:
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if msg["method"] == "server/discover" and self.server.speaks_2026:  # type: ignore[attr-defined]
            found = {"jsonrpc": "2.0", "id": msg["id"], "result": {"supportedVersions": []}}
            self._send(200, "application/json", json.dumps(found).encode())
            return
        if msg["method"] == "server/discover":
            err = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "nope"}}
            self._send(404, "application/json", json.dumps(err).encode())
            return
        reply = {"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": [{"name": "echo"}]}}
        self._send(
            200, "text/event-stream", f"event: message\ndata: {json.dumps(reply)}\n\n".encode()
        )

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("speaks_2026", [False, True])
def test_over_http_a_2025_only_server_gets_its_2025_cases_too(
    tmp_path: Path, speaks_2026: bool
) -> None:
    d = tmp_path / "cases"
    d.mkdir()
    for era, headers in (
        ("2025", {}),
        ("2026-07-28", {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}),
    ):
        case = _case(f"mini.http-{era}", [{
            "http": {"method": "POST", "path": "/mcp",
                     "headers": {"Content-Type": "application/json", **headers},
                     "json": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}},
            "expect": {"match": [{"path": "$.body.sse[0].result.tools[0].name",
                                  "equals": "echo"}]}}], eras=(era,))  # fmt: skip
        case["transports"], case["handshake"] = ["http"], False
        (d / f"{case['id']}.json").write_text(json.dumps(case))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Http2025Only)
    server.speaks_2026 = speaks_2026  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        proc = run_cli("run", "--server-cmd", "unused", "--surface", "spec", "--transport",
                       "http", "--url", url, "--cases-dir", str(d), timeout=120)  # fmt: skip
    finally:
        server.shutdown()
    first = proc.stdout.splitlines()[0]
    if speaks_2026:  # the probe finds the era: both cases run (the 2026 one fails: no SSE)
        assert "; eras 2025, 2026-07-28" in first and "(2 case/era runs)" in first
        return
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "era 2025 only: the 2026-07-28 handshake failed (POST /mcp server/discover " in first
    assert "HTTP 404" in first and "(1 case/era runs)" in first
    assert proc.stdout.rstrip().splitlines()[-1] == "1 passed, 0 failed, 0 skipped"

"""The worker process bounds every parse (REQ-EXTRACT-006): a parser that hangs is stopped at
the time limit, one that crashes (a segfault) costs only its own file, and the next file gets a
fresh worker. The stand-in workers below are real processes speaking the worker's protocol."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from adapters.extract.extractor import WorkerExtractor
from domain.extraction import CRASHED, TIMEOUT, Extracted, ExtractionFailure
from tooling.docgen import write_pdf

STAND_IN = r"""
import json, os, signal, sys, time
for line in sys.stdin:
    path = json.loads(line)["path"]
    if "hang" in path:
        time.sleep(600)
    if "crash" in path:
        os.kill(os.getpid(), signal.SIGSEGV)
    print(json.dumps({"ok": True, "text": "fine " + os.path.basename(path)}), flush=True)
"""


def test_a_hanging_parser_is_stopped_and_a_crashing_one_is_contained() -> None:
    extractor = WorkerExtractor(timeout_s=1.0, command=[sys.executable, "-c", STAND_IN])
    try:
        first = extractor.extract("/x/one.pdf", "pdf")
        assert isinstance(first, Extracted) and first.text == "fine one.pdf"
        started = time.monotonic()
        hung = extractor.extract("/x/hang.pdf", "pdf")
        assert isinstance(hung, ExtractionFailure) and hung.reason == TIMEOUT
        assert time.monotonic() - started < 10
        crashed = extractor.extract("/x/crash.pdf", "pdf")
        assert isinstance(crashed, ExtractionFailure) and crashed.reason == CRASHED
        assert "signal 11" in crashed.detail
        after = extractor.extract("/x/two.pdf", "pdf")
        assert isinstance(after, Extracted) and after.text == "fine two.pdf"
        assert extractor.started == 3  # one worker replaced after the hang, one after the crash
    finally:
        extractor.close()


def test_the_real_worker_extracts_and_stays_up_between_files(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "a.pdf", [["alpha page"], ["beta page"]])
    bad = tmp_path / "b.pdf"
    bad.write_bytes(b"%PDF-1.4 nothing else")
    extractor = WorkerExtractor(timeout_s=60)
    try:
        good = extractor.extract(str(pdf), "pdf")
        assert isinstance(good, Extracted)
        assert good.text == "## Page 1\n\nalpha page\n\n## Page 2\n\nbeta page\n"
        assert good.pages == 2 and good.metadata["pages"] == 2
        failed = extractor.extract(str(bad), "pdf")
        assert isinstance(failed, ExtractionFailure) and failed.reason == "corrupt"
        unknown = extractor.extract(str(pdf), "odt")
        assert isinstance(unknown, ExtractionFailure) and unknown.reason == "unsupported"
        assert extractor.started == 1
    finally:
        extractor.close()


def test_digest_refuses_files_over_the_size_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.pdf"
    big.write_bytes(b"x" * 2048)
    outcome = WorkerExtractor(max_bytes=1024).digest(str(big))
    assert isinstance(outcome, ExtractionFailure) and outcome.reason == "too-large"
    assert "2,048 bytes" in outcome.detail


def test_a_worker_that_cannot_start_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    extractor = WorkerExtractor(command=[str(tmp_path / "no-such-python")])
    outcome = extractor.extract(str(tmp_path / "a.pdf"), "pdf")
    assert isinstance(outcome, ExtractionFailure) and outcome.reason == CRASHED
    assert "could not start" in outcome.detail

"""Extraction throughput: pages/s on a generated 200-page PDF, files/s on DOCX and HTML, for the
chosen library and its runner-up side by side (ADR 0035), plus the worker process's overhead
(what `qmd update` really pays per file).

    .venv/bin/python -m benchmarks.bench_extract                 # 200 pages, 40 DOCX, 40 HTML
    .venv/bin/python -m benchmarks.bench_extract --pages 20 --files 5 --runs 1   # smoke size

Runner-ups that are not installed (they are not dependencies: `pip install pypdf mammoth
html2text`) are reported as such. Every library runs in this process, on the same files, best
of `--runs`; a check that each found the words it should guards against a fast wrong answer.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.extract.extractor import WorkerExtractor
from adapters.extract.formats import extract_docx, extract_html, extract_pdf
from domain.extraction import Extracted
from tooling.docgen import HTML, long_pdf, write_docx


def _have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _best(runs: int, work: Callable[[], str]) -> tuple[float, str]:
    best, text = float("inf"), ""
    for _ in range(runs):
        started = time.perf_counter()
        text = work()
        best = min(best, time.perf_counter() - started)
    return best, text


def _ours(result: object) -> str:
    assert isinstance(result, Extracted), result
    return result.text


def pdf_candidates(path: Path) -> dict[str, Callable[[], str]]:
    out: dict[str, Callable[[], str]] = {
        "pypdfium2 (chosen)": lambda: _ours(extract_pdf(str(path)))
    }
    if _have("pypdf"):

        def pypdf_text() -> str:
            import pypdf

            reader = pypdf.PdfReader(str(path))
            return "\n\n".join(
                f"## Page {n}\n\n{page.extract_text()}" for n, page in enumerate(reader.pages, 1)
            )

        out["pypdf (runner-up)"] = pypdf_text
    if _have("pdfminer"):

        def pdfminer_text() -> str:
            from pdfminer.high_level import extract_text

            return str(extract_text(str(path)))

        out["pdfminer.six"] = pdfminer_text
    return out


def docx_candidates(paths: list[Path]) -> dict[str, Callable[[], str]]:
    out: dict[str, Callable[[], str]] = {
        "python-docx (chosen)": lambda: "".join(_ours(extract_docx(str(p))) for p in paths)
    }
    if _have("mammoth") and _have("markdownify"):

        def mammoth_text() -> str:
            import mammoth
            from markdownify import markdownify

            texts = []
            for p in paths:
                with open(p, "rb") as handle:
                    html = mammoth.convert_to_html(handle).value
                texts.append(markdownify(html, heading_style="ATX"))
            return "".join(texts)

        out["mammoth + markdownify (runner-up)"] = mammoth_text
    return out


def html_candidates(paths: list[Path]) -> dict[str, Callable[[], str]]:
    out: dict[str, Callable[[], str]] = {
        "bs4 + markdownify (chosen)": lambda: "".join(_ours(extract_html(str(p))) for p in paths)
    }
    if _have("html2text"):

        def html2text_text() -> str:
            import html2text

            return "".join(html2text.html2text(p.read_text(encoding="utf-8")) for p in paths)

        out["html2text (runner-up, GPL-3.0)"] = html2text_text
    if _have("trafilatura"):

        def trafilatura_text() -> str:
            import trafilatura

            texts = [
                trafilatura.extract(p.read_text(encoding="utf-8"), output_format="markdown") or ""
                for p in paths
            ]
            return "".join(texts)

        out["trafilatura"] = trafilatura_text
    return out


def _report(
    title: str, unit: str, count: int, runs: int, candidates: dict[str, Callable[[], str]],
    must: list[str], must_not: list[str],
) -> dict[str, Any]:  # fmt: skip
    print(f"\n{title}")
    figures: dict[str, Any] = {}
    for name, work in candidates.items():
        seconds, text = _best(runs, work)
        found = all(word in text for word in must) and not any(w in text for w in must_not)
        headings = len(re.findall(r"^#{1,6} ", text, flags=re.MULTILINE))
        rate = count / seconds if seconds > 0 else float("inf")
        figures[name] = {"seconds": seconds, f"{unit}_per_s": rate, "headings": headings,
                         "words_ok": found}  # fmt: skip
        print(
            f"  {name:38s} {rate:10.1f} {unit}/s  ({seconds * 1000:8.1f} ms, "
            f"{headings} headings, expected words {'found' if found else 'MISSING'})"
        )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--files", type=int, default=40, help="DOCX and HTML files each")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-extract-") as scratch:
        root = Path(scratch)
        pdf = long_pdf(root / "long.pdf", args.pages)
        line = "Paragraph {j} of handbook {i}: calibrate the valve."
        docs = [
            write_docx(
                root / f"d{i}.docx",
                f"Handbook {i}",
                [(f"Part {j}", [line.format(i=i, j=j)] * 8) for j in range(12)],
            )
            for i in range(args.files)
        ]
        pages = [root / f"h{i}.html" for i in range(args.files)]
        for i, path in enumerate(pages):
            path.write_text(HTML.replace("Moorings", f"Moorings {i}"), encoding="utf-8")
        print(f"Extraction benchmark: {args.pages}-page PDF ({pdf.stat().st_size:,} bytes), "
              f"{args.files} DOCX, {args.files} HTML; best of {args.runs}")  # fmt: skip
        results["pdf"] = _report(
            f"PDF, {args.pages} pages", "pages", args.pages, args.runs, pdf_candidates(pdf),
            [f"Section {args.pages}:", "litres per minute"], [],
        )  # fmt: skip
        results["docx"] = _report(
            f"DOCX, {args.files} files", "files", args.files, args.runs, docx_candidates(docs),
            ["calibrate the valve", f"Handbook {args.files - 1}"], [],
        )  # fmt: skip
        results["html"] = _report(
            f"HTML, {args.files} files", "files", args.files, args.runs, html_candidates(pages),
            ["lighthouse", "Berth two"], ["scriptword", "color: red"],
        )  # fmt: skip
        # What `qmd update` pays: the same parsers behind the worker process's pipe.
        worker = WorkerExtractor()
        try:
            worker.extract(str(docs[0]), "docx")  # start the worker, import the parsers
            seconds, _ = _best(args.runs, lambda: _ours(worker.extract(str(pdf), "pdf")))
            per_file, _ = _best(
                args.runs, lambda: "".join(_ours(worker.extract(str(p), "docx")) for p in docs)
            )
        finally:
            worker.close()
        results["worker"] = {
            "pdf_pages_per_s": args.pages / seconds,
            "docx_files_per_s": args.files / per_file,
        }
        print("\nThrough the worker process (as in qmd update)")
        print(f"  pypdfium2 in the worker               {args.pages / seconds:10.1f} pages/s")
        print(f"  python-docx in the worker             {args.files / per_file:10.1f} files/s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

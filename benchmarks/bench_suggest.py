"""How long does a mistyped `get` take to answer "did you mean", at 10,000 documents?

    .venv/bin/python -m benchmarks.bench_suggest                 # 10,000 documents
    .venv/bin/python -m benchmarks.bench_suggest --docs 500      # smoke size
    .venv/bin/python -m benchmarks.bench_suggest --side-by-side --sizes 5000,50000

`--side-by-side` (needs the original, see benchmarks/README.md) times the MCP `get` tool on
near-miss paths as users type them, on warm servers: ours (default surface and
`--compat 2.8.3`) and the original 2.8.3 over the same index, for two path shapes (the
documentation-like one below and the self-similar `area3/topic7/doc1234.md`, where almost
every path is close to every other). It checks that our compat answer is the original's, byte
for byte, prints the medians per shape and size and the ratio ours/original against the
target (at most 0.5).

A real SQLite index (in a temporary folder) gets `--docs` documents whose paths look like a
documentation tree (`area/topic/word-word.md`, words from the benchmark vocabulary), then
`Retrieval.find` (what `qmd get` and the MCP `get` tool call) is timed on misses, with this
project's suggestion rules (`own_suggestions`) unless said otherwise:

* `relative`: a collection-relative path with one or two letters changed;
* `qualified`: the same as `collection/path` and `qmd://collection/path` (search results' spelling);
* `far`: a path close to nothing (every candidate must be ruled out);
* `name`: the file name alone, mistyped, compared by name too (REQ-SPEC-GET-NAME-001: `qmd
  get` and the spec surface), with how often the file meant is suggested; `name/2.8.3`: the
  same misses by the original's whole-path rule (the compat surface).

It prints the median and p95 per kind, the first miss separately (what a one-off `qmd get` in a
fresh process pays: a scan, no index), and the time the unbounded full-matrix Levenshtein over
every path takes for the same misses, for comparison. The answers are the same
(tests/unit/test_suggest.py).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from adapters.sqlite.store import SqliteIndex
from benchmarks.corpus import AREAS, SUBTOPICS, TOPICS, build_vocabulary
from benchmarks.harness import BenchError, McpServer, machine, original, ours, text_of
from domain.errors import DocumentNotFoundError
from domain.suggest import levenshtein
from domain.usecases.retrieval import GET_SUGGESTION_DISTANCE, GET_SUGGESTION_LIMIT, Retrieval

T0 = "2026-01-01T00:00:00.000Z"


def paths_for(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = build_vocabulary(seed)[60:2000]
    seen: set[str] = set()
    while len(seen) < count:
        depth = rng.choice((1, 2, 2, 3))
        folders = [rng.choice(AREAS), rng.choice(TOPICS), rng.choice(SUBTOPICS)][:depth]
        name = "-".join(rng.sample(words, rng.choice((1, 2, 2, 3))))
        seen.add("/".join([*folders, f"{name}.md"]))
    return sorted(seen)


def typo(path: str, rng: random.Random) -> str:
    """One or two letters of the file name changed, dropped or doubled."""
    head, _, name = path.rpartition("/")
    stem = list(name[:-3])
    for _ in range(rng.choice((1, 2))):
        at = rng.randrange(len(stem))
        action = rng.choice(("swap", "drop", "double"))
        if action == "swap":
            stem[at] = rng.choice("abcdefghijklmnopqrstuvwxyz")
        elif action == "drop" and len(stem) > 2:
            del stem[at]
        else:
            stem.insert(at, stem[at])
    return f"{head}/{''.join(stem)}.md" if head else f"{''.join(stem)}.md"


def numbered_paths(count: int) -> list[str]:
    """`area3/topic7/doc1234.md`: the shape of the mistyped path in issue 26."""
    return [f"area{i % 10}/topic{(i // 10) % 10}/doc{i}.md" for i in range(count)]


def near_misses(path: str, rng: random.Random) -> list[str]:
    """What a person types for `path`: a letter added to the name (`doc0x.md`), two letters
    swapped, a folder letter dropped, a letter doubled, the extension left off, a wrong
    digit or letter in a folder."""
    head, _, name = path.rpartition("/")
    stem = name[:-3]
    folders = head.split("/") if head else []
    out = [f"{head}/{stem}x.md" if head else f"{stem}x.md"]
    if len(stem) > 2:
        at = rng.randrange(len(stem) - 1)
        swapped = stem[:at] + stem[at + 1] + stem[at] + stem[at + 2 :]
        out.append(f"{head}/{swapped}.md" if head else f"{swapped}.md")
    out.append(path[:-3])
    if folders:
        folder = folders[0]
        at = rng.randrange(len(folder))
        folders_dropped = [folder[:at] + folder[at + 1 :], *folders[1:]]
        out.append("/".join([*folders_dropped, name]))
        folders_doubled = [folder[:at] + folder[at] + folder[at:], *folders[1:]]
        out.append("/".join([*folders_doubled, name]))
        last = folders[-1]
        changed = last[:-1] + ("1" if last[-1] != "1" else "2")
        out.append("/".join([*folders[:-1], changed, name]))
    return out


def time_miss(retrieval: Retrieval, reference: str, own: bool = True) -> tuple[float, list[str]]:
    started = time.perf_counter()
    try:
        retrieval.find(reference, own_suggestions=own)
    except DocumentNotFoundError as missed:
        return (time.perf_counter() - started) * 1000, missed.suggestions
    raise SystemExit(f"{reference!r} was found; the benchmark needs misses")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--misses", type=int, default=40, help="misses timed per kind")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--side-by-side", action="store_true", help="MCP get, ours vs original")
    parser.add_argument("--sizes", default="5000,50000", help="with --side-by-side")
    parser.add_argument("--rounds", type=int, default=5, help="with --side-by-side")
    options = parser.parse_args(argv)
    if options.side_by_side:
        try:
            side_by_side([int(n) for n in options.sizes.split(",")], options.rounds, options.seed)
        except BenchError as error:
            print(f"error: {error}")
            return 2
        return 0
    rng = random.Random(options.seed)
    paths = paths_for(options.docs, options.seed)
    with tempfile.TemporaryDirectory() as folder:
        index = SqliteIndex.open(Path(folder) / "index.sqlite", {})
        for number, path in enumerate(paths):
            body = f"# Document {number}\n\nbody {number}\n"
            index.upsert_document(
                "docs", path, f"Document {number}", f"{number:064x}", body, T0, T0
            )
        retrieval = Retrieval(index)
        samples = rng.sample(paths, options.misses)
        relative = [typo(p, rng) for p in samples]
        relative = [r for r in relative if r not in set(paths)]
        kinds = {
            "relative": relative,
            "qualified": [
                f"qmd://docs/{r}" if i % 2 else f"docs/{r}" for i, r in enumerate(relative)
            ],
            "far": [f"zz/qq/{'xy' * (6 + i % 5)}.md" for i in range(options.misses)],
        }
        # a mistyped file name without its folders, as `qmd get` and the spec surface take
        # it (REQ-SPEC-GET-NAME-001): does the file meant come back, and at what cost
        names = [(typo(p, rng).rsplit("/", 1)[-1], p) for p in samples]
        lowered = [q.lower() for q in paths]  # the suffix lookup would find these
        names = [(n, p) for n, p in names if not any(q.endswith(n.lower()) for q in lowered)]
        first_ms, _ = time_miss(retrieval, relative[0])
        print(f"suggestions for a missed get: {len(paths):,} documents, SQLite index")
        print(f"  first miss (a one-off `qmd get`: scan, no index): {first_ms:.1f} ms")
        first_ms, _ = time_miss(Retrieval(index), names[0][0])
        print(f"  first miss by file name (a one-off `qmd get`): {first_ms:.1f} ms")
        runs = [(kind, [(r, None) for r in refs], True) for kind, refs in kinds.items()]
        runs += [("name", names, True), ("name/2.8.3", names, False)]
        for kind, references, own in runs:
            timings, found, meant = [], 0, 0
            for reference, path in references:
                elapsed, suggestions = time_miss(retrieval, reference, own)
                timings.append(elapsed)
                found += bool(suggestions)
                meant += path in suggestions
            p95 = statistics.quantiles(timings, n=20)[-1]
            hits = f", the file meant in {meant}" if kind.startswith("name") else ""
            print(
                f"  {kind:<10} median {statistics.median(timings):6.1f} ms   p95 {p95:6.1f} ms"
                f"   ({found}/{len(references)} with suggestions{hits})"
            )
        started = time.perf_counter()
        for reference in relative[:5]:
            scored = [(levenshtein(p.lower(), reference.lower()), p) for p in paths]
            kept = sorted(
                (s for s in scored if s[0] <= GET_SUGGESTION_DISTANCE), key=lambda s: s[0]
            )
            kept[:GET_SUGGESTION_LIMIT]
        full = (time.perf_counter() - started) * 1000 / 5
        print(f"  for comparison, the full-matrix distance to every path: {full:6.0f} ms per miss")
        index.close()
    return 0


def _build_index(folder: Path, paths: list[str]) -> Path:
    index_path = folder / "index.sqlite"
    index = SqliteIndex.open(index_path, {})
    with index.transaction():
        for number, path in enumerate(paths):
            body = f"# Document {number}\n\nbody {number}\n"
            index.upsert_document(
                "docs", path, f"Document {number}", f"{number:064x}", body, T0, T0
            )
    index.close()
    return index_path


def _place(impl_home: Path, index_path: Path, docs_folder: Path, index_file: Path) -> None:
    from adapters.config.yaml_config import QmdConfig, save_config
    from domain.model import Collection

    index_file.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(index_path, index_file)
    config = QmdConfig(collections={"docs": Collection(name="docs", path=str(docs_folder))})
    save_config(str(impl_home / "config" / "index.yml"), config)


def side_by_side(sizes: list[int], rounds: int, seed: int) -> int:
    import tempfile as _tempfile

    print(f"did-you-mean over MCP `get`, warm servers; {machine()}")
    rng = random.Random(seed)
    verdicts: list[bool] = []
    for size in sizes:
        for shape, paths in (
            ("docs-like", paths_for(size, seed)),
            ("numbered", numbered_paths(size)),
        ):
            known = set(paths)
            picked = rng.sample(paths, 4)
            misses = [m for p in picked for m in near_misses(p, rng) if m not in known]
            with _tempfile.TemporaryDirectory(prefix="qmd-bench-suggest-") as tmp:
                work = Path(tmp)
                index_path = _build_index(work, paths)
                docs_folder = work / "docs"
                docs_folder.mkdir()
                impls = {"ours": ours(work / "ours"), "original": original(work / "original")}
                for impl in impls.values():
                    _place(impl.home, index_path, docs_folder, impl.index_path)
                servers = {
                    "ours": McpServer(impls["ours"]),
                    "ours-compat": McpServer(impls["ours"], "--compat", "2.8.3"),
                    "original": McpServer(impls["original"]),
                }
                timings: dict[str, list[float]] = {label: [] for label in servers}
                try:
                    for server in servers.values():
                        server.initialize()
                    for server in servers.values():  # warm: the first misses index
                        for miss in misses[:3]:
                            server.call("get", {"file": miss})
                    differ = 0
                    for _ in range(rounds):
                        for miss in misses:
                            texts: dict[str, str] = {}
                            for label, server in servers.items():
                                result, seconds = server.call("get", {"file": miss})
                                timings[label].append(seconds)
                                texts[label] = text_of(result)
                            differ += texts["ours-compat"] != texts["original"]
                finally:
                    for server in servers.values():
                        server.close()
            medians = {label: statistics.median(t) * 1000 for label, t in timings.items()}
            ratio = medians["ours"] / medians["original"]
            verdicts.append(ratio <= 0.5)
            print(
                f"  {size:>6,} docs, {shape:<9} ({len(misses)} near misses x {rounds}): median "
                f"ours {medians['ours']:6.1f} ms, ours --compat {medians['ours-compat']:6.1f} ms, "
                f"original {medians['original']:6.1f} ms; ours/original {ratio:.2f} "
                f"({'PASS' if ratio <= 0.5 else 'FAIL'}, target <= 0.5); compat answers "
                f"differing from the original's: {differ}"
            )
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())

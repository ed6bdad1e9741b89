"""The speed benchmark still runs end to end (ours only, tiny corpus), so it cannot rot unseen."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_bench(command: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a benchmark command from the project root; it must exit 0."""
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


def test_bench_speed_runs_for_ours(tmp_path: Path) -> None:
    figures = tmp_path / "speed.json"
    done = run_bench(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_speed",
            "--docs",
            "50",
            "--requests",
            "20",
            "--warmups",
            "2",
            "--ours-only",
            "--json",
            str(figures),
        ]
    )
    out = done.stdout
    assert "QMD speed benchmark: 50 docs" in out
    for label in (
        "index: collection add (wall)",
        "search median",
        "search p99",
        "query lex median",
        "get median",
        "status median",
        "indexing no slower than the original",
        "search median at most half the original's",
    ):
        assert label in out, f"missing {label!r} in:\n{out}"
    assert "documents indexed: ours 50," in out
    data = json.loads(figures.read_text(encoding="utf-8"))
    spec = data["ours"]["servers"]["spec"]
    assert spec["search"]["n"] == 20
    assert spec["search"]["median_ms"] > 0
    assert spec["hits_per_query"] > 0
    assert data["original"] is None


@pytest.mark.models
@pytest.mark.original
def test_bench_embed_compare_runs_both_implementations(tmp_path: Path) -> None:
    figures = tmp_path / "embed.json"
    done = run_bench(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_embed_compare",
            "--docs",
            "3",
            "--json",
            str(figures),
        ],
        timeout=600,
    )
    assert "| original |" in done.stdout and "| ours |" in done.stdout
    assert "ours / original throughput:" in done.stdout
    data = json.loads(figures.read_text(encoding="utf-8"))
    # same corpus, same model, same texts: both indexes hold the same chunks
    assert data["original"]["chunks"] == data["ours"]["chunks"] > 0
    assert data["ratio"] > 0


def test_bench_index_memory_runs(tmp_path: Path) -> None:
    figures = tmp_path / "hostile.json"
    done = run_bench(
        [
            *(sys.executable, "-m", "benchmarks.bench_index_memory"),
            *("--big-mb", "0.5", "--cjk", "200", "--json", str(figures)),
        ],
        timeout=600,
    )
    data = json.loads(figures.read_text())
    small, big = data["big_files"]
    assert small["indexed"] and not small["skipped"]
    assert big["skipped"] and not big["indexed"]
    assert data["cjk_queries"][0]["chars"] == 200
    assert "search of 200 CJK characters" in done.stdout


def test_bench_suggest_runs_and_prints_its_figures() -> None:
    done = run_bench(
        [sys.executable, "-m", "benchmarks.bench_suggest", "--docs", "300", "--misses", "6"]
    )
    assert "suggestions for a missed get: 300 documents" in done.stdout
    for kind in ("relative", "qualified", "far"):
        assert f"  {kind}" in done.stdout
    assert "(6/6 with suggestions)" in done.stdout  # every typo of a relative path is found


@pytest.mark.models  # embeds with the MiniLM GGUF
def test_bench_judged_runs_on_a_slice_and_prints_ndcg() -> None:
    done = run_bench(
        [sys.executable, "-m", "benchmarks.bench_judged", "--limit-docs", "40", "--questions", "4"],
        timeout=900,
    )
    assert "judged set: 4 questions" in done.stdout
    for label in ("search", "vsearch", "query"):
        assert f"  {label} " in done.stdout
    assert "nDCG@10" in done.stdout


@pytest.mark.models  # embeds with the MiniLM GGUF
def test_bench_quality_runs_a_model_set_on_a_slice(tmp_path: Path) -> None:
    figures = tmp_path / "quality.json"
    command = [sys.executable, "-m", "benchmarks.bench_quality", "--set", "tldr"]
    command += ["--limit-docs", "20", "--questions", "3", "--sample", "2", "--models"]
    command += ["stand-in", "--modes", "search,vsearch,query", "--workdir", str(tmp_path)]
    done = run_bench([*command, "--json", str(figures)], timeout=900)
    assert "sample: the first 2 questions (q01 .. q02)" in done.stdout
    for label in ("search", "vsearch", "query"):
        assert f"| {label} [stand-in] |" in done.stdout
    assert "query [stand-in] over 3:" in done.stdout
    data = json.loads(figures.read_text(encoding="utf-8"))
    assert len(data["results"]["vsearch [stand-in]"]["scores"]) == 3
    # a second sample of the same size, after the first question, on the kept index
    done = run_bench([*command[:-4], "--sample-start", "1", *command[-4:]], timeout=900)
    assert "sample: after the first 1, the next 2 questions (q02 .. q03)" in done.stdout
    # a second run reuses the kept index instead of embedding again
    again = run_bench([*command], timeout=300)
    assert "ours: qmd embed" not in again.stderr
    # a build killed mid-embed (no finished marker, two documents without vectors) resumes:
    # the same collection, only the two embedded, nothing added or embedded twice
    root = tmp_path / "tldr-20-minilm"
    (root / "embedded.json").unlink()
    with sqlite3.connect(root / "cache" / "qmd" / "index.sqlite") as db:
        hashes = [r[0] for r in db.execute("SELECT DISTINCT hash FROM content_vectors LIMIT 2")]
        db.executemany("DELETE FROM content_vectors WHERE hash = ?", [(h,) for h in hashes])
    resumed = run_bench([*command], timeout=600)
    assert "ours: qmd collection add" not in resumed.stderr
    assert "Embedding 2 document(s)" in resumed.stderr, resumed.stderr
    assert "index (minilm): 23 docs" in resumed.stdout
    assert json.loads((root / "indexed.json").read_text(encoding="utf-8"))["runs"] == 2
    assert "ours: qmd embed" not in run_bench([*command], timeout=300).stderr


def test_bench_http_runs_for_ours(tmp_path: Path) -> None:
    figures = tmp_path / "http.json"
    run_bench(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_http",
            "--docs",
            "50",
            "--requests",
            "200",
            "--levels",
            "1,4",
            "--ours-only",
            "--no-slow",
            "--json",
            str(figures),
        ]
    )
    data = json.loads(figures.read_text(encoding="utf-8"))
    for level in ("1", "4"):
        ours = data["levels"][level]["ours"]
        assert ours["requests"] == 200 and ours["errors"] == 0
        assert ours["throughput_rps"] > 0 and ours["p99_ms"] >= ours["p50_ms"] > 0
        assert set(ours["by_kind"]) == {"search", "get", "status", "rest"}
        assert ours["server_rss_mib"] > 0


def test_bench_filters_runs(tmp_path: Path) -> None:
    done = run_bench(
        [sys.executable, "-m", "benchmarks.bench_filters", "--docs", "140", "--repeats", "1"],
        timeout=120,
    )
    assert "sqlite: documents 140  (filter admits 11)" in done.stdout
    for label in ("scope", "search", "filtered search"):
        assert f"\n{label} " in done.stdout or done.stdout.startswith(label)


@pytest.mark.postgres
@pytest.mark.models  # bench_scale's vectors come from numpy, the `models` extra's
def test_bench_scale_runs_on_both_backends(tmp_path: Path) -> None:
    from tests.postgres_server import drop_schema, server_url

    report = tmp_path / "scale.json"
    done = run_bench(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_scale",
            "--docs",
            "200",
            "--vectors",
            "2000",
            "--queries",
            "10",
            "--vector-queries",
            "10",
            "--ef-search",
            "40,200",
            "--pg-url",
            server_url(),
            "--maintenance-work-mem",
            "64MB",
            "--workdir",
            str(tmp_path),
            "--json",
            str(report),
        ]
    )
    assert "200 documents, 2000 vectors x 384d" in done.stdout
    assert "postgres HNSW vs exact scan:" in done.stdout
    figures = json.loads(report.read_text(encoding="utf-8"))
    assert figures["sqlite"]["recall_at_10"] == 1.0  # sqlite-vec's KNN is the exact scan
    assert 0.5 <= figures["postgres"]["recall_at_10"] <= 1.0
    assert set(figures["postgres"]["ef_search_sweep"]) == {"40", "200"}
    drop_schema("bench_scale_200_2000_embedding_like")  # the schema the script names by size


@pytest.mark.models  # numpy, the `models` extra's
def test_bench_scale_vectors_have_the_local_structure_it_claims() -> None:
    """The embedding-like generator's neighbours are distinguishable (10th neighbour well
    beyond the nearest) where the isotropic worst case's are near-ties, as the README says."""
    from benchmarks.bench_scale import Corpus, local_structure

    shaped = local_structure(Corpus(1, 20000, 384).vectors(20000), 300)
    flat = local_structure(Corpus(1, 20000, 384, "isotropic").vectors(20000), 300)
    assert shaped["tenth_over_nearest"] > 1.3 > flat["tenth_over_nearest"]
    assert shaped["median"] < 1.36 < flat["median"]  # a shared offset, as real embeddings have


def test_bench_update_runs_for_ours_and_finds_rewritten_files() -> None:
    done = run_bench(
        [
            *(sys.executable, "-m", "benchmarks.bench_update"),
            *("--docs", "40", "--rounds", "1", "--touch", "3", "--ours-only"),
        ]
    )
    assert "no-op update (CPU = user + sys of the process tree):" in done.stdout
    assert "Indexed: 0 new, 3 updated, 37 unchanged, 0 removed" in done.stdout


@pytest.mark.postgres
def test_bench_update_compares_postgres_with_sqlite() -> None:
    from tests.postgres_server import server_url

    done = run_bench(
        [
            *(sys.executable, "-m", "benchmarks.bench_update"),
            *("--docs", "40", "--rounds", "1", "--touch", "3", "--ours-only"),
            *("--postgres", "--pg-url", server_url()),
        ]
    )
    assert "ratio postgres/sqlite wall:" in done.stdout
    assert "load average now" in done.stdout
    # both backends find the three rewritten files and read no other
    assert done.stdout.count("Indexed: 0 new, 3 updated, 37 unchanged, 0 removed") == 2


def test_bench_cli_start_runs_for_ours_and_counts_the_search() -> None:
    done = run_bench(
        [
            *(sys.executable, "-m", "benchmarks.bench_cli_start"),
            *("--docs", "40", "--rounds", "1", "--ours-only", "--show-sql"),
        ]
    )
    out = done.stdout
    for label in ("search  ours", "status  ours", "modules imported", "SQL statements"):
        assert label in out, f"missing {label!r} in:\n{out}"
    assert "1-minute load" in out and "ms (-X importtime" in out  # the load beside the figures
    assert "(target <= 10: PASS)" in out
    assert "MATCH" in out  # the statements listed include the search itself


def test_bench_ls_runs_for_ours_and_names_what_it_does_not_list() -> None:
    done = run_bench(
        [
            *(sys.executable, "-m", "benchmarks.bench_ls"),
            *("--docs", "40", "--odd", "4", "--rounds", "1", "--ours-only"),
        ]
    )
    out = done.stdout
    assert "`qmd ls bench` lists 40 lines on stdout" in out, out
    # the last of the 8 files left out, sorted by path (4 new ones, 2 binaries, 2 links)
    assert "stderr ends:   odd/link-0003.md: symbolic link" in out, out
    assert "ours     wall" in out and "CPU" in out and "load" in out


def test_bench_sign_share_runs_and_counts_one_copy() -> None:
    done = run_bench(
        [
            *(sys.executable, "-m", "benchmarks.bench_sign_share"),
            *("--vectors", "1500", "--dims", "24", "--connections", "3"),
        ]
    )
    out = done.stdout
    for label in ("rss_before_mib", "rss_after_searches_mib", "rss_after_write_mib"):
        assert label in out, f"missing {label!r} in:\n{out}"
    assert "distinct_matrices: 1" in out
    assert "loads_first_searches: 1" in out
    assert "loads_after_write: 1" in out


def test_bench_fill_runs_and_marks_the_fill() -> None:
    done = run_bench(
        [
            *(sys.executable, "-m", "benchmarks.bench_fill"),
            *("--docs", "500", "--pairs", "3", "--repeat", "1"),
        ]
    )
    out = done.stdout
    assert "two words never together vs two found together" in out
    # each of the 3 fill queries answers 10 results, all marked partial (REQ-SPEC-SEARCH-006)
    assert "3 queries each, 10-10 results, 30 marked partial" in out
    assert "needs the fill" in out and "(target <= 1.3: " in out
    # this install's rank function, then FTS5's for the record, then whole CLI processes
    assert "lexical ranking: qmd_bm25 from a connection's second search on" in out
    assert "the same with FTS5's bm25 (no lengths kept): needs the fill" in out
    assert "one `qmd search` process per query (CPU of the process): needs the fill" in out
    assert "tldr, 716 pages, 54 questions: with the fill" in out


@pytest.mark.postgres
def test_bench_fill_times_the_fill_on_postgresql() -> None:
    from tests.postgres_server import drop_schema, fresh_schema_url

    url, schema = fresh_schema_url()
    try:
        done = run_bench(
            [
                *(sys.executable, "-m", "benchmarks.bench_fill"),
                *("--docs", "500", "--pairs", "3", "--repeat", "1", "--cli-rounds", "0"),
                *("--postgres", url),
            ]
        )
    finally:
        drop_schema(schema)
    assert "PostgreSQL, the same corpus and pairs, by wall clock: needs the fill" in done.stdout

"""The `qmd` console script as a real process over a copy of the handbook fixture corpus.

Each test drives the installed command (or `python -m adapters.cli.main`) with an isolated
HOME, INDEX_PATH and QMD_CONFIG_DIR, and checks what a user sees: stdout, stderr, exit code.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib.metadata import version

import pytest

from tests.e2e.conftest import Qmd, qmd_command
from tests.mcp_harness import initialize_request

HANDBOOK_FILES = 22  # markdown files in fixtures/corpora/handbook (todo.txt is not indexed)


# ------------------------------------------------------------------------------ basics


def test_version_names_the_package_and_the_implemented_release(fresh: Qmd) -> None:
    done = fresh.run("--version")
    assert done.returncode == 0
    assert done.stdout == f"qmd {version('qmd-reference')} (implements QMD 2.8.3)\n"
    assert fresh.run("-v").stdout == done.stdout


def test_help_lists_the_commands(fresh: Qmd) -> None:
    done = fresh.run("--help")
    assert done.returncode == 0
    for word in ("collection", "context", "search", "multi-get", "mcp", "cleanup"):
        assert word in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("search", "token", "--bogus"),
        ("search", "token", "-n", "abc"),
        ("search", "token", "-n", "0"),
        ("search", "token", "--min-score", "high"),
        ("get",),
        ("collection", "add"),
        ("get", "x.md", "-l", "-3"),
        ("mcp", "--compat", "1.0"),
    ],
)
def test_usage_mistakes_exit_2_with_one_line_and_no_traceback(
    fresh: Qmd, args: tuple[str, ...]
) -> None:
    done = fresh.run(*args)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("qmd")


def test_unknown_command_is_reported_like_the_original(fresh: Qmd) -> None:
    done = fresh.run("bogus")
    assert done.returncode == 1
    assert done.stderr == "Unknown command: bogus\nRun 'qmd --help' for usage.\n"


def test_unexpected_failures_are_one_line_unless_debugging(fresh: Qmd) -> None:
    # nothing foresees the index's lock file being a folder
    fresh.db.with_name(fresh.db.name + ".update.lock").mkdir(parents=True)
    add = ("collection", "add", str(fresh.corpus), "--name", "handbook")
    done = fresh.run(*add)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("qmd: internal error:")
    assert len(done.stderr.strip().splitlines()) == 1
    debug = fresh.run(*add, QMD_DEBUG="1")
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr


def test_an_index_file_that_is_no_database_is_one_clear_line(fresh: Qmd) -> None:
    """It was an internal error (`DatabaseError: file is not a database`)."""
    fresh.db.write_bytes(b"this is not a sqlite database, not even close" * 100)
    done = fresh.run("status")
    assert done.returncode == 1
    assert done.stderr.startswith(f"qmd: cannot open the index {fresh.db}: file is not a database")
    assert len(done.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------ collections


def test_collection_add_indexes_and_prints_the_counts(fresh: Qmd) -> None:
    done = fresh.run("collection", "add", str(fresh.corpus), "--name", "handbook")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "Creating collection 'handbook'...\n"
        f"Collection: {fresh.corpus} (**/*.md)\n\n"
        f"Indexed: {HANDBOOK_FILES} new, 0 updated, 0 unchanged, 0 removed\n\n"
        f"Run 'qmd embed' to update embeddings ({HANDBOOK_FILES} unique hashes need vectors)\n"
        "✓ Collection 'handbook' created successfully\n"
    )
    assert "Indexing" not in done.stderr  # no progress bar when stderr is not a terminal
    config = (fresh.config_dir / "index.yml").read_text(encoding="utf-8")
    assert f"path: {fresh.corpus}" in config


def test_collection_add_dot_uses_the_working_directory_and_its_name(fresh: Qmd) -> None:
    done = fresh.run("collection", "add", ".", "--mask", "notes/*.md", cwd=fresh.corpus)
    assert done.returncode == 0, done.stderr
    assert "Creating collection 'handbook'..." in done.stdout
    assert f"Collection: {fresh.corpus} (notes/*.md)" in done.stdout
    assert "Indexed: 6 new," in done.stdout


def test_collection_add_refuses_duplicates_and_missing_folders(added: Qmd) -> None:
    again = added.run("collection", "add", str(added.corpus), "--name", "handbook")
    assert again.returncode == 1
    assert again.stderr.startswith("Collection 'handbook' already exists.")
    missing = added.run("collection", "add", str(added.root / "nope"))
    assert missing.returncode == 1
    assert missing.stderr.startswith("Collection path does not exist.")


def test_collection_list_show_exclude_include(added: Qmd) -> None:
    listing = added.ok("collection", "list")
    assert listing.startswith("Collections (1):\n\nhandbook (qmd://handbook/)\n")
    assert "  Pattern:  **/*.md\n" in listing
    assert f"  Files:    {HANDBOOK_FILES}\n" in listing
    assert re.search(r"  Updated:  \d+[smhd] ago\n", listing)
    assert "[excluded]" not in listing

    assert added.ok("collection", "exclude", "handbook") == (
        "✓ Collection 'handbook' excluded from default queries\n"
    )
    assert "handbook (qmd://handbook/) [excluded]" in added.ok("collection", "list")
    assert "  Include:  no\n" in added.ok("collection", "show", "handbook")
    assert added.ok("collection", "include", "handbook") == (
        "✓ Collection 'handbook' included in default queries\n"
    )
    assert added.ok("collection", "info", "handbook") == (
        f"Collection: handbook\n  Path:     {added.corpus}\n  Pattern:  **/*.md\n"
        "  Include:  yes (default)\n"
    )


def test_collection_rename_and_remove(added: Qmd) -> None:
    assert added.ok("collection", "mv", "handbook", "hb") == (
        "✓ Renamed collection 'handbook' to 'hb'\n"
        "  Virtual paths updated: qmd://handbook/ → qmd://hb/\n"
    )
    assert "qmd://hb/notes/setext.md  #" in added.ok("get", "qmd://hb/notes/setext.md")
    assert added.ok("collection", "rm", "hb") == (
        f"✓ Removed collection 'hb'\n  Deleted {HANDBOOK_FILES} documents\n"
    )
    assert added.ok("collection", "list") == (
        "No collections found. Run 'qmd collection add .' to create one.\n"
    )
    missing = added.run("collection", "remove", "hb")
    assert missing.returncode == 1
    assert missing.stderr.startswith("Collection not found: hb")


# ------------------------------------------------------------------------------ update


def test_update_reports_changed_and_removed_files(added: Qmd) -> None:
    (added.corpus / "notes" / "setext.md").write_text("Changed\n=======\n", encoding="utf-8")
    (added.corpus / "journal" / "2026-01.md").unlink()
    (added.corpus / "notes" / "brand new.md").write_text("# Brand new\n", encoding="utf-8")
    done = added.run("update")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "Updating 1 collection(s)...\n\n[1/1] handbook (**/*.md)\n"
        f"Collection: {added.corpus} (**/*.md)\n\n"
    )
    expected = f"Indexed: 1 new, 1 updated, {HANDBOOK_FILES - 2} unchanged, 1 removed\n"
    assert expected in done.stdout
    assert "✓ All collections updated.\n" in done.stdout
    assert "Indexing" not in done.stderr
    assert f"  Files:    {HANDBOOK_FILES}\n" in added.ok("collection", "list")
    gone = added.run("get", "journal/2026-01.md")
    assert gone.returncode == 1


def test_update_runs_the_update_command_in_the_collection_folder(added: Qmd) -> None:
    added.ok("collection", "update-cmd", "handbook", "printf '# Hook\\n' > hook.md && echo ran")
    done = added.run("update")
    assert done.returncode == 0, done.stderr
    assert "    Running update command: printf" in done.stdout
    assert "    ran\n" in done.stdout
    assert "Indexed: 1 new, 0 updated," in done.stdout
    assert (added.corpus / "hook.md").exists()
    assert added.ok("collection", "set-update", "handbook") == (
        "✓ Cleared update command for 'handbook'\n"
    )


def test_a_failing_update_command_aborts_the_update(added: Qmd) -> None:
    added.ok("collection", "update-cmd", "handbook", "exit 3")
    (added.corpus / "notes" / "late.md").write_text("# Late\n", encoding="utf-8")
    done = added.run("update")
    assert done.returncode == 1
    assert "failed with exit code 3" in done.stderr
    assert "Indexed:" not in done.stdout
    assert added.run("get", "notes/late.md").returncode == 1


def test_update_draws_a_progress_bar_only_on_a_terminal(added: Qmd) -> None:
    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(
            [*qmd_command(), "update"],
            cwd=added.root,
            env=added.env(),
            stdout=subprocess.PIPE,
            stderr=slave,
            text=True,
        )
        os.close(slave)
        stdout, _ = process.communicate(timeout=120)
        seen = b""
        while select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert process.returncode == 0
    assert f"Indexing handbook [##########] {HANDBOOK_FILES}/{HANDBOOK_FILES}" in seen.decode()
    assert "Indexing" not in stdout


# ------------------------------------------------------------------------------ contexts


def test_context_add_list_and_remove(added: Qmd) -> None:
    assert added.ok("context", "add", "/", "Everything") == (
        "✓ Set global context\nContext: Everything\n"
    )
    assert added.ok("context", "add", "qmd://handbook/", "The handbook") == (
        "✓ Added context for: qmd://handbook/ (collection root)\nContext: The handbook\n"
    )
    # one argument: the working directory is the target
    assert added.ok("context", "add", "Meeting notes", cwd=added.corpus / "meetings") == (
        "✓ Added context for: qmd://handbook/meetings\nContext: Meeting notes\n"
    )
    # a relative filesystem path is made absolute
    assert added.ok("context", "add", "handbook/notes", "Loose notes") == (
        "✓ Added context for: qmd://handbook/notes\nContext: Loose notes\n"
    )
    assert added.ok("context", "list") == (
        "\nConfigured Contexts\n\n*\n  /\n    Everything\n"
        "handbook\n  / (root)\n    The handbook\n  meetings\n    Meeting notes\n"
        "  notes\n    Loose notes\n"
    )
    header = added.ok("get", "meetings/standups & decisions.md", "-l", "1")
    assert "Folder Context: Everything\n\nThe handbook\n\nMeeting notes\n---\n" in header

    assert added.ok("context", "rm", "qmd://handbook/meetings") == (
        "✓ Removed context for: qmd://handbook/meetings\n"
    )
    assert added.ok("context", "remove", "/") == "✓ Removed global context\n"
    listing = added.ok("context", "list")
    assert "Meeting notes" not in listing
    assert "Everything" not in listing
    unknown = added.run("context", "add", "qmd://nope/", "x")
    assert unknown.returncode == 1
    assert unknown.stderr == "Collection not found: nope\n"


# ------------------------------------------------------------------------------ search


def test_search_default_cli_view(shared: Qmd) -> None:
    out = shared.ok("search", "token", "-n", "1")
    lines = out.splitlines()
    assert re.fullmatch(
        r"qmd://handbook/engineering/api/authentication\.md:\d+ #[0-9a-f]{6}", lines[0]
    )
    assert lines[1] == "Title: Authentication"
    assert lines[2] == "Context: Fixture knowledge base for the QMD conformance suite"
    assert "HTTP API reference" in out
    assert re.search(r"^Score: +\d+%$", out, re.MULTILINE)
    assert re.search(r"^@@ -\d+,\d+ @@ \(\d+ before, \d+ after\)$", out, re.MULTILINE)


def test_search_json(shared: Qmd) -> None:
    out = shared.ok("search", "token", "--json")
    assert out.startswith("[\n  {\n")
    data = json.loads(out)
    assert 1 <= len(data) <= 20
    first = data[0]
    assert list(first) == ["docid", "score", "file", "line", "title", "context", "snippet"]
    assert re.fullmatch(r"#[0-9a-f]{6}", first["docid"])
    assert first["file"] == "qmd://handbook/engineering/api/authentication.md"
    assert first["score"] == round(first["score"], 2)
    assert first["snippet"].startswith("@@ -")
    assert len(first["snippet"].split("\n", 1)[1]) <= 300
    assert shared.ok("search", "token", "--format", "json", "-n", "1") == shared.ok(
        "search", "token", "--json", "-n", "1"
    )


def test_search_marks_the_any_term_fill_in_every_format_that_can_say_it(shared: Qmd) -> None:
    """REQ-SPEC-SEARCH-006 on the command line: `pagination` matches, the made-up word does
    not, so every result is a partial match; with both words found, the first is not."""
    query = "pagination zzqxnonexistentterm"
    assert "\nMatch: partial (not every term was found)\n" in shared.ok("search", query, "-n", "1")
    data = json.loads(shared.ok("search", query, "--json"))
    assert data and all(item["partial"] is True for item in data)
    assert list(data[0])[:6] == ["docid", "score", "file", "line", "title", "context"]
    assert ' partial="true">' in shared.ok("search", query, "--xml", "-n", "1")
    assert "**match:** partial (not every term was found)\n" in shared.ok(
        "search", query, "--md", "-n", "1"
    )
    full = json.loads(shared.ok("search", "pagination cursor", "--json"))
    assert "partial" not in full[0]
    assert "Match:" not in shared.ok("search", "pagination cursor", "-n", "1")
    assert "Match:" not in shared.ok("search", query, "--strict")


def test_search_files_csv_md_xml(shared: Qmd) -> None:
    files = list(csv.reader(io.StringIO(shared.ok("search", "token", "--files"))))
    assert files
    for record in files:
        assert len(record) == 4
        assert re.fullmatch(r"#[0-9a-f]{6}", record[0])
        assert re.fullmatch(r"\d\.\d\d", record[1])
        assert record[2].startswith("qmd://handbook/")
        assert record[3].startswith("Fixture knowledge base")

    records = list(csv.reader(io.StringIO(shared.ok("search", "token", "--format", "csv"))))
    assert records[0] == ["docid", "score", "file", "title", "context", "line", "snippet"]
    assert re.fullmatch(r"\d\.\d{4}", records[1][1])
    assert all(len(r) == 7 for r in records)

    md = shared.ok("search", "token", "--md", "-n", "1")
    assert md.startswith("---\n# Authentication\n**file:** `qmd://handbook/engineering/api/")
    assert "**docid:** `#" in md

    xml = shared.ok("search", "standups", "--xml", "-n", "1")
    element = ET.fromstring(xml)
    assert element.tag == "file"
    assert element.get("name") == "qmd://handbook/meetings/standups & decisions.md"


def test_search_awkward_names_survive_every_format(shared: Qmd) -> None:
    out = shared.ok("search", "倒排索引", "--json")
    assert "qmd://handbook/中文笔记/倒排索引.md" in [item["file"] for item in json.loads(out)]
    files = shared.ok("search", "follow", "--files")
    assert "qmd://handbook/notes/issue #42 follow-up.md" in files


def test_search_limits_collections_and_thresholds(shared: Qmd) -> None:
    assert len(json.loads(shared.ok("search", "the", "--json", "-n", "2"))) == 2
    assert len(shared.ok("search", "the", "--files", "--all").splitlines()) > 5
    assert shared.ok("search", "token", "--min-score", "0.99") == (
        "No results found above minimum score threshold.\n"
    )
    assert shared.ok("search", "zzzqqqxyz") == "No results found.\n"
    assert shared.ok("search", "zzzqqqxyz", "--json") == "[]\n"
    assert (
        shared.ok("search", "zzzqqqxyz", "--csv") == "docid,score,file,title,context,line,snippet\n"
    )
    assert shared.ok("search", "zzzqqqxyz", "--xml") == "<results></results>\n"
    assert json.loads(shared.ok("search", "token", "-c", "handbook", "--json"))


def test_unknown_collection_and_format_exit_1(shared: Qmd) -> None:
    done = shared.run("search", "token", "-c", "nosuchcollection")
    assert done.returncode == 1
    assert done.stderr == "Collection not found: nosuchcollection\n"
    done = shared.run("search", "token", "--format", "yaml")
    assert done.returncode == 1
    assert done.stderr == "Unknown --format value: yaml\nValid: cli, json, csv, md, xml, files\n"


def test_search_full_and_line_numbers(shared: Qmd) -> None:
    data = json.loads(
        shared.ok("search", "setext", "--json", "--full", "--line-numbers", "-n", "1")
    )
    assert data[0]["body"].startswith("1: Setext Title\n2: ============")
    assert "snippet" not in data[0]
    on_disk = list(csv.reader(io.StringIO(shared.ok("search", "setext", "--files", "--full-path"))))
    assert on_disk[0][2] == "./handbook/notes/setext.md"


def test_query_document_uses_typed_lines_and_reports_bad_documents(shared: Qmd) -> None:
    data = json.loads(shared.ok("query", "lex: token expire", "--no-rerank", "--json"))
    assert data[0]["file"] == "qmd://handbook/engineering/api/authentication.md"
    done = shared.run("query", "lex: token\nplain words")
    assert done.returncode == 1
    assert done.stderr.endswith(
        "Line 2 is missing a lex:/vec:/hyde:/intent: prefix. "
        "Each line in a query document must start with one.\n"
    )
    done = shared.run("query", "intent: auth")
    assert done.returncode == 1
    assert "intent: cannot appear alone." in done.stderr


def test_plain_query_falls_back_to_bm25_without_models(shared: Qmd) -> None:
    data = json.loads(shared.ok("query", "refresh token", "--json", "-n", "3"))
    assert data
    assert data[0]["file"] == "qmd://handbook/engineering/api/authentication.md"


def test_query_explain_without_models_traces_the_bm25_list(shared: Qmd) -> None:
    data = json.loads(shared.ok("query", "refresh token", "--json", "-n", "2", "--explain"))
    explain = data[0]["explain"]
    assert explain["vectorScores"] == [] and len(explain["ftsScores"]) == 1
    (only,) = explain["rrf"]["contributions"]
    assert (only["source"], only["queryType"], only["query"], only["rank"]) == (
        "fts",
        "original",
        "refresh token",
        1,
    )
    assert (explain["rrf"]["weight"], explain["rerankScore"], explain["blendedScore"]) == (1, 0, 1)
    text = shared.ok("query", "refresh token", "-n", "1", "--explain")
    assert "Score: 100%\nExplain: fts=[" in text and "] vec=[none]\n  RRF: total=" in text
    done = shared.run("search", "refresh token", "--explain")
    assert done.returncode == 0 and "only `qmd query` records them" in done.stderr


def test_vsearch_without_embeddings_says_so_and_finds_nothing(shared: Qmd) -> None:
    done = shared.run("vsearch", "how do tokens expire")
    assert done.returncode == 0
    assert done.stdout == "No results found.\n"
    assert "qmd embed" in done.stderr


@pytest.mark.models  # with llama.cpp installed: the default model cannot be fetched here
def test_embed_is_reported_as_not_available(shared: Qmd) -> None:
    done = shared.run("embed")
    assert done.returncode == 1
    assert "not available" in done.stderr
    assert "Traceback" not in done.stderr


# ------------------------------------------------------------------------------ documents


def test_get_with_line_suffixes_and_flags(shared: Qmd) -> None:
    out = shared.ok("get", "engineering/api/authentication.md:3:2")
    assert re.match(r"qmd://handbook/engineering/api/authentication\.md  #[0-9a-f]{6}\n", out)
    assert "Folder Context: Fixture knowledge base" in out
    assert out.endswith(
        "---\n\n3: Clients authenticate with OAuth 2.0 bearer tokens. "
        "Refresh tokens rotate on every use.\n4: \n"
    )
    plain = shared.ok(
        "get", "qmd://handbook/notes/setext.md", "--from", "4", "-l", "1", "--no-line-numbers"
    )
    assert plain.endswith(
        "---\n\nThis note uses setext headings, which the title extractor does not recognise.\n"
    )
    docid = re.search(r"#([0-9a-f]{6})", out)
    assert docid is not None
    assert shared.ok("get", f"#{docid.group(1)}").startswith(out.split("\n")[0])
    full = shared.ok("get", "notes/setext.md", "--full-path", "-l", "1")
    # under the working directory the on-disk path is shown ./-relative, else absolute
    assert full.startswith("./handbook/notes/setext.md\n")
    elsewhere = shared.run("get", "notes/setext.md", "--full-path", cwd=shared.root / "home")
    assert elsewhere.stdout.startswith(str(shared.corpus / "notes" / "setext.md") + "\n")


def test_get_not_found_suggests_similar_files(shared: Qmd) -> None:
    done = shared.run("get", "engineering/api/authentcation.md")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "Document not found: engineering/api/authentcation.md\n"
        "Similar files:\n  engineering/api/authentication.md\n"
    )


def test_multi_get_glob_list_and_misses(shared: Qmd) -> None:
    out = shared.ok("multi-get", "engineering/api/*.md", "-l", "1")
    banner = "=" * 60
    assert f"\n{banner}\nFile: engineering/api/authentication.md  #" in out
    assert "1: # Authentication\n2: \n3: [... truncated 12 more lines]\n" in out

    done = shared.run("multi-get", "notes/setext.md, missing.md", "--format", "json")
    assert done.returncode == 0
    assert done.stderr.startswith("File not found: missing.md")
    data = json.loads(done.stdout)
    assert [item["file"] for item in data] == ["qmd://handbook/notes/setext.md"]
    assert data[0]["body"].startswith("1: Setext Title")

    done = shared.run("multi-get", "nomatch/*.md")
    assert done.returncode == 1
    assert done.stderr == "No files matched pattern: nomatch/*.md\n"


def test_multi_get_skips_files_over_max_bytes(shared: Qmd) -> None:
    out = shared.ok("multi-get", "reference/*.md")
    assert (
        "[SKIPPED: File too large (67KB > 64KB). "
        "Use 'qmd get reference/large reference.md' to retrieve.]"
    ) in out
    data = json.loads(shared.ok("multi-get", "reference/*.md", "--json", "--max-bytes", "1000"))
    assert all(item["skipped"] is True for item in data)
    assert data[0]["reason"].startswith("File too large (")


def test_ls_collections_files_and_prefixes(shared: Qmd) -> None:
    assert shared.ok("ls") == f"Collections:\n\n  qmd://handbook/  ({HANDBOOK_FILES} files)\n"
    listing = shared.ok("ls", "handbook").splitlines()
    assert len(listing) == HANDBOOK_FILES
    pattern = re.compile(
        r" *\d+(\.\d)? (B|KB)  [A-Z][a-z]{2} [ \d]\d ( \d{4}|\d\d:\d\d)  qmd://handbook/.+"
    )
    assert all(pattern.fullmatch(line) for line in listing)
    assert [line.split("qmd://")[1] for line in listing] == sorted(
        line.split("qmd://")[1] for line in listing
    )
    api = shared.ok("ls", "qmd://handbook/engineering/api").splitlines()
    assert len(api) == 4
    assert any(line.endswith("qmd://handbook/engineering/api/rate limits.md") for line in api)
    assert (
        shared.ok("ls", "handbook/nothing-here")
        == "No files found under qmd://handbook/nothing-here\n"
    )
    done = shared.run("ls", "nope")
    assert done.returncode == 1
    assert done.stderr.startswith("Collection not found: nope")


def test_status_summarises_the_index(shared: Qmd) -> None:
    out = shared.ok("status")
    assert out.startswith(f"QMD Status\n\nIndex: {shared.db}\nSize:  ")
    assert f"  Total:    {HANDBOOK_FILES} files indexed\n" in out
    assert "  Vectors:  0 embedded\n" in out
    assert f"  Pending:  {HANDBOOK_FILES} need embedding (run 'qmd embed')\n" in out
    assert "  handbook (qmd://handbook/)\n    Pattern:  **/*.md\n" in out
    assert "    Contexts: 2\n" in out


def test_cleanup_dry_run_then_cleanup(added: Qmd) -> None:
    (added.corpus / "notes" / "setext.md").unlink()
    added.ok("update")
    preview = added.ok("cleanup", "--dry-run")
    assert preview.startswith("Dry run — no changes made.\n\nWould clear ")
    assert "Would remove 1 inactive document records\n" in preview
    assert preview.endswith("Would compact FTS and vacuum the database\n")
    done = added.ok("cleanup")
    assert "✓ Removed 1 inactive document records\n" in done
    assert done.endswith("✓ FTS compacted, database vacuumed\n")
    assert "inactive" not in added.ok("cleanup", "--dry-run")


# ------------------------------------------------------------------------------ MCP


def _initialize_line() -> str:
    return json.dumps(initialize_request())


@pytest.mark.parametrize("words", [("mcp",), ("server", "--transport", "mcp")])
def test_mcp_answers_initialize_on_stdio_with_nothing_else_on_stdout(
    shared: Qmd, words: tuple[str, ...]
) -> None:
    silent = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", *words],
        input="",
        cwd=shared.root,
        env=shared.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # no input at all: the server sees EOF and exits cleanly without writing a frame
    assert silent.returncode == 0, silent.stderr
    assert silent.stdout == ""
    process = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", *words],
        input=_initialize_line() + "\n",
        cwd=shared.root,
        env=shared.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert process.returncode == 0, process.stderr
    frames = [json.loads(line) for line in process.stdout.splitlines()]
    assert len(frames) == 1
    assert frames[0]["id"] == 1
    assert frames[0]["result"]["serverInfo"]["name"] == "qmd"
    assert frames[0]["result"]["protocolVersion"] == "2025-06-18"


def test_unknown_transports_and_misplaced_daemon_are_usage_errors(shared: Qmd) -> None:
    done = shared.run("server", "--transport", "carrier-pigeon")
    assert done.returncode == 2
    assert "unknown transport" in done.stderr
    done = shared.run("mcp", "--daemon")
    assert done.returncode == 2
    assert "--daemon needs --http" in done.stderr


def test_python_dash_m_adapters_cli_runs_the_same_program(fresh: Qmd) -> None:
    done = fresh.run("--version", command=[sys.executable, "-m", "adapters.cli"])
    assert done.returncode == 0
    assert done.stdout.startswith("qmd ")


def test_no_command_prints_help_and_fails_like_the_original(fresh: Qmd) -> None:
    done = fresh.run()
    assert done.returncode == 1
    assert done.stdout.startswith("usage: qmd")

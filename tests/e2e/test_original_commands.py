"""The commands of the original's 2.8.3 `qmd --help` (recorded in tests/data): each one is in
our `qmd --help` and either works or says why not. Real `qmd` processes, isolated homes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from adapters.cli.parser import build_parser
from adapters.models.references import PREPARED_EMBED_FILE
from tests.e2e.conftest import Qmd
from tests.model_fakes import prepared_model
from tests.original import original_qmd

ORIGINAL_HELP = Path(__file__).resolve().parents[1] / "data" / "original-2.8.3-help.txt"


def original_commands() -> set[str]:
    """`qmd <word>` at the start of a help line: the original's commands."""
    text = ORIGINAL_HELP.read_text(encoding="utf-8")
    return set(re.findall(r"^  qmd ([a-z][a-z-]*)", text, flags=re.MULTILINE))


def test_the_recorded_help_is_the_original_list() -> None:
    # a guard on the test data itself: the list the comparison below relies on
    assert original_commands() >= {"query", "init", "trust", "pull", "bench", "skills", "skill"}
    assert len(original_commands()) == 19


def test_our_help_lists_every_command_of_the_original(fresh: Qmd) -> None:
    _parser, table = build_parser()
    assert original_commands() - table.names() == set()
    shown = fresh.ok("--help")
    listed = set(re.findall(r"^    ([a-z][a-z-]*)", shown, flags=re.MULTILINE))
    assert original_commands() - listed == set()
    for piece in ("query syntax", "lex:", "vec:", "hyde:", "intent:", "examples:"):
        assert piece in shown


@pytest.mark.parametrize("command", sorted(original_commands()))
def test_every_original_command_has_help(fresh: Qmd, command: str) -> None:
    done = fresh.run(command, "--help")
    assert done.returncode == 0, done.stderr
    assert f"usage: qmd {command}" in done.stdout


@pytest.mark.parametrize("command", sorted(original_commands()))
def test_every_original_command_runs_bare_or_says_why_not(fresh: Qmd, command: str) -> None:
    """Run with no arguments in an empty home: it works (exit 0) or fails with a message
    (exit 1, or 2 for a usage mistake), never with a traceback or silence."""
    import subprocess

    from tests.e2e.conftest import qmd_command

    done = subprocess.run(
        [*qmd_command(), command],
        cwd=fresh.root,
        env=fresh.env(QMD_OFFLINE="1"),
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr
    assert done.returncode in (0, 1, 2), (done.returncode, done.stderr)
    if done.returncode:
        assert done.stderr.strip(), f"qmd {command} failed without saying why"
    else:
        assert (done.stdout + done.stderr).strip(), f"qmd {command} printed nothing"


# ------------------------------------------------------------------------- init and trust


def _project(root: Path) -> Path:
    project = root / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "a.md").write_text("# Inside\n\nlighthouse keeper notes\n")
    (root / "outside").mkdir()
    (root / "outside" / "s.md").write_text("# Outside\n\nprivate lighthouse diary\n")
    return project


def _local_env(qmd: Qmd) -> dict[str, str]:
    # no INDEX_PATH / QMD_CONFIG_DIR: the project-local `.qmd/` must be found by itself
    env = qmd.env()
    env.pop("INDEX_PATH")
    env.pop("QMD_CONFIG_DIR")
    return env


def _run(qmd: Qmd, cwd: Path, *args: str, **extra: str) -> tuple[int, str, str]:
    import subprocess

    from tests.e2e.conftest import qmd_command

    env = {**_local_env(qmd), **extra}
    done = subprocess.run(
        [*qmd_command(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


def _add_outside_collection(project: Path, outside: Path, marker: Path) -> None:
    config = project / ".qmd" / "index.yml"
    data = yaml.safe_load(config.read_text())
    data["collections"]["out"] = {
        "path": str(outside),
        "pattern": "**/*.md",
        "update": f"touch {marker}",
    }
    config.write_text(yaml.safe_dump(data))


def test_init_makes_a_project_local_index_that_commands_use(fresh: Qmd) -> None:
    project = _project(fresh.root)
    rc, stdout, _ = _run(fresh, project, "init")
    assert (rc, stdout) == (0, "ready to go with new local index\n")
    assert (project / ".qmd" / "index.yml").is_file()
    assert (project / ".qmd" / "index.sqlite").is_file()
    assert _run(fresh, project / "docs", "collection", "add", ".", "--name", "docs")[0] == 0
    rc, stdout, _ = _run(fresh, project / "docs", "search", "lighthouse", "--format", "files")
    assert rc == 0 and "qmd://docs/a.md" in stdout
    # the global index knows nothing of it
    assert "lighthouse" not in fresh.run("search", "lighthouse").stdout


def test_init_refuses_the_home_folder(fresh: Qmd) -> None:
    rc, _, stderr = _run(fresh, fresh.root / "home", "init")
    assert rc == 1 and "Refusing to initialize a local index in $HOME" in stderr


def test_a_checked_in_config_is_gated_until_trusted(fresh: Qmd) -> None:
    project = _project(fresh.root)
    marker = fresh.root / "hook-ran"
    _run(fresh, project, "init")
    _run(fresh, project, "collection", "add", "docs", "--name", "docs")
    _add_outside_collection(project, fresh.root / "outside", marker)

    rc, stdout, _ = _run(fresh, project, "update")
    assert rc == 0
    assert "out: touch" in stdout and "Skipping collection 'out'" in stdout
    assert not marker.exists()
    assert "diary" not in _run(fresh, project, "search", "lighthouse", "-n", "9")[1]

    rc, stdout, _ = _run(fresh, project, "trust")
    assert rc == 0 and "✓ Trusted" in stdout
    assert str(project / ".qmd" / "index.yml") in _run(fresh, project, "trust", "list")[1]
    _run(fresh, project, "update")
    assert marker.exists()
    assert "qmd://out/s.md" in _run(fresh, project, "search", "diary", "--format", "files")[1]

    # editing the hook re-arms the gate
    marker.unlink()
    config = project / ".qmd" / "index.yml"
    config.write_text(config.read_text().replace("touch ", "true && touch "))
    assert "Skipping collection 'out'" in _run(fresh, project, "update")[1]
    assert not marker.exists()
    # an unattended opt-in runs it
    _run(fresh, project, "update", QMD_TRUST_LOCAL_CONFIG="1")
    assert marker.exists()
    assert "Revoked" in _run(fresh, project, "trust", "revoke")[1]
    assert "No trusted project configs." in _run(fresh, project, "trust", "list")[1]


def test_your_own_config_is_never_gated(fresh: Qmd) -> None:
    stdout = fresh.ok("trust")
    assert "is your own config — it is never gated. Nothing to trust." in stdout


@pytest.mark.original
def test_an_approval_by_the_original_is_one_by_us(tmp_path: Path, fresh: Qmd) -> None:
    """Both implementations digest the gated set the same way and share trusted.json."""
    project = _project(fresh.root)
    (project / ".qmd").mkdir()
    config = {"collections": {"out": {"path": str(fresh.root / "outside"), "update": "true"}}}
    (project / ".qmd" / "index.yml").write_text(yaml.safe_dump(config))
    original = original_qmd(fresh.root / "home")
    original.run("trust", cwd=project)
    trusted = json.loads((fresh.root / "home" / ".config" / "qmd" / "trusted.json").read_text())
    assert list(trusted) == [str(project / ".qmd" / "index.yml")]
    rc, stdout, _ = _run(fresh, project, "update")
    assert rc == 0 and "Skipping" not in stdout and "Running update command: true" in stdout


def test_untrusted_custom_models_are_not_loaded(fresh: Qmd) -> None:
    project = _project(fresh.root)
    _run(fresh, project, "init")
    config = project / ".qmd" / "index.yml"
    data = yaml.safe_load(config.read_text())
    data["models"]["embed"] = str(fresh.root / "evil.gguf")
    config.write_text(yaml.safe_dump(data))
    _rc, stdout, stderr = _run(fresh, project, "pull", QMD_OFFLINE="1")
    assert "evil.gguf" not in stdout + stderr
    _rc, stdout, stderr = _run(fresh, project, "pull", QMD_OFFLINE="1", QMD_TRUST_LOCAL_CONFIG="1")
    assert "evil.gguf" in stdout + stderr


# ------------------------------------------------------------------- skills, pull, bench


def test_skills_and_skill(fresh: Qmd) -> None:
    listed = fresh.ok("skills", "list")
    assert listed.startswith("  qmd  ")
    data = json.loads(fresh.ok("skills", "list", "--json"))
    assert data["success"] and data["data"][0]["name"] == "qmd"
    text = fresh.ok("skills", "get", "qmd")
    assert text.startswith("---\nname: qmd\n") and "qmd query" in text
    assert Path(fresh.ok("skills", "path", "qmd").strip(), "SKILL.md").read_text() == text
    assert fresh.ok("skill", "show") == "QMD Skill\n\n" + text
    missing = fresh.run("skills", "get", "nope")
    assert missing.returncode == 1 and "Skill not found: nope" in missing.stderr

    project = fresh.root / "work"
    project.mkdir()
    assert "Installed QMD skill" in fresh.ok("skill", "install", cwd=project)
    assert (project / ".agents" / "skills" / "qmd" / "SKILL.md").read_text() == text
    again = fresh.run("skill", "install", cwd=project)
    assert again.returncode == 1 and "--force" in again.stderr
    assert fresh.run("skill", "install", "--force", cwd=project).returncode == 0
    fresh.ok("skill", "install", "--global", cwd=project)
    assert (fresh.root / "home" / ".agents" / "skills" / "qmd" / "SKILL.md").is_file()


def test_pull_offline_fails_fast_and_names_what_it_would_fetch(fresh: Qmd) -> None:
    done = fresh.run("pull", QMD_OFFLINE="1", timeout=30)
    assert done.returncode == 1
    assert "hf:ggml-org/embeddinggemma-300M-GGUF" in done.stderr
    assert "offline mode is set" in done.stderr
    assert "could not be fetched" in done.stderr


def test_pull_reports_a_local_model_file(fresh: Qmd) -> None:
    model = fresh.root / "tiny.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    done = fresh.run("pull", QMD_OFFLINE="1", QMD_EMBED_MODEL=str(model))
    assert f"- {model} -> {model} (64 B, cached/checked)" in done.stdout


def test_bench_scores_a_fixture_in_the_original_format(added: Qmd) -> None:
    fixture = added.root / "fixture.json"
    expected = sorted(p.relative_to(added.corpus).as_posix() for p in added.corpus.rglob("*.md"))
    fixture.write_text(
        json.dumps(
            {
                "description": "smoke",
                "version": 1,
                "collection": "handbook",
                "queries": [
                    {
                        "id": "first",
                        "query": Path(added.corpus, expected[0]).read_text().split()[1],
                        "type": "exact",
                        "description": "a word of the first file",
                        "expected_files": [expected[0]],
                        "expected_in_top_k": 5,
                    }
                ],
            }
        )
    )
    report = json.loads(added.ok("bench", str(fixture), "--json"))
    bm25 = report["results"][0]["backends"]["bm25"]
    assert bm25["recall"] == 1.0 and bm25["mrr"] > 0
    # no embeddings here: the vector backends score 0 instead of failing the run
    assert report["results"][0]["backends"]["vector"]["recall"] == 0
    assert set(report["summary"]) == {"bm25", "vector", "hybrid", "full"}
    table = added.ok("bench", str(fixture))
    assert "Summary:" in table and "bm25" in table
    missing = added.run("bench", str(fixture), "-c", "nope")
    assert missing.returncode == 1 and "Collection not found: nope" in missing.stderr
    broken = added.root / "broken.json"
    broken.write_text("{")
    assert "not valid JSON" in added.run("bench", str(broken)).stderr


def test_chunk_strategy_auto_is_refused_with_the_reason(added: Qmd) -> None:
    for command in (("search", "x"), ("embed",)):
        done = added.run(*command, "--chunk-strategy", "auto")
        assert done.returncode == 2 and "only the markdown-aware 'regex' chunker" in done.stderr
    assert added.run("search", "x", "--chunk-strategy", "regex").returncode == 0


def test_embed_f_with_c_is_refused_with_the_reason(added: Qmd) -> None:
    done = added.run("embed", "-f", "-c", "handbook")
    assert done.returncode == 1 and "run 'qmd embed -f' without -c" in done.stderr


@pytest.mark.models
def test_embed_c_embeds_only_that_collections_documents(fresh: Qmd) -> None:
    model = prepared_model(PREPARED_EMBED_FILE)
    one, two = fresh.root / "one", fresh.root / "two"
    one.mkdir()
    two.mkdir()
    (one / "a.md").write_text("# Alpha\n\nfirst collection\n")
    (two / "b.md").write_text("# Beta\n\nsecond collection\n")
    fresh.ok("collection", "add", str(one), "--name", "one")
    fresh.ok("collection", "add", str(two), "--name", "two")
    done = fresh.run("embed", "-c", "one", QMD_EMBED_MODEL=str(model), timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Embedding 1 document(s)" in done.stdout
    status = fresh.run("status", QMD_EMBED_MODEL=str(model)).stdout
    assert re.search(r"Pending:\s+1 need embedding", status), status
    done = fresh.run("embed", "-f", QMD_EMBED_MODEL=str(model), timeout=600)
    assert done.returncode == 0 and "Embedding 2 document(s)" in done.stdout, done.stdout
    missing = fresh.run("embed", "-c", "nope", QMD_EMBED_MODEL=str(model), timeout=600)
    assert missing.returncode == 1 and "Collection not found: nope" in missing.stderr


@pytest.mark.models
def test_status_and_doctor_name_the_models_and_vectors_of_another_model(fresh: Qmd) -> None:
    model = prepared_model(PREPARED_EMBED_FILE)
    (fresh.root / "one").mkdir()
    (fresh.root / "one" / "a.md").write_text("# Alpha\n\nfirst\n")
    fresh.ok("collection", "add", str(fresh.root / "one"), "--name", "one")
    assert fresh.run("embed", QMD_EMBED_MODEL=str(model), timeout=600).returncode == 0
    status = fresh.run("status", QMD_EMBED_MODEL=str(model)).stdout
    assert f"Models\n  Embedding:   {model}\n  Reranking:   hf:" in status
    assert "Add context to collections for better search results: one" in status
    assert "need vectors" not in status

    other = str(fresh.root / "other.gguf")
    status = fresh.run("status", QMD_EMBED_MODEL=other).stdout
    assert f"  Vectors:     1 document(s) embedded with {model}" in status
    assert "qmd embed -f" in status
    doctor = fresh.run("doctor", QMD_EMBED_MODEL=other)
    assert f"  - QMD_EMBED_MODEL={other}: sets the embedding model" in doctor.stdout
    assert f"⚠ embedding model: 1 document(s) have vectors from {model}" in doctor.stdout
    assert "Recommended next steps" in doctor.stdout and "qmd pull" in doctor.stdout


def test_cli_search_uses_the_default_surfaces_rule_and_strict_the_originals(added: Qmd) -> None:
    relaxed = json.loads(added.ok("search", "zzqxnonexistentterm pagination", "--format", "json"))
    strict = added.run("search", "--strict", "zzqxnonexistentterm pagination", "--format", "json")
    assert [r["file"] for r in relaxed][:1] == ["qmd://handbook/engineering/api/pagination.md"]
    assert strict.returncode == 0 and strict.stdout.strip() in ("[]", "")
    scores = [r["score"] for r in relaxed]
    assert scores == sorted(scores, reverse=True)


def test_doctor_says_how_lexical_search_ranks(added: Qmd) -> None:
    """REQ-SEARCH-RANKCACHE-001: the rank function this install built is the one a
    connection that searches again loads."""
    doctor = added.run("doctor").stdout
    expected = "  Ranking:    qmd_bm25 from a connection's second search on"
    assert expected + " (row lengths kept in memory)\n" in doctor, doctor


def test_a_missed_get_spelled_like_a_search_result_gets_suggestions(added: Qmd) -> None:
    for spelled in (
        "handbook/engineering/api/paginaton.md",
        "qmd://handbook/engineering/api/paginaton.md",
    ):
        done = added.run("get", spelled)
        assert done.returncode == 1
        assert "  handbook/engineering/api/pagination.md\n" in done.stderr, done.stderr


# --------------------------------------------------------------- stages and degradations


def _stderr_on_a_terminal(qmd: Qmd, *args: str) -> tuple[int, str, str]:
    import os
    import pty
    import select
    import subprocess

    from tests.e2e.conftest import qmd_command

    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(
            [*qmd_command(), *args],
            cwd=qmd.root,
            env=qmd.env(),
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
    return process.returncode, stdout, seen.decode()


def test_query_shows_its_stages_on_a_terminal_and_says_what_it_skipped(added: Qmd) -> None:
    note = "Note: vectors skipped (keyword (BM25) results only): no vector index"
    piped = added.run("query", "pagination")
    assert piped.returncode == 0 and "pagination.md" in piped.stdout
    assert piped.stderr.count(note) == 1
    assert "searching" not in piped.stderr  # no progress when piped

    rc, stdout, stderr = _stderr_on_a_terminal(added, "query", "pagination")
    assert rc == 0 and "pagination.md" in stdout
    assert re.search(r"searching \d+\.\ds\r?\n", stderr), stderr
    assert stderr.count(note) == 1

    rc, _, quiet = _stderr_on_a_terminal(added, "query", "--quiet", "pagination")
    assert rc == 0 and "searching" not in quiet and note in quiet


@pytest.mark.models
def test_embed_sizes_chunks_for_a_512_token_model(fresh: Qmd) -> None:
    model = prepared_model(PREPARED_EMBED_FILE)
    (fresh.root / "long").mkdir()
    paragraphs = [
        f"## Part {i}\n\n" + " ".join(f"word{i}x{j}" for j in range(120)) for i in range(20)
    ]
    (fresh.root / "long" / "a.md").write_text("# Long\n\n" + "\n\n".join(paragraphs))
    fresh.ok("collection", "add", str(fresh.root / "long"), "--name", "long")
    done = fresh.run("embed", QMD_EMBED_MODEL=str(model), timeout=600)
    assert done.returncode == 0, done.stderr
    found = re.search(r"Chunks of at most (\d+) tokens: the model reads (\d+) tokens", done.stdout)
    assert found, done.stdout
    assert int(found.group(1)) < int(found.group(2)) <= 512
    assert "were cut" not in done.stderr

"""A hostile collection folder indexed by real `qmd` processes run as an unprivileged user.

Binary files whatever their name, names that are not UTF-8 or hold control characters,
UTF-16 exports, a 50 MB file, symbolic-link loops, unreadable files and folders, a FIFO and a
folder named like a file: `qmd collection add` and `qmd update` finish, index the rest, and
name every skipped file with its reason (ADR 0022); `status` and both MCP surfaces answer over
the result. The counts of tried entries are listed at the end of the run ("robustness figures").
"""

from __future__ import annotations

import codecs
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.figures import report
from tests.mcp_harness import REPO, StdioServer, fixture_env

NOBODY = 65534
BIG_FILE_BYTES = 50 * 1024 * 1024


@dataclass(frozen=True)
class Unprivileged:
    """How the test drops root: `prefix` goes before the command; `how` says which way."""

    prefix: tuple[str, ...]
    how: str
    chown_to: int | None


def _unprivileged() -> Unprivileged:
    """A non-root user when this interpreter is reachable by one (setpriv to `nobody`); else
    root with every capability dropped (it then reads only what file modes allow, like any
    user); when not root at all, nothing to do."""
    if os.geteuid() != 0:
        return Unprivileged((), f"uid {os.geteuid()} (not root)", None)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("setpriv (util-linux) is needed to drop root for this test")
    as_nobody = (setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")
    probe = subprocess.run(
        [*as_nobody, sys.executable, "-c", "import adapters.cli.main"],
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    if probe.returncode == 0:
        return Unprivileged(as_nobody, "uid 65534 (nobody) via setpriv", NOBODY)
    no_caps = (setpriv, "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs")
    return Unprivileged(
        no_caps,
        "uid 0 with every capability dropped via setpriv (the interpreter is not "
        "reachable by nobody); unreadable entries are owned by nobody",
        None,
    )


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@dataclass
class HostileCorpus:
    root: Path
    indexed: dict[str, str]  # relative path -> a word only that document holds
    skipped: dict[str, str]  # displayed path -> a fragment of the expected reason
    silent: list[str]  # skipped without a report (whitespace-only files, as the original)

    @property
    def tried(self) -> int:
        return len(self.indexed) + len(self.skipped) + len(self.silent)


def build_corpus(root: Path, owner_of_denied: int | None) -> HostileCorpus:
    indexed: dict[str, str] = {}
    skipped: dict[str, str] = {}
    c = root
    # ordinary documents, one nested in a folder named like a file
    _write(c / "plain.md", b"# Plain\nordinary zebrafinch text\n")
    indexed["plain.md"] = "zebrafinch"
    _write(c / "x.md" / "inner.md", b"# Inner\nnested quokka note\n")
    indexed["x.md/inner.md"] = "quokka"
    # content encodings
    _write(c / "bad-bytes.md", b"# Latin\ncaf\xe9 ocelot menu with a stray byte " + b"x" * 80)
    indexed["bad-bytes.md"] = "ocelot"
    utf16 = "# Wide title\nwombat exported from a word processor\n"
    _write(c / "utf16le.md", codecs.BOM_UTF16_LE + utf16.encode("utf-16-le"))
    indexed["utf16le.md"] = "wombat"
    _write(
        c / "utf16be.md",
        codecs.BOM_UTF16_BE + "# Big end\nnarwhal text\n".encode("utf-16-be"),
    )
    indexed["utf16be.md"] = "narwhal"
    _write(c / "utf16-nobom.md", "# No BOM\npangolin\n".encode("utf-16-le"))
    skipped["utf16-nobom.md"] = "NUL bytes"
    # binary files whatever their name
    _write(c / "image.md", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    skipped["image.md"] = "PNG image"
    _write(c / "paper.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\n")
    skipped["paper.pdf"] = "could not be extracted: corrupt (PDFium"  # ADR 0036
    _write(c / "random.md", os.urandom(4096).replace(b"\x00", b"\x01") + b"\x00")
    skipped["random.md"] = "binary file"
    _write(c / "latin1-heap.md", bytes(range(0x80, 0x100)) * 8)
    skipped["latin1-heap.md"] = "not UTF-8"
    # a 50 MB file: refused by size, never read whole
    with open(c / "huge.md", "wb") as handle:
        handle.truncate(BIG_FILE_BYTES)
        handle.seek(0)
        handle.write(b"# Huge\n")
    skipped["huge.md"] = "file too large"
    # names
    for raw, reason in (
        (b"bad\xffname.md", "not valid UTF-8"),
        (b"half\xc3(.md", "not valid UTF-8"),
        (b"new\nline.md", "control characters"),
        (b"tab\there.md", "control characters"),
        (b"bell\x07.md", "control characters"),
        (b"del\x7f.md", "control characters"),
    ):
        with open(os.path.join(os.fsencode(c), raw), "wb") as handle:
            handle.write(b"# named badly\n")
        shown = raw.decode("utf-8", "backslashreplace")
        shown = shown.replace("\n", "\\n").replace("\t", "\\t")
        shown = shown.replace("\x07", "\\x07").replace("\x7f", "\\x7f")
        skipped[shown] = reason
    os.makedirs(os.path.join(os.fsencode(c), b"dir\xfe"), exist_ok=True)
    with open(os.path.join(os.fsencode(c), b"dir\xfe", b"under.md"), "wb") as handle:
        handle.write(b"# under a bad folder name\n")
    skipped["dir\\xfe/under.md"] = "not valid UTF-8"
    # links: loops, a chain, one leaving the folder, a folder loop
    os.symlink("loop.md", c / "loop.md")
    os.symlink("pong.md", c / "ping.md")
    os.symlink("ping.md", c / "pong.md")
    outside = root.parent / "outside-secret.md"
    outside.write_bytes(b"# secret\nplatypus outside\n")
    os.symlink(outside, c / "escape.md")
    os.symlink(".", c / "selfloop")
    for name in ("loop.md", "ping.md", "pong.md", "escape.md"):
        skipped[name] = "symbolic link"
    # not regular files
    os.mkfifo(c / "pipe.md")
    skipped["pipe.md"] = "not a regular file"
    # permissions: a file and a folder nobody may read
    _write(c / "denied.md", b"# denied\nsecretword\n")
    _write(c / "locked" / "inside.md", b"# locked\nhiddenword\n")
    for path in (c / "denied.md", c / "locked"):
        os.chmod(path, 0)
        if owner_of_denied is not None:
            os.chown(path, owner_of_denied, owner_of_denied)
    skipped["denied.md"] = "Permission denied"
    skipped["locked/"] = "folder not readable"
    # empty and whitespace-only: skipped silently, as the original does
    _write(c / "empty.md", b"")
    _write(c / "blank.md", b"  \n\n")
    return HostileCorpus(c, indexed, skipped, ["empty.md", "blank.md"])


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HostileCorpus, dict]]:
    user = _unprivileged()
    # tmp_path lies under a 0700 folder of root's: use one any user can walk.
    base = Path(tempfile.mkdtemp(prefix="qmd-hostile-"))
    os.chmod(base, 0o755)
    try:
        corpus = build_corpus(base / "corpus", NOBODY if os.geteuid() == 0 else None)
        state = base / "state"
        state.mkdir()
        if user.chown_to is not None:
            os.chown(state, user.chown_to, user.chown_to)
        env = {**fixture_env(state), "PYTHONPATH": str(REPO)}
        yield corpus, {"env": env, "user": user}
    finally:
        for path in (base / "corpus" / "denied.md", base / "corpus" / "locked"):
            if path.exists():
                os.chmod(path, 0o700)
        shutil.rmtree(base, ignore_errors=True)


def _qmd(ctx: dict, *args: str) -> subprocess.CompletedProcess[str]:
    user: Unprivileged = ctx["user"]
    return subprocess.run(
        [*user.prefix, sys.executable, "-m", "adapters.cli.main", *args],
        env=ctx["env"],
        cwd=REPO,
        capture_output=True,
        text=True,
        errors="backslashreplace",
        timeout=300,
        check=False,
    )


def _reported(stderr: str) -> dict[str, str]:
    """`  path: reason` lines of the skipped-files report."""
    lines = stderr.split("Skipped ", 1)[-1].splitlines()[1:]
    found: dict[str, str] = {}
    for line in lines:
        if line.startswith("  ") and ": " in line:
            path, reason = line[2:].split(": ", 1)
            found[path] = reason
    return found


def test_hostile_folder_is_indexed_around_every_bad_entry(
    hostile: tuple[HostileCorpus, dict],
) -> None:
    corpus, ctx = hostile
    added = _qmd(
        ctx, "collection", "add", str(corpus.root), "--name", "h", "--mask", "**/*.md,**/*.pdf"
    )
    assert added.returncode == 0, added.stderr
    assert f"Indexed: {len(corpus.indexed)} new" in added.stdout, added.stdout
    reported = _reported(added.stderr)
    assert set(reported) == set(corpus.skipped), (reported, added.stderr)
    for path, fragment in corpus.skipped.items():
        assert fragment in reported[path], (path, reported[path])
    assert "Traceback" not in added.stderr

    listing = _qmd(ctx, "ls", "h")
    assert listing.returncode == 0, listing.stderr
    listed = sorted(line.split("qmd://h/", 1)[1] for line in listing.stdout.splitlines())
    assert listed == sorted(corpus.indexed)
    # what the listing leaves out, named with update's reasons (REQ-INDEX-LS-SKIPPED-001)
    assert listing.stderr.startswith(f"Not listed: {len(reported)} file(s) under qmd://h/ ")
    assert _reported("Skipped " + listing.stderr) == reported, listing.stderr
    for path, word in corpus.indexed.items():
        found = _qmd(ctx, "search", word, "--json")
        assert found.returncode == 0, found.stderr
        assert f"qmd://h/{path}" in found.stdout, (word, found.stdout)
    for secret in ("platypus", "secretword", "hiddenword", "pangolin"):
        assert "qmd://" not in _qmd(ctx, "search", secret, "--json").stdout

    # the next update neither fails nor changes anything, and still names the skipped files
    again = _qmd(ctx, "update")
    assert again.returncode == 0, again.stderr
    assert f"0 new, 0 updated, {len(corpus.indexed)} unchanged, 0 removed" in again.stdout
    assert set(_reported(again.stderr)) == set(corpus.skipped)
    # a folder that turns unreadable hides its files for now: they are kept, not removed
    os.chmod(corpus.root / "x.md", 0)
    try:
        hidden = _qmd(ctx, "update")
    finally:
        os.chmod(corpus.root / "x.md", 0o755)
    assert hidden.returncode == 0, hidden.stderr
    assert f"0 new, 0 updated, {len(corpus.indexed) - 1} unchanged, 0 removed" in hidden.stdout
    assert _reported(hidden.stderr)["x.md/"].startswith("folder not readable")
    assert "qmd://h/x.md/inner.md" in _qmd(ctx, "ls", "h").stdout
    status = _qmd(ctx, "status")
    assert status.returncode == 0 and "h (qmd://h/)" in status.stdout, status.stdout
    assert f"Total:    {len(corpus.indexed)} files indexed" in status.stdout
    report(
        f"\nhostile corpus ({ctx['user'].how}): tried {corpus.tried} entries: "
        f"{len(corpus.indexed)} indexed, {len(corpus.skipped)} skipped with a reason, "
        f"{len(corpus.silent)} blank skipped silently"
    )


@pytest.mark.parametrize("surface", [(), ("--compat", "2.8.3")], ids=["spec", "compat"])
def test_both_mcp_surfaces_answer_over_the_hostile_index(
    hostile: tuple[HostileCorpus, dict], surface: tuple[str, ...]
) -> None:
    corpus, ctx = hostile
    if _qmd(ctx, "ls", "h").returncode != 0 or not _qmd(ctx, "ls", "h").stdout.strip():
        assert _qmd(ctx, "collection", "add", str(corpus.root), "--name", "h").returncode == 0
    server = StdioServer(ctx["env"], *surface)
    try:
        server.initialize()
        tools = {t["name"] for t in server.request("tools/list")["result"]["tools"]}
        answered = 0
        for word in corpus.indexed.values():
            if "search" in tools:
                result = server.call("search", {"query": word})
            else:
                result = server.call(
                    "query", {"searches": [{"type": "lex", "query": word}], "rerank": False}
                )
            assert not result.get("isError"), result
            answered += 1
        result = server.call("multi_get", {"pattern": "**/*.md"})
        assert not result.get("isError"), result
        status = server.call("status", {})
        assert not status.get("isError"), status
        answered += 2
        assert server.process.poll() is None
        report(f"\nmcp {surface or 'spec'}: {answered} calls over the hostile index answered")
    finally:
        server.kill()


def test_a_file_that_turns_unreadable_leaves_the_index(tmp_path: Path) -> None:
    """Through the adapters: a document whose file can no longer be read is removed and
    reported, not kept stale and not silently dropped."""
    from adapters.bootstrap import build_app

    corpus = tmp_path / "c"
    _write(corpus / "a.md", b"# A\nalpha\n")
    _write(corpus / "b.md", b"# B\nbeta\n")
    app = build_app(env=fixture_env(tmp_path), with_models=False)
    try:
        _, counts = app.collections.add(str(corpus), "c")
        assert counts.indexed == 2
        (corpus / "b.md").write_bytes(b"\x00\x01binary now")
        result = app.collections.update(["c"])["c"]
        assert result.removed == 1 and [p.path for p in result.problems] == ["b.md"]
        assert "binary" in result.problems[0].reason
        assert [m.path for m in app.store.documents("c")] == ["a.md"]
    finally:
        app.close()
    assert stat.S_ISREG(os.stat(corpus / "b.md").st_mode)


def test_a_collection_folder_or_name_that_is_not_utf8_is_refused_clearly(
    tmp_path: Path,
) -> None:
    folder = os.path.join(os.fsencode(tmp_path), b"notes\xff")
    os.mkdir(folder)
    with open(os.path.join(folder, b"a.md"), "wb") as handle:
        handle.write(b"# a\n")
    env = {**fixture_env(tmp_path), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable.encode(), b"-m", b"adapters.cli.main", b"collection", b"add", folder],
        env=env,
        cwd=REPO,
        capture_output=True,
        timeout=120,
        check=False,
    )
    stderr = done.stderr.decode("utf-8")  # the message itself is valid UTF-8
    assert done.returncode == 1, stderr
    assert "Collection path is not valid UTF-8: " in stderr and "notes\\xff" in stderr
    assert "Traceback" not in stderr
    good = os.path.join(os.fsencode(tmp_path), b"good")
    os.mkdir(good)
    named = subprocess.run(
        [
            *(sys.executable.encode(), b"-m", b"adapters.cli.main"),
            *(b"collection", b"add", good, b"--name", b"bad\xffname"),
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert named.returncode == 1
    assert named.stderr.decode("utf-8").strip() == "Collection name is not valid UTF-8."
    status = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", "status"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert status.returncode == 0 and "No collections" in status.stdout


def test_a_missing_collection_folder_keeps_its_documents(tmp_path: Path) -> None:
    """An unmounted drive or a renamed folder is reported, not read as 'all deleted'."""
    folder = tmp_path / "notes"
    _write(folder / "a.md", b"# A\nalpha\n")
    _write(folder / "b.md", b"# B\nbeta\n")
    env = {**fixture_env(tmp_path), "PYTHONPATH": str(REPO)}

    def qmd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "adapters.cli.main", *args],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert qmd("collection", "add", str(folder), "--name", "n").returncode == 0
    folder.rename(tmp_path / "elsewhere")
    gone = qmd("update")
    assert gone.returncode == 0, gone.stderr
    assert "0 new, 0 updated, 0 unchanged, 0 removed" in gone.stdout
    assert f"(collection folder): not found: {folder}" in gone.stderr
    assert "Total:    2 files indexed" in qmd("status").stdout
    (tmp_path / "elsewhere").rename(folder)
    back = qmd("update")
    assert "0 new, 0 updated, 2 unchanged, 0 removed" in back.stdout and not back.stderr


@pytest.mark.parametrize("surface", [(), ("--compat", "2.8.3")], ids=["spec", "compat"])
def test_a_1_mb_cjk_query_is_refused_and_memory_stays_flat(
    tmp_path: Path, surface: tuple[str, ...]
) -> None:
    """It took the server to 1.17 GB: every CJK character is an FTS5 token of one phrase, and
    FTS5 loads each token's position list (docs/reliability.md). The query bound refuses it
    before FTS5 sees it, on both surfaces."""
    from tests.mcp_harness import build_fixture_index

    _, env = build_fixture_index(tmp_path)
    corpus_chars = sorted(
        {
            ch
            for path in (REPO / "fixtures" / "corpora" / "handbook").rglob("*.md")
            for ch in path.read_text(encoding="utf-8")
            if 0x4E00 <= ord(ch) <= 0x9FFF
        }
    )
    assert corpus_chars, "the handbook fixture holds Chinese documents"
    rng = random.Random(1)
    query = "".join(rng.choice(corpus_chars) for _ in range(350_000))  # 1.05 MB of UTF-8
    server = StdioServer(env, *surface)
    try:
        server.initialize()
        if surface:
            arguments: dict[str, object] = {
                "searches": [{"type": "lex", "query": query}],
                "rerank": False,
            }
            result = server.call("query", arguments, timeout=60)
        else:
            result = server.call("search", {"query": query}, timeout=60)
        assert result.get("isError"), str(result)[:300]
        assert "too long" in result["content"][0]["text"]
        with open(f"/proc/{server.process.pid}/status", encoding="ascii") as handle:
            peak = next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))
        assert peak < 200 * 1024, f"peak RSS {peak} KiB"
        assert server.request("ping")["result"] == {}
        report(f"1 MB CJK query on {surface or 'spec'}: refused, server peak RSS {peak} KiB")
    finally:
        server.kill()

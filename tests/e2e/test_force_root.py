"""`qmd mcp --force-root DIR` against escape attempts, on both surfaces, with the server started
from inside the root, outside it, and in the configuration folder (seed 001 INV-1).

The layout holds collections the root must hide: an absolute outside folder, a relative path in
`index.yml` (taken against the config folder, which is outside), a `~/` path (home is outside),
a symlink inside the root that leads out, and a file symlink inside an allowed folder. Every
reply is checked for anything of the outside: its content, titles, file and collection names,
folder paths and docids, unless the request itself carried that text (an echo reveals nothing).
A reference to an outside document that exists must be answered exactly like the same
reference to one that does not.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.mcp_harness import REPO, StdioServer, fixture_env

pytestmark = pytest.mark.models
EMBED_MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"

SECRET_BODY = "# Secret plan\n\nZEBRASECRET budget HIDDENMARK for the lantern kettles.\n"
DEEP_BODY = "# Deep secret\n\nHIDDENMARK deep ZEBRASECRET notes on kettles.\n"
OUTSIDE_COLLECTIONS = ("outsidecoll", "relcoll", "tildecoll", "linkcoll")


@dataclass(frozen=True)
class Layout:
    tmp: Path
    root: Path
    outside: Path
    env: dict[str, str]
    markers: tuple[str, ...]
    outside_docids: tuple[str, ...]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _docid(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:6]


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    if not EMBED_MODEL.is_file():
        pytest.fail(f"{EMBED_MODEL} missing: run scripts/prepare_models.py")
    tmp = tmp_path_factory.mktemp("force-root")
    root, outside = tmp / "permitted", tmp / "outside"
    env = fixture_env(tmp)
    env["QMD_EMBED_MODEL"] = str(EMBED_MODEL)
    home, config = Path(env["HOME"]), Path(env["QMD_CONFIG_DIR"])
    _write(root / "notes" / "alpha.md", "# Alpha\n\nInside notes about kettles and lanterns.\n")
    _write(root / "notes" / "guide" / "beta.md", "# Beta guide\n\nKettles boil water.\n")
    _write(root / "more" / "gamma.md", "# Gamma\n\nMore inside kettles.\n")
    _write(outside / "secret.md", SECRET_BODY)
    _write(outside / "sub" / "deep.md", DEEP_BODY)
    relsecret = SECRET_BODY.replace("plan", "relplan")
    tildesecret = SECRET_BODY.replace("plan", "tildeplan")
    _write(config / "reldir" / "relsecret.md", relsecret)
    _write(home / "tildedir" / "tildesecret.md", tildesecret)
    (root / "linkdir").symlink_to(outside)
    (root / "notes" / "escape.md").symlink_to(outside / "secret.md")
    # Hand-written index.yml: relative paths are taken against this file's folder.
    _write(
        config / "index.yml",
        "collections:\n"
        f"  notes:\n    path: {root / 'notes'}\n    pattern: '**/*.md'\n"
        "  relinside:\n    path: ../permitted/more\n    pattern: '**/*.md'\n"
        f"  outsidecoll:\n    path: {outside}\n    pattern: '**/*.md'\n"
        "  relcoll:\n    path: reldir\n    pattern: '**/*.md'\n"
        "  tildecoll:\n    path: ~/tildedir\n    pattern: '**/*.md'\n"
        f"  linkcoll:\n    path: {root / 'linkdir'}\n    pattern: '**/*.md'\n",
    )
    for args in (["update"], ["embed"]):
        done = subprocess.run(
            [sys.executable, "-m", "adapters.cli.main", *args],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    markers = (
        "ZEBRASECRET",
        "HIDDENMARK",
        "Secret plan",
        "relplan",
        "tildeplan",
        "Deep secret",
        str(outside),
        str(config / "reldir"),
        str(home / "tildedir"),
        "linkdir",
        "secret.md",
        "deep.md",
        "relsecret",
        "tildesecret",
        "escape.md",
        *OUTSIDE_COLLECTIONS,
    )
    docids = tuple({_docid(b) for b in (SECRET_BODY, DEEP_BODY, relsecret, tildesecret)})
    return Layout(tmp, root, outside, env, markers + docids, docids)


def _references(layout: Layout) -> list[str]:
    """Ways to name an outside document: paths, traversal, URIs, docids, symlinks, `~`."""
    root, outside = layout.root, layout.outside
    refs = [
        str(outside / "secret.md"),
        str(outside / "sub" / "deep.md"),
        f"{outside}/secret.md:1:5",
        "../outside/secret.md",
        "../../outside/secret.md",
        "notes/../../outside/secret.md",
        str(root / "notes" / ".." / ".." / "outside" / "secret.md"),
        str(root / "linkdir" / "secret.md"),
        str(root / "notes" / "escape.md"),
        "notes/escape.md",
        "escape.md",
        "secret.md",
        "sub/deep.md",
        "outsidecoll/secret.md",
        "linkcoll/secret.md",
        "linkcoll/sub/deep.md",
        "relcoll/relsecret.md",
        "tildecoll/tildesecret.md",
        "relsecret.md",
        "tildesecret.md",
        "~/tildedir/tildesecret.md",
        str(Path(layout.env["HOME"]) / "tildedir" / "tildesecret.md"),
        str(Path(layout.env["QMD_CONFIG_DIR"]) / "reldir" / "relsecret.md"),
        "qmd://outsidecoll/secret.md",
        "qmd://linkcoll/sub/deep.md",
        "qmd://relcoll/relsecret.md",
        "qmd://tildecoll/tildesecret.md",
        "qmd://notes/../outsidecoll/secret.md",
        "qmd://notes/%2e%2e/outsidecoll/secret.md",
        "qmd://notes/%2E%2E%2Foutsidecoll%2Fsecret.md",
        f"qmd://{outside}/secret.md",
    ]
    for docid in layout.outside_docids:
        refs += [f"#{docid}", docid, docid.upper(), f"#{docid}:1"]
    return refs


def _patterns(layout: Layout) -> list[str]:
    docid = layout.outside_docids[0]
    return [
        *_references(layout),
        "**/*",
        "*",
        "**/*.md",
        "**/secret*",
        "*secret*",
        "*/secret.md",
        "outsidecoll/*",
        "outsidecoll/**",
        "qmd://outsidecoll/**",
        "linkcoll/**/*.md",
        f"{layout.outside}/*.md",
        "../outside/*.md",
        "secret.md,notes/alpha.md",
        f"#{docid},notes/alpha.md",
        "relcoll/relsecret.md, tildecoll/tildesecret.md",
    ]


def _as_uri(ref: str) -> str:
    return ref if ref.startswith("qmd://") else "qmd://" + quote(ref, safe="/")


@dataclass
class Probe:
    surface: str
    where: str
    tried: int = 0
    escapes: list[str] | None = None

    def check(self, request: Any, reply: Any, markers: tuple[str, ...]) -> None:
        self.tried += 1
        sent, answered = json.dumps(request), json.dumps(reply, ensure_ascii=False)
        leaked = [m for m in markers if m in answered and m not in sent]
        if leaked:
            self.escapes = (self.escapes or []) + [f"{leaked} in reply to {sent}: {answered}"]


def _twin(ref: str) -> str | None:
    """The same reference to a document that does not exist."""
    return ref.replace("secret", "secrex") if "secret" in ref else None


def _exchanges(
    server: StdioServer, surface: str, layout: Layout
) -> Iterator[tuple[Any, Any, str | None]]:
    """(request, reply, twin reply) for every escape attempt on this surface."""

    def call(tool: str, arguments: dict[str, Any]) -> Any:
        return server.call(tool, arguments, timeout=60)

    def read(uri: str) -> Any:
        reply = server.request("resources/read", {"uri": uri}, timeout=60)
        return reply.get("result", reply.get("error"))

    for ref in _references(layout):
        twin = _twin(ref)
        for arguments in ({"file": ref}, {"file": ref, "fromLine": 1, "maxLines": 3}):
            reply = call("get", arguments)
            twin_reply = call("get", {**arguments, "file": twin}) if twin else None
            yield ("get", arguments), reply, json.dumps(twin_reply) if twin else None
        uri = _as_uri(ref)
        reply = read(uri)
        twin_reply = read(_as_uri(twin)) if twin else None
        yield ("resources/read", uri), reply, json.dumps(twin_reply) if twin else None
    for pattern in _patterns(layout):
        twin = _twin(pattern)
        reply = call("multi_get", {"pattern": pattern})
        twin_reply = call("multi_get", {"pattern": twin}) if twin else None
        yield ("multi_get", pattern), reply, json.dumps(twin_reply) if twin else None
    words = ["ZEBRASECRET", "secret plan", "HIDDENMARK deep", "kettles", "budget lantern"]
    if surface == "spec":
        for tool in ("search", "vsearch", "query"):
            for query in words:
                for extra in ({}, *({"collection": c} for c in OUTSIDE_COLLECTIONS)):
                    arguments = {"query": query, "minScore": 0, "limit": 50, **extra}
                    yield (tool, arguments), call(tool, arguments), None
    else:
        for query in words:
            for extra in ({}, {"collections": list(OUTSIDE_COLLECTIONS)}):
                arguments = {"query": query, "minScore": 0, "rerank": False, **extra}
                yield ("query", arguments), call("query", arguments), None
                typed = {
                    "searches": [
                        {"type": "lex", "query": query},
                        {"type": "vec", "query": query},
                    ],
                    "minScore": 0,
                    "rerank": False,
                    **extra,
                }
                yield ("query", typed), call("query", typed), None
    yield ("status", {}), call("status", {}), None
    yield ("tools/list", {}), server.request("tools/list", {}), None


@pytest.mark.parametrize("surface", ["spec", "compat"])
@pytest.mark.parametrize("where", ["inside-root", "outside-root", "config-folder"])
def test_nothing_outside_the_root_gets_out(
    layout: Layout, surface: str, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cwd = {
        "inside-root": layout.root / "notes",
        "outside-root": layout.tmp,
        "config-folder": Path(layout.env["QMD_CONFIG_DIR"]),
    }[where]
    args = ["--force-root", str(layout.root)]
    if surface == "compat":
        args += ["--compat", "2.8.3"]
    server = StdioServer(layout.env, *args, cwd=cwd)
    probe = Probe(surface, where)
    mismatched: list[str] = []
    try:
        hello = server.initialize()
        probe.check("initialize", hello, layout.markers)
        for request, reply, twin_reply in _exchanges(server, surface, layout):
            probe.check(request, reply, layout.markers)
            if twin_reply is not None:
                normalised = twin_reply.replace("secrex", "secret")
                if normalised != json.dumps(reply):
                    mismatched.append(f"{request}: {reply} vs twin {twin_reply}")
        with capsys.disabled():
            print(
                f"\nforce-root {surface} (server started {where}): {probe.tried} escape "
                f"attempts, {len(probe.escapes or [])} escaped, {len(mismatched)} existence leaks"
            )
        assert not probe.escapes, "\n".join(probe.escapes or [])
        assert not mismatched, "\n".join(mismatched)
        # Positive controls: what lies inside the root is still served.
        inside = server.call("get", {"file": "notes/alpha.md"})
        assert "Inside notes" in json.dumps(inside), inside
        relative_inside = server.call("get", {"file": "relinside/gamma.md"})
        assert "More inside kettles" in json.dumps(relative_inside), relative_inside
        status = json.dumps(server.call("status", {}))
        assert "notes" in status and "relinside" in status, status
        if surface == "spec":
            absolute = server.call("get", {"file": str(layout.outside / "secret.md")})
            assert absolute["structuredContent"]["error"]["code"] == "out-of-root", absolute
            found = server.call("vsearch", {"query": "kettles", "minScore": 0})
            assert found["structuredContent"]["results"], found
    finally:
        server.kill()

"""The scope guarantee, generated from the registry: on every surface, every tool declared as
naming a file or document (`Tool.paths`) cannot reach one outside the root, however the
reference is written (issue 35; seed 001 INV-1, REQ-SEC-SCOPE-001).

Each rig is wired as the composition root wires a server: the services scoped by one
`ScopePolicy` (`adapters.bootstrap.scoped_ports`) and the surface built from a
`SurfaceContext` carrying that same policy. A new surface or tool is covered by registering
or declaring it; the controls prove each aim is a real one (without a root it reaches the
outside document) and each declared argument really reads documents (inside, it does).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from adapters.fs.scope import ScopePolicy
from adapters.mcp.tools import NO_CLIENT, template_prefix
from adapters.mcp.wording import JsonRpcError
from tests.guarantees import Rig, path_arguments, served_surfaces, tool_examples

SECRET_WORD = "zanzibar"  # in the outside document's body only; no request carries it
SECRET_TITLE = "Classified"
INSIDE_TEXT = "The alpha note."
# The outside document's content hash (the rig's second document: 0xA2) and its docid.
OUTSIDE_DOCID = "a2a2a2"

DECLARED = [
    (surface, tool, argument)
    for surface in served_surfaces()
    for tool, arguments in path_arguments(surface).items()
    for argument in arguments
]
# Schema properties that name a file or document by their name: a tool taking one declares it.
PATH_LIKE = {"file", "files", "path", "paths", "pattern", "identifier", "docPaths", "pathPattern"}


def _rig(surface: str, tmp_path: Path, rooted: bool) -> Rig:
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "notes").mkdir(parents=True, exist_ok=True)
    elsewhere.mkdir(exist_ok=True)
    secret = f"# {SECRET_TITLE}\n\nThe {SECRET_WORD} ledger.\n"
    policy = ScopePolicy(str(root), home=str(tmp_path / "home")) if rooted else ScopePolicy()
    return Rig(
        surface,
        scope=policy,
        folders={"notes": str(root / "notes"), "vault": str(elsewhere)},
        extra=[("vault", "secret.md", secret)],
    )


def _outside_references(tmp_path: Path) -> list[str]:
    elsewhere = tmp_path / "elsewhere"
    return [
        str(elsewhere / "secret.md"),
        f"{tmp_path / 'root'}/../elsewhere/secret.md",
        "qmd://vault/secret.md",
        "vault/secret.md",
        "secret.md",
        f"#{OUTSIDE_DOCID}",
        OUTSIDE_DOCID,
        "vault/*.md",
        "**/secret.md",
        f"{elsewhere}/*.md",
        "vault/%",
        "%secret%",
        "#2",  # the outside document's chunk in the chunk tables
        "2",
    ]


INSIDE_REFERENCES = ["notes/alpha.md", "qmd://notes/alpha.md", "notes/*.md", "notes/%", "#1"]


def _call(rig: Rig, tool: str, argument: str, value: str) -> str:
    schema = next(t["inputSchema"] for t in rig.tools() if t["name"] == tool)
    kind = schema["properties"][argument].get("type")
    arguments: dict[str, Any] = dict(tool_examples(rig.surface_name)[tool])
    arguments[argument] = [value] if kind == "array" else value
    surface = rig.session().surface
    return json.dumps(surface.call_tool(tool, arguments, NO_CLIENT))


def test_some_tool_of_some_surface_declares_the_files_it_reads() -> None:
    surfaces = {surface for surface, _tool, _argument in DECLARED}
    assert {"spec", "projmem"} <= surfaces and any(s.startswith("compat") for s in surfaces)


@pytest.mark.parametrize("surface", served_surfaces())
def test_a_tool_taking_a_path_like_argument_declares_it(surface: str) -> None:
    declared = path_arguments(surface)
    for listed in Rig(surface).tools():
        named = PATH_LIKE & set(listed["inputSchema"].get("properties", {}))
        assert named <= set(declared.get(listed["name"], ())), (listed["name"], named)


@pytest.mark.parametrize(("surface", "tool", "argument"), DECLARED)
def test_a_declared_file_argument_reaches_nothing_outside_the_root(
    surface: str, tool: str, argument: str, tmp_path: Path
) -> None:
    rooted = _rig(surface, tmp_path, rooted=True)
    for reference in _outside_references(tmp_path):
        reply = _call(rooted, tool, argument, reference)
        assert SECRET_WORD not in reply and SECRET_TITLE not in reply, (reference, reply)
        if OUTSIDE_DOCID not in reference:
            assert OUTSIDE_DOCID not in reply, (reference, reply)
    # controls: inside the root the argument reads documents, and without a root the same
    # aims reach the outside one (so the refusals above are the scope's doing)
    inside = [_call(rooted, tool, argument, ref) for ref in INSIDE_REFERENCES]
    assert any(INSIDE_TEXT in reply for reply in inside), inside
    unrooted = _rig(surface, tmp_path, rooted=False)
    reached = [_call(unrooted, tool, argument, ref) for ref in _outside_references(tmp_path)]
    assert any(SECRET_WORD in reply for reply in reached), reached


@pytest.mark.parametrize("surface", served_surfaces())
def test_the_surface_context_carries_the_policy_the_services_were_scoped_with(
    surface: str, tmp_path: Path
) -> None:
    rig = _rig(surface, tmp_path, rooted=True)
    assert rig.context.scope is rig.app.scope
    assert [c.name for c in rig.services.store.list_collections()] == ["notes"]


def test_an_absolute_reference_outside_the_root_is_refused_by_the_context_s_policy(
    tmp_path: Path,
) -> None:
    # the default surface judges a filesystem path by its context's policy alone, before the
    # (scoped) index is asked: out-of-root whether or not anything is there (REQ-SPEC-ROOT-*)
    rig = _rig("spec", tmp_path, rooted=True)
    for reference in (str(tmp_path / "elsewhere" / "secret.md"), str(tmp_path / "nothing.md")):
        reply = json.loads(_call(rig, "get", "file", reference))
        assert reply["structuredContent"]["error"]["code"] == "out-of-root", reply


# -- resources: a URI names a document as a path argument does ------------------------------

# A template whose one variable has one of these names serves a document by its name (a
# topic and a query, memorize's `knowledge://`, name memory records: tests/e2e/test_scope_probe.py).
DOCUMENT_VARIABLES = {"path", "document_id"}


def _document_templates(surface: str) -> list[dict[str, Any]]:
    listed = Rig(surface).session().surface.resource_templates()
    return [
        template
        for template in listed
        if set(re.findall(r"\{\+?(\w+)\}", str(template["uriTemplate"]))) <= DOCUMENT_VARIABLES
    ]


TEMPLATED = [s for s in served_surfaces() if _document_templates(s)]


def _read(rig: Rig, document: str) -> str:
    """Read `document` through each of the surface's document templates (a failure, data or
    JSON-RPC error, is read as its text)."""
    surface = rig.session().surface
    replies = []
    for template in _document_templates(rig.surface_name):
        pattern = str(template["uriTemplate"])
        uri = template_prefix(template) + document + pattern[pattern.rindex("}") + 1 :]
        try:
            replies.append(json.dumps(surface.read_resource(uri)))
        except JsonRpcError as error:
            replies.append(str(error))
    return "\n".join(replies)


def test_the_surfaces_that_serve_documents_as_resources_are_probed() -> None:
    assert {"spec", "ldims"} <= set(TEMPLATED)


@pytest.mark.parametrize("surface", TEMPLATED)
def test_a_resource_uri_reaches_nothing_outside_the_root(surface: str, tmp_path: Path) -> None:
    outside = [
        "vault/secret.md",
        "vault%2Fsecret.md",
        OUTSIDE_DOCID,
        f"#{OUTSIDE_DOCID}",
        "notes/../vault/secret.md",
        str(tmp_path / "elsewhere" / "secret.md").lstrip("/"),
    ]
    rooted = _rig(surface, tmp_path, rooted=True)
    for document in outside:
        reply = _read(rooted, document)
        assert SECRET_WORD not in reply and SECRET_TITLE not in reply, (document, reply)
    assert INSIDE_TEXT in _read(rooted, "notes/alpha.md")
    unrooted = _rig(surface, tmp_path, rooted=False)
    assert any(SECRET_WORD in _read(unrooted, document) for document in outside)

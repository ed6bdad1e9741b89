"""`qmd skills list|get|path` and `qmd skill show|install`: the agent instructions that ship
with qmd (our own text, in `adapters/cli/skills/<name>/SKILL.md`)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable
from adapters.cli.runtime import out

BUNDLED = Path(__file__).resolve().parent.parent / "skills"
SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path

    @property
    def text(self) -> str:
        return (self.folder / SKILL_FILE).read_text(encoding="utf-8")


def skills_root() -> Path:
    """`QMD_SKILLS_DIR` (as the original) or the skills shipped in the package."""
    override = os.environ.get("QMD_SKILLS_DIR")
    return Path(override) if override else BUNDLED


def _description(text: str) -> str:
    """The `description:` line of the front matter."""
    if not text.startswith("---"):
        return ""
    for line in text.split("\n")[1:]:
        if line.strip() == "---":
            break
        if line.startswith("description:"):
            return line.partition(":")[2].strip()
    return ""


def discover() -> list[Skill]:
    root = skills_root()
    if not root.is_dir():
        return []
    found = []
    for folder in sorted(p for p in root.iterdir() if (p / SKILL_FILE).is_file()):
        text = (folder / SKILL_FILE).read_text(encoding="utf-8")
        found.append(Skill(folder.name, _description(text), folder))
    return found


def find(name: str) -> Skill:
    for skill in discover():
        if skill.name == name:
            return skill
    raise CommandError(f"Skill not found: {name}")


def _files(skill: Skill) -> list[tuple[str, str]]:
    """Every text file of a skill folder, SKILL.md first (for `get --full`)."""
    files = sorted(p for p in skill.folder.rglob("*") if p.is_file())
    files.sort(key=lambda p: p.name != SKILL_FILE)
    return [(str(p.relative_to(skill.folder)), p.read_text(encoding="utf-8")) for p in files]


def skills(args: argparse.Namespace) -> int:
    action = args.action or "list"
    if action == "list":
        found = discover()
        if args.json:
            listed = [{"name": s.name, "description": s.description} for s in found]
            out(json.dumps({"success": True, "data": listed}, indent=2) + "\n")
            return 0
        if not found:
            out("No skills found\n")
        width = max((len(s.name) for s in found), default=0)
        out("".join(f"  {s.name.ljust(width)}  {s.description}\n" for s in found))
        return 0
    if action == "path":
        targets = [find(n) for n in args.names] if args.names else discover()
        out("".join(f"{s.folder}\n" for s in targets) if targets else f"{skills_root()}\n")
        return 0
    if action == "get":
        targets = discover() if args.all else [find(n) for n in args.names]
        if not targets:
            raise CommandError("No skill name provided. Usage: qmd skills get <name>")
        if args.json:
            data: list[dict[str, object]] = []
            for s in targets:
                entry: dict[str, object] = {"name": s.name, "content": s.text}
                if args.full:
                    entry["files"] = [{"path": p, "content": c} for p, c in _files(s)]
                data.append(entry)
            out(json.dumps({"success": True, "data": data}, indent=2) + "\n")
            return 0
        for skill in targets:
            pieces = _files(skill) if args.full else [(SKILL_FILE, skill.text)]
            for path, content in pieces:
                if args.full or len(targets) > 1:
                    out(f"==> {skill.name}/{path} <==\n")
                out(content if content.endswith("\n") else content + "\n")
        return 0
    out(
        "Usage: qmd skills <list|get|path> [options]\n\n"
        "Commands:\n"
        "  list                 List bundled skills\n"
        "  get <name>           Print a bundled skill\n"
        "  get <name> --full    Include its other files\n"
        "  get --all            Print every bundled skill\n"
        "  path [name]          Print skill folder path(s)\n\n"
        "Options:\n"
        "  --json               Print structured JSON\n"
    )
    return 0


def install_folder(global_install: bool) -> Path:
    base = Path(os.environ.get("HOME") or Path.home()) if global_install else Path.cwd()
    return base / ".agents" / "skills" / "qmd"


def skill(args: argparse.Namespace) -> int:
    if args.action == "show":
        out("QMD Skill\n\n")
        text = find("qmd").text
        out(text if text.endswith("\n") else text + "\n")
        return 0
    if args.action == "install":
        source = find("qmd").folder
        target = install_folder(args.global_install)
        if target.exists() or target.is_symlink():
            if not args.force:
                raise CommandError(
                    f"Skill already installed at {target} (use --force to replace it)"
                )
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, target)
        out(f"✓ Installed QMD skill to {target}\n")
        return 0
    out(
        "Usage: qmd skill <show|install> [options]\n\n"
        "Commands:\n"
        "  show                 Print the QMD skill\n"
        "  install              Install the QMD skill into ./.agents/skills/qmd\n\n"
        "Options:\n"
        "  --global             Install into ~/.agents/skills/qmd\n"
        "  -f, --force          Replace an existing install\n"
    )
    return 0


def register(table: CommandTable) -> None:
    listing = table.command("skills", skills, "list and print the bundled agent skills")
    listing.add_argument("action", nargs="?", choices=("list", "get", "path", "help"))
    listing.add_argument("names", nargs="*", metavar="NAME")
    listing.add_argument("--json", action="store_true", help="structured JSON")
    listing.add_argument("--full", action="store_true", help="include every file of a skill")
    listing.add_argument("--all", action="store_true", help="every skill (with get)")
    one = table.command("skill", skill, "show or install the QMD agent skill")
    one.add_argument("action", nargs="?", choices=("show", "install", "help"))
    one.add_argument(
        "--global", dest="global_install", action="store_true", help="install under ~/.agents"
    )
    one.add_argument("-f", "--force", action="store_true", help="replace an existing install")

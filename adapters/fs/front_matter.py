"""Front matter: the YAML block between `---` lines at the top of a markdown file."""

from __future__ import annotations

import re

from domain.filters import MetaValue
from domain.metadata import normalize

MAX_FRONT_MATTER = 64 * 1024
_BLOCK = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)


class YamlFrontMatter:
    """`FrontMatterReader` with PyYAML's safe loader; a block that is not a YAML mapping (or
    not YAML at all) gives no fields rather than an error: the document still indexes."""

    def read(self, text: str) -> dict[str, MetaValue]:
        match = _BLOCK.match(text[: MAX_FRONT_MATTER + 8])
        if match is None:
            return {}
        import yaml  # only for a document that has a front matter block

        try:
            data = yaml.safe_load(match.group(1))
        except yaml.YAMLError:
            return {}
        except RecursionError:
            return {}
        return normalize(data) if isinstance(data, dict) else {}

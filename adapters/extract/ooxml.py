"""Office Open XML parts the parser libraries do not read: equations (OMML), charts, SmartArt,
drawing text, comments; and the package checks that name what a file is when a library
cannot open it (encrypted, legacy binary, Strict OOXML).

Everything here reads XML with lxml (a dependency of python-docx, python-pptx and openpyxl)
and works on bytes or on elements the libraries already parsed (REQ-EXTRACT-002,
REQ-EXTRACT-012, REQ-EXTRACT-013).
"""

from __future__ import annotations

import io
import re
import unicodedata
import zipfile
from collections.abc import Iterator
from typing import Any

M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
DGM = "{http://schemas.openxmlformats.org/drawingml/2006/diagram}"
R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
CHART_URI = "http://schemas.openxmlformats.org/drawingml/2006/chart"
DIAGRAM_URI = "http://schemas.openxmlformats.org/drawingml/2006/diagram"

# ----------------------------------------------------------------------- what the file is

_CFB_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an OLE compound file
_ENCRYPTED_STREAMS = ("EncryptionInfo".encode("utf-16-le"), "EncryptedPackage".encode("utf-16-le"))
_STRICT_PREFIX = b"http://purl.oclc.org/ooxml/"

# Strict OOXML (ISO/IEC 29500 Strict) names the same parts and elements under other
# namespaces; with these replaced, the Transitional readers read it (REQ-EXTRACT-013).
_STRICT_TO_TRANSITIONAL = (
    (b"http://purl.oclc.org/ooxml/officeDocument/relationships/officeDocument",
     b"http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"),
    (b"http://purl.oclc.org/ooxml/officeDocument/relationships/metadata/core-properties",
     b"http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties"),
    (b"http://purl.oclc.org/ooxml/officeDocument/relationships/extendedProperties",
     b"http://schemas.openxmlformats.org/officeDocument/2006/relationships/extended-properties"),
    (b"http://purl.oclc.org/ooxml/officeDocument/relationships",
     b"http://schemas.openxmlformats.org/officeDocument/2006/relationships"),
    (b"http://purl.oclc.org/ooxml/officeDocument/extendedProperties",
     b"http://schemas.openxmlformats.org/officeDocument/2006/extended-properties"),
    (b"http://purl.oclc.org/ooxml/officeDocument/math",
     b"http://schemas.openxmlformats.org/officeDocument/2006/math"),
    (b"http://purl.oclc.org/ooxml/wordprocessingml/main",
     b"http://schemas.openxmlformats.org/wordprocessingml/2006/main"),
    (b"http://purl.oclc.org/ooxml/spreadsheetml/main",
     b"http://schemas.openxmlformats.org/spreadsheetml/2006/main"),
    (b"http://purl.oclc.org/ooxml/presentationml/main",
     b"http://schemas.openxmlformats.org/presentationml/2006/main"),
    (b"http://purl.oclc.org/ooxml/drawingml/wordprocessingDrawing",
     b"http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"),
    (b"http://purl.oclc.org/ooxml/drawingml/spreadsheetDrawing",
     b"http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"),
    (b"http://purl.oclc.org/ooxml/drawingml/chart",
     b"http://schemas.openxmlformats.org/drawingml/2006/chart"),
    (b"http://purl.oclc.org/ooxml/drawingml/diagram",
     b"http://schemas.openxmlformats.org/drawingml/2006/diagram"),
    (b"http://purl.oclc.org/ooxml/drawingml/picture",
     b"http://schemas.openxmlformats.org/drawingml/2006/picture"),
    (b"http://purl.oclc.org/ooxml/drawingml/main",
     b"http://schemas.openxmlformats.org/drawingml/2006/main"),
    (b"http://purl.oclc.org/ooxml/officeDocument/sharedTypes",
     b"http://schemas.openxmlformats.org/officeDocument/2006/sharedTypes"),
)  # fmt: skip


def compound_file_kind(path: str) -> str | None:
    """For a file that is not a zip: 'encrypted' when it is an OLE compound file holding an
    encrypted Office package (how Office saves a password-protected DOCX/PPTX/XLSX),
    'legacy' for any other compound file (a .doc/.xls/.ppt under an OOXML name), else None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
            if head[:8] != _CFB_MAGIC:
                return None
            # Stream names live in the directory: its first sector (named in the header) holds
            # the root's first entries, where Office puts EncryptionInfo and EncryptedPackage;
            # the file's start is read too, for writers that put the directory there.
            sector = 1 << min(int.from_bytes(head[30:32], "little"), 16)
            first = int.from_bytes(head[48:52], "little")
            body = handle.read(1024 * 1024)
            handle.seek((first + 1) * sector)
            body += handle.read(4 * sector)
    except (OSError, ValueError, OverflowError):
        return None
    if any(name in body for name in _ENCRYPTED_STREAMS):
        return "encrypted"
    return "legacy"


def is_strict(archive: zipfile.ZipFile) -> bool:
    """Whether the package is Strict OOXML: its root relationships use the Strict names."""
    try:
        return _STRICT_PREFIX in archive.read("_rels/.rels")
    except KeyError:
        return False


def transitional_copy(archive: zipfile.ZipFile) -> io.BytesIO:
    """The package with Strict namespaces replaced by their Transitional names, in memory
    (the caller has checked its size against the zip-bomb limits)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as copy:
        for entry in archive.infolist():
            data = archive.read(entry)
            if entry.filename.endswith((".xml", ".rels")):
                for strict, transitional in _STRICT_TO_TRANSITIONAL:
                    data = data.replace(strict, transitional)
            copy.writestr(entry, data)
    out.seek(0)
    return out


# ------------------------------------------------------------------------------ equations

_FUNCTIONS = frozenset(
    ("sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "log", "ln", "lg",
     "exp", "lim", "max", "min", "sup", "inf", "det")
)  # fmt: skip
_SYMBOLS = {
    "±": r"\pm", "∓": r"\mp", "×": r"\times", "÷": r"\div", "·": r"\cdot", "∙": r"\cdot",
    "≤": r"\leq", "≥": r"\geq", "≠": r"\neq", "≈": r"\approx", "≡": r"\equiv", "∞": r"\infty",
    "→": r"\rightarrow", "←": r"\leftarrow", "⇒": r"\Rightarrow", "⇔": r"\Leftrightarrow",
    "∂": r"\partial", "∇": r"\nabla", "∈": r"\in", "∉": r"\notin", "⊂": r"\subset",
    "∪": r"\cup", "∩": r"\cap", "∀": r"\forall", "∃": r"\exists", "∑": r"\sum", "∏": r"\prod",
    "∫": r"\int", "∬": r"\iint", "∮": r"\oint", "√": r"\sqrt", "…": r"\ldots", "⋯": r"\cdots",
    "−": "-", "∗": "*",
}  # fmt: skip
_NARY = {"∑": r"\sum", "∏": r"\prod", "∫": r"\int", "∬": r"\iint", "∭": r"\iiint", "∮": r"\oint",
         "⋃": r"\bigcup", "⋂": r"\bigcap"}  # fmt: skip


def _symbol(char: str) -> str:
    if char in _SYMBOLS:
        return _SYMBOLS[char] + " "
    name = unicodedata.name(char, "")
    if name.startswith("GREEK SMALL LETTER "):
        return "\\" + name.rsplit(" ", 1)[1].lower() + " "
    if name.startswith("GREEK CAPITAL LETTER "):
        return "\\" + name.rsplit(" ", 1)[1].capitalize() + " "
    if name.startswith(("MATHEMATICAL ITALIC SMALL ", "MATHEMATICAL ITALIC CAP")):
        return unicodedata.normalize("NFKC", char)
    return char


def _math_text(text: str) -> str:
    return "".join(_symbol(ch) for ch in text)


def _child(element: Any, name: str) -> Any:
    return element.find(M + name)


def _arg(element: Any, name: str) -> str:
    found = _child(element, name)
    return _omml(found) if found is not None else ""


def _prop(element: Any, props: str, name: str, default: str) -> str:
    holder = _child(element, props)
    found = holder.find(M + name) if holder is not None else None
    if found is None:
        return default
    return str(found.get(M + "val", default))


def _omml(element: Any) -> str:
    """An OMML element as LaTeX, the linear form most readers and searchers know."""
    parts: list[str] = []
    for child in element:
        tag = child.tag
        if not isinstance(tag, str) or tag.endswith("Pr"):
            continue  # properties: fonts, alignment, the control character's style
        local = tag.rsplit("}", 1)[-1]
        if tag == M + "r":
            texts = (t.text or "" for t in child.iter(M + "t"))
            text = "".join(texts)
            stripped = text.strip()
            parts.append("\\" + stripped + " " if stripped in _FUNCTIONS else _math_text(text))
        elif local == "f":
            parts.append(r"\frac{" + _arg(child, "num") + "}{" + _arg(child, "den") + "}")
        elif local == "sSup":
            parts.append("{" + _arg(child, "e") + "}^{" + _arg(child, "sup") + "}")
        elif local == "sSub":
            parts.append("{" + _arg(child, "e") + "}_{" + _arg(child, "sub") + "}")
        elif local == "sSubSup":
            parts.append(
                "{"
                + _arg(child, "e")
                + "}_{"
                + _arg(child, "sub")
                + "}^{"
                + _arg(child, "sup")
                + "}"
            )
        elif local == "sPre":
            parts.append(
                "{}_{" + _arg(child, "sub") + "}^{" + _arg(child, "sup") + "}" + _arg(child, "e")
            )
        elif local == "rad":
            degree = _arg(child, "deg")
            root = r"\sqrt[" + degree + "]" if degree.strip() else r"\sqrt"
            parts.append(root + "{" + _arg(child, "e") + "}")
        elif local == "d":
            opening = _prop(child, "dPr", "begChr", "(")
            closing = _prop(child, "dPr", "endChr", ")")
            separator = _prop(child, "dPr", "sepChr", "|")
            inner = separator.join(_omml(e) for e in child.findall(M + "e"))
            parts.append(r"\left" + (opening or ".") + inner + r"\right" + (closing or "."))
        elif local == "nary":
            operator = _prop(child, "naryPr", "chr", "∫")
            text = _NARY.get(operator, _math_text(operator).strip())
            sub, sup = _arg(child, "sub"), _arg(child, "sup")
            text += ("_{" + sub + "}" if sub.strip() else "") + (
                "^{" + sup + "}" if sup.strip() else ""
            )
            parts.append(text + " " + _arg(child, "e"))
        elif local == "func":
            name = _arg(child, "fName").strip()
            parts.append(name + " " + _arg(child, "e"))
        elif local in ("limLow", "limUpp"):
            mark = "_" if local == "limLow" else "^"
            parts.append("{" + _arg(child, "e") + "}" + mark + "{" + _arg(child, "lim") + "}")
        elif local == "m":  # a matrix: rows of cells
            rows = (" & ".join(_omml(e) for e in row.findall(M + "e")) for row in child)
            parts.append(r"\begin{matrix}" + r" \\ ".join(rows) + r"\end{matrix}")
        elif local == "eqArr":
            parts.append(r" \\ ".join(_omml(e) for e in child.findall(M + "e")))
        else:  # acc, bar, box, borderBox, groupChr, phant, e, num, …: their content
            parts.append(_omml(child))
    return "".join(parts)


def omml_latex(math: Any) -> str:
    """An `m:oMath` (or `m:oMathPara`) as LaTeX, spaces collapsed."""
    if math.tag == M + "oMathPara":
        text = " ".join(omml_latex(m) for m in math.iter(M + "oMath"))
    else:
        text = _omml(math)
    return re.sub(r"\s+", " ", text).strip()


# ---------------------------------------------------------------------- charts and SmartArt

_CHART_KINDS = {
    "barChart": "Bar chart", "bar3DChart": "Bar chart", "lineChart": "Line chart",
    "line3DChart": "Line chart", "pieChart": "Pie chart", "pie3DChart": "Pie chart",
    "doughnutChart": "Doughnut chart", "areaChart": "Area chart", "area3DChart": "Area chart",
    "scatterChart": "Scatter chart", "bubbleChart": "Bubble chart", "radarChart": "Radar chart",
    "stockChart": "Stock chart", "surfaceChart": "Surface chart", "ofPieChart": "Pie chart",
}  # fmt: skip


def _points(holder: Any) -> list[str]:
    """The cached values of a `c:cat`/`c:val`/`c:tx` reference or literal, by point index."""
    if holder is None:
        return []
    found: dict[int, str] = {}
    for point in holder.iter(C + "pt"):
        value = point.find(C + "v")
        try:
            found[int(point.get("idx", "0"))] = (value.text or "") if value is not None else ""
        except ValueError:
            continue
    if not found:
        plain = holder.find(".//" + C + "v")
        return [plain.text or ""] if plain is not None else []
    return [found.get(i, "") for i in range(max(found) + 1)]


def chart_text(xml: bytes) -> str:
    """A chart part as text: its title, its kind and its data (categories by series) as a
    table: the words and numbers a reader sees on it."""
    from lxml import etree

    root = etree.fromstring(xml, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    lines: list[str] = []
    chart = root.find(C + "chart")
    if chart is None:
        return ""
    title = chart.find(C + "title")
    if title is not None:
        text = " ".join(t.text or "" for t in title.iter(A + "t")).strip()
        if text:
            lines.append(text)
    plot_area = chart.find(C + "plotArea")
    for plot in plot_area if plot_area is not None else ():
        kind = _CHART_KINDS.get(str(plot.tag).rsplit("}", 1)[-1])
        if kind is None:
            continue
        lines.append(kind)
        names: list[str] = []
        columns: list[list[str]] = []
        categories: list[str] = []
        for series in plot.findall(C + "ser"):
            name = _points(series.find(C + "tx"))
            names.append(name[0] if name else "")
            values = _points(series.find(C + "val")) or _points(series.find(C + "yVal"))
            columns.append(values)
            categories = (
                categories or _points(series.find(C + "cat")) or _points(series.find(C + "xVal"))
            )
        height = max([len(categories), *(len(c) for c in columns)], default=0)
        rows = [["", *names]]
        for index in range(height):
            label = categories[index] if index < len(categories) else ""
            rows.append([label, *(c[index] if index < len(c) else "" for c in columns)])
        if columns:
            lines.append(markdown_table(rows))
    for axis_title in root.iter(C + "title"):
        if axis_title is title:
            continue
        text = " ".join(t.text or "" for t in axis_title.iter(A + "t")).strip()
        if text:
            lines.append(text)
    return "\n\n".join(lines)


def diagram_text(xml: bytes) -> str:
    """A SmartArt data part as a list: the text of each of its nodes, in document order."""
    from lxml import etree

    root = etree.fromstring(xml, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    items: list[str] = []
    for point in root.iter(DGM + "pt"):
        if point.get("type", "node") not in ("node", "asst"):
            continue  # connectors and the document node carry no reader text
        body = point.find(DGM + "t")
        if body is None:
            continue
        for paragraph in body.iter(A + "p"):
            text = "".join(t.text or "" for t in paragraph.iter(A + "t")).strip()
            if text:
                items.append("- " + text)
    return "\n".join(items)


def drawing_shapes_text(xml: bytes) -> list[str]:
    """The text of shapes and text boxes in a spreadsheet drawing part (`xdr:sp` bodies)."""
    from lxml import etree

    root = etree.fromstring(xml, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    out: list[str] = []
    for body in _drawing_bodies(root):
        paragraphs = (
            "".join(t.text or "" for t in p.iter(A + "t")).strip() for p in body.iter(A + "p")
        )
        text = "\n".join(p for p in paragraphs if p)
        if text:
            out.append(text)
    return out


def _drawing_bodies(root: Any) -> Iterator[Any]:
    for element in root.iter():
        if isinstance(element.tag, str) and element.tag.endswith("}txBody"):
            yield element


# -------------------------------------------------------------------------------- comments


def comment_line(author: str, when: str, text: str, initials: str = "") -> str:
    """One comment as the extracted text shows it: `[author: Name (NI), time: T]: text`."""
    who = author.strip() or "unknown"
    if initials.strip():
        who += f" ({initials.strip()})"
    head = f"author: {who}" + (f", time: {when.strip()}" if when.strip() else "")
    return f"[{head}]: {' '.join(text.split())}"


def paragraphs_text(element: Any, namespace: str) -> str:
    """The text of an element's paragraphs (`p` elements with `t` runs, in `namespace`)."""
    lines = (
        "".join(t.text or "" for t in p.iter(namespace + "t")).strip()
        for p in element.iter(namespace + "p")
    )
    return " ".join(line for line in lines if line)


def markdown_table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    cells = [[c.replace("|", "\\|").replace("\n", " ") for c in r] + [""] * (width - len(r))
             for r in rows]  # fmt: skip
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in cells[1:]]
    return "\n".join(lines)

"""picomatch-compatible glob matching and `multi_get` pattern classification.

A glob is translated into a small automaton (a Thompson NFA) and run over the path one
character at a time, keeping the set of live states: time is linear in the path for a given
pattern (at most path length x pattern size), whatever the pattern, so no glob can make a
lookup backtrack exponentially (`*a*a*a*...*b`; issue 11). Transitions are cached per state
set, so matching the usual patterns over many paths costs one dict lookup per character.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

# -- the pattern as a tree ---------------------------------------------------------------


@dataclass(frozen=True)
class _Chars:
    """One character: `lit` equal to `data`, `not` none of `data`, `class` a regex class."""

    kind: str
    data: str
    compiled: re.Pattern[str] | None = None

    def test(self, ch: str) -> bool:
        if self.kind == "lit":
            return ch == self.data
        if self.kind == "not":
            return ch not in self.data
        assert self.compiled is not None
        return self.compiled.fullmatch(ch) is not None


@dataclass(frozen=True)
class _Seq:
    items: tuple[_Node, ...]


@dataclass(frozen=True)
class _Alt:
    options: tuple[_Node, ...]


@dataclass(frozen=True)
class _Repeat:
    """`item` at least `least` (0 or 1) times, at most once unless `many`."""

    item: _Node
    least: int
    many: bool


@dataclass(frozen=True)
class _Assert:
    """`not-dot`: the next character is not `.` (or there is none); `not-end`: there is one."""

    kind: str


@dataclass(frozen=True)
class _NotAhead:
    """No prefix of the rest of the path matches `item` (picomatch's `!(…)` look-ahead)."""

    item: _Node


_Node = _Chars | _Seq | _Alt | _Repeat | _Assert | _NotAhead


def _lit(text: str) -> _Node:
    return _Seq(tuple(_Chars("lit", ch) for ch in text))


def _class_node(source: str) -> _Chars:
    return _Chars("class", source, re.compile(source, re.DOTALL))


_NOT_SLASH = _Chars("not", "/")
_STAR = _Repeat(_NOT_SLASH, 0, True)
# Any run of segments none of which starts with a dot (what a globstar may cross).
_NO_DOT_SEGMENT = _Seq((_Assert("not-dot"), _STAR))
_GLOBSTAR_BODY = _Seq(
    (_NO_DOT_SEGMENT, _Repeat(_Seq((_Chars("lit", "/"), _NO_DOT_SEGMENT)), 0, True))
)
_EXTGLOB_REPEAT = {"@": (1, False), "*": (0, True), "+": (1, True), "?": (0, False)}


def _find_close(pattern: str, start: int, opener: str, closer: str) -> int:
    """Index of the bracket closing the one at `start`, honouring nesting and escapes."""
    depth = 0
    i = start
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _split_top(body: str, separator: str) -> list[str]:
    """Split on `separator` outside any (), {} or [] nesting."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            current.append(body[i : i + 2])
            i += 2
            continue
        if ch in "({[":
            depth += 1
        elif ch in ")}]" and depth > 0:
            depth -= 1
        if ch == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _brace_range(body: str) -> _Node | None:
    """picomatch's `{x..y}`: a character class `[x-y]` built from the raw ends.

    So `{1..3}` is one digit 1-3 and `{1..10}` is `[1-10]` (the digits 1 and 0), exactly
    as picomatch compiles them; zero-padded ends (`{01..03}`) are kept as literal text.
    """
    match = re.fullmatch(r"([A-Za-z]|[1-9][0-9]*|0)\.\.([A-Za-z]|[1-9][0-9]*|0)", body)
    if match is None:
        if re.fullmatch(r"[0-9]+\.\.[0-9]+", body):
            return _lit(body)
        return None
    lo, hi = match.group(1), match.group(2)
    if len(lo) == 1 and len(hi) == 1 and lo > hi:
        lo, hi = hi, lo
    return _class_node(f"[{lo}-{hi}]")


def _class(pattern: str, start: int) -> tuple[_Node, int] | None:
    """Translate `[...]` at `start`; None when it never closes (then `[` is literal)."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1  # a leading `]` is a member, not the end
    while i < len(pattern) and pattern[i] != "]":
        if pattern.startswith("[:", i):
            posix_end = pattern.find(":]", i + 2)
            if posix_end > 0:
                i = posix_end + 2
                continue
        i += 2 if pattern[i] == "\\" else 1
    if i >= len(pattern):
        return None
    body = pattern[start + 1 : i]
    end = i + 1
    if body.startswith("^"):
        members = _class_members(body[1:])
        return _class_node(f"[^{members}/]"), end
    if re.fullmatch(r"(?:\[:[a-z]+:\])+", body):
        return _class_node(f"[{_class_members(body)}]"), end
    # picomatch accepts the bracket text literally too, and reads `!` as a plain member.
    return _Alt((_lit(pattern[start:end]), _class_node(f"[{_class_members(body)}]"))), end


def _class_members(body: str) -> str:
    posix = {
        "[:alpha:]": "a-zA-Z",
        "[:digit:]": "0-9",
        "[:alnum:]": "a-zA-Z0-9",
        "[:upper:]": "A-Z",
        "[:lower:]": "a-z",
        "[:space:]": r" \t\r\n\v\f",
    }
    out: list[str] = []
    i = 0
    while i < len(body):
        for name, members in posix.items():
            if body.startswith(name, i):
                out.append(members)
                i += len(name)
                break
        else:
            ch = body[i]
            if ch == "\\" and i + 1 < len(body):
                out.append(re.escape(body[i + 1]))
                i += 2
                continue
            out.append("-" if ch == "-" else re.escape(ch))
            i += 1
    return "".join(out)


def _translate(pattern: str, in_group: bool) -> _Node:
    """The tree for `pattern`; `in_group` relaxes the dot rule as picomatch does."""
    out: list[_Node] = []
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        seg_start = i == 0 or pattern[i - 1] == "/"
        if ch == "\\":
            out.append(_Chars("lit", pattern[i + 1] if i + 1 < n else "\\"))
            i += 2
            continue
        if ch in "@*+?!" and i + 1 < n and pattern[i + 1] == "(":
            close = _find_close(pattern, i + 1, "(", ")")
            if close > 0:
                alternatives = _Alt(
                    tuple(_translate(alt, True) for alt in _split_top(pattern[i + 2 : close], "|"))
                )
                if ch == "!":
                    # picomatch only looks ahead here: `!(a).md` rejects anything starting "a".
                    out.append(_Seq((_NotAhead(alternatives), _STAR)))
                else:
                    least, many = _EXTGLOB_REPEAT[ch]
                    out.append(_Repeat(alternatives, least, many))
                i = close + 1
                continue
        if ch == "*":
            run_end = i
            while run_end < n and pattern[run_end] == "*":
                run_end += 1
            seg_end = run_end == n or pattern[run_end] == "/"
            if run_end - i >= 2 and seg_start and seg_end and not in_group:
                i = _globstar(pattern, i, run_end, out)
                continue
            if seg_start and not in_group:
                out += [_Assert("not-dot"), _Assert("not-end")]
            out.append(_STAR)
            i = run_end
            continue
        if ch == "?":
            out.append(_Chars("not", "./") if seg_start and not in_group else _NOT_SLASH)
            i += 1
            continue
        if ch == "[":
            translated = _class(pattern, i)
            if translated is not None:
                out.append(translated[0])
                i = translated[1]
                continue
        if ch == "{":
            close = _find_close(pattern, i, "{", "}")
            if close > 0:
                body = pattern[i + 1 : close]
                brace_range = _brace_range(body)
                if brace_range is not None:
                    out.append(brace_range)
                    i = close + 1
                    continue
                options = _split_top(body, ",")
                if len(options) > 1:
                    out.append(_Alt(tuple(_translate(o, True) for o in options)))
                    i = close + 1
                    continue
        out.append(_Chars("lit", ch))
        i += 1
    return _Seq(tuple(out))


def _globstar(pattern: str, start: int, run_end: int, out: list[_Node]) -> int:
    """Emit a whole-segment `**`; returns the index to continue from."""
    at_end = run_end == len(pattern)
    if at_end and start > 0:
        # `a/**`: `a`, `a/` or anything below it; drop the `/` already emitted.
        out.pop()
        out.append(_Repeat(_Seq((_Chars("lit", "/"), _Repeat(_GLOBSTAR_BODY, 0, False))), 0, False))
        return run_end
    if at_end:
        out += [_Assert("not-end"), _GLOBSTAR_BODY]
        return run_end
    # `**/` (leading or in the middle): zero or more dot-free segments, each with its `/`.
    out.append(_Repeat(_Seq((_NO_DOT_SEGMENT, _Chars("lit", "/"))), 0, True))
    return run_end + 1


# -- the automaton ---------------------------------------------------------------------------

# Instructions: ("char", _Chars, next) | ("split", a, b) | ("jmp", a) | ("assert", kind, next)
# | ("notahead", _Program, next) | ("match",)
_Instruction = tuple[object, ...]
_END = ""  # the "character" seen past the end of the path
_CACHE_LIMIT = 4096


@dataclass
class _Program:
    code: list[_Instruction]
    looks_ahead: bool
    _steps: dict[tuple[frozenset[int], str], frozenset[int]] = field(default_factory=dict)
    _accepts: dict[frozenset[int], bool] = field(default_factory=dict)


def _emit(node: _Node, code: list[_Instruction]) -> bool:
    """Append `node`'s instructions; True when it contains a look-ahead."""
    if isinstance(node, _Chars):
        code.append(("char", node, len(code) + 1))
        return False
    if isinstance(node, _Assert):
        code.append(("assert", node.kind, len(code) + 1))
        return False
    if isinstance(node, _NotAhead):
        code.append(("notahead", _compile(node.item), len(code) + 1))
        return True
    if isinstance(node, _Seq):
        found = False
        for item in node.items:
            found = _emit(item, code) or found
        return found
    if isinstance(node, _Alt):
        found = False
        jumps: list[int] = []
        for option in node.options[:-1]:
            split = len(code)
            code.append(("split", split + 1, -1))
            found = _emit(option, code) or found
            jumps.append(len(code))
            code.append(("jmp", -1))
            code[split] = ("split", split + 1, len(code))
        if node.options:
            found = _emit(node.options[-1], code) or found
        for jump in jumps:
            code[jump] = ("jmp", len(code))
        return found
    # _Repeat
    if node.least == 1 and not node.many:
        return _emit(node.item, code)
    if node.least == 1:  # item, then loop back or go on
        top = len(code)
        found = _emit(node.item, code)
        code.append(("split", top, len(code) + 1))
        return found
    split = len(code)
    code.append(("split", split + 1, -1))
    found = _emit(node.item, code)
    if node.many:
        code.append(("jmp", split))
    code[split] = ("split", split + 1, len(code))
    return found


def _compile(node: _Node) -> _Program:
    code: list[_Instruction] = []
    looks_ahead = _emit(node, code)
    code.append(("match",))
    return _Program(code, looks_ahead)


def _closure(program: _Program, kernel: frozenset[int], text: str, pos: int) -> list[int]:
    """The `char`/`match` instructions reachable from `kernel` without reading a character."""
    code = program.code
    ch = text[pos] if pos < len(text) else _END
    seen: set[int] = set()
    reached: list[int] = []
    stack = list(kernel)
    while stack:
        pc = stack.pop()
        if pc in seen:
            continue
        seen.add(pc)
        instruction = code[pc]
        op = instruction[0]
        if op == "char" or op == "match":
            reached.append(pc)
        elif op == "split":
            stack += [instruction[2], instruction[1]]  # type: ignore[list-item]
        elif op == "jmp":
            stack.append(instruction[1])  # type: ignore[arg-type]
        elif op == "assert":
            kind = instruction[1]
            if (kind == "not-dot" and ch != ".") or (kind == "not-end" and ch != _END):
                stack.append(instruction[2])  # type: ignore[arg-type]
        elif not _prefix_matches(instruction[1], text, pos):  # type: ignore[arg-type]
            stack.append(instruction[2])  # type: ignore[arg-type]
    return reached


def _advance(program: _Program, reached: Sequence[int], ch: str) -> frozenset[int]:
    following: set[int] = set()
    for pc in reached:
        instruction = program.code[pc]
        if instruction[0] == "char":
            chars, next_pc = instruction[1], instruction[2]
            if isinstance(chars, _Chars) and isinstance(next_pc, int) and chars.test(ch):
                following.add(next_pc)
    return frozenset(following)


def _prefix_matches(program: _Program, text: str, pos: int) -> bool:
    """Whether `program` matches some prefix of `text[pos:]` (for `!(…)`)."""
    kernel = frozenset({0})
    while True:
        reached = _closure(program, kernel, text, pos)
        if any(program.code[pc][0] == "match" for pc in reached):
            return True
        if pos >= len(text):
            return False
        kernel = _advance(program, reached, text[pos])
        if not kernel:
            return False
        pos += 1


def _full_match(program: _Program, text: str) -> bool:
    kernel = frozenset({0})
    if program.looks_ahead:  # closures depend on the rest of the path: no caching
        for pos, ch in enumerate(text):
            kernel = _advance(program, _closure(program, kernel, text, pos), ch)
            if not kernel:
                return False
        reached = _closure(program, kernel, text, len(text))
        return any(program.code[pc][0] == "match" for pc in reached)
    steps = program._steps
    if len(steps) > _CACHE_LIMIT:  # bounded memory whatever the inputs
        steps.clear()
        program._accepts.clear()
    for pos, ch in enumerate(text):
        key = (kernel, ch)
        following = steps.get(key)
        if following is None:
            following = steps[key] = _advance(program, _closure(program, kernel, text, pos), ch)
        kernel = following
        if not kernel:
            return False
    accepts = program._accepts.get(kernel)
    if accepts is None:
        reached = _closure(program, kernel, text, len(text))
        accepts = program._accepts[kernel] = any(program.code[pc][0] == "match" for pc in reached)
    return accepts


@dataclass(frozen=True, eq=False)
class GlobMatcher:
    """A compiled glob; `match(path)` takes time linear in `len(path)`."""

    pattern: str
    program: _Program
    negated: bool

    def match(self, path: str) -> bool:
        if self.negated:
            return not _full_match(self.program, path)
        # picomatch accepts an input identical to the pattern before trying the regex.
        return path == self.pattern or _full_match(self.program, path)


@lru_cache(maxsize=512)
def compile_glob(pattern: str) -> GlobMatcher:
    """picomatch defaults: `*`/`?` stay in a segment, `**` crosses, `{a,b}`, `[...]`, no dotfiles.

    Also follows picomatch in: a leading `!` negates, a leading `./` is ignored, `\\` escapes,
    `{a..c}` letter ranges, extglobs `@() *() +() ?() !()`, and `[!x]` being a plain class
    (picomatch only negates with `[^x]`). Matching is case-sensitive and whole-string.
    Not reproduced: picomatch letting some star patterns match a trailing `/` (`*` vs
    `abc/`); stored document paths never end in `/`.
    """
    negated = False
    body = pattern
    while body.startswith("!") and not body.startswith("!("):
        negated = not negated
        body = body[1:]
    while body.startswith("./"):
        body = body[2:]
    return GlobMatcher(pattern, _compile(_translate(body, in_group=False)), negated)


def glob_match(pattern: str, path: str) -> bool:
    return compile_glob(pattern).match(path)


def is_comma_list(pattern: str) -> bool:
    """A comma list iff it contains `,` and none of `*`, `?`, `{`."""
    return "," in pattern and not any(ch in pattern for ch in "*?{")


def split_comma_list(pattern: str) -> list[str]:
    """Items trimmed, empty items dropped."""
    return [item for item in (part.strip() for part in pattern.split(",")) if item]


def split_glob_mask(mask: str) -> list[str]:
    """Split a collection mask on top-level commas (not inside `{}` or `[]`).

    Parts are trimmed and empty ones dropped; if nothing is left the mask comes back whole.
    """
    parts: list[str] = []
    current: list[str] = []
    braces = brackets = 0
    for ch in mask:
        if ch == "{":
            braces += 1
        elif ch == "}" and braces > 0:
            braces -= 1
        elif ch == "[":
            brackets += 1
        elif ch == "]" and brackets > 0:
            brackets -= 1
        elif ch == "," and braces == 0 and brackets == 0:
            trimmed = "".join(current).strip()
            if trimmed:
                parts.append(trimmed)
            current = []
            continue
        current.append(ch)
    trimmed = "".join(current).strip()
    if trimmed:
        parts.append(trimmed)
    return parts or [mask]

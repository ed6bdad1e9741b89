"""The regex translation domain/globs.py used before its linear-time matcher, kept as a test
oracle: the matcher must agree with it on every pattern (tests/unit/test_globs.py). Its
backtracking is exponential on patterns like `*a*a*a*b`; only tiny inputs are fed to it."""

from __future__ import annotations

import re
from functools import lru_cache

# Any run of segments none of which starts with a dot (what a globstar may cross).
_NO_DOT_SEGMENT = r"(?!\.)[^/]*"
_GLOBSTAR_BODY = f"{_NO_DOT_SEGMENT}(?:/{_NO_DOT_SEGMENT})*"
_EXTGLOB_SUFFIX = {"@": "", "*": "*", "+": "+", "?": "?"}


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


def _brace_range(body: str) -> str | None:
    """picomatch's `{x..y}`: a character class `[x-y]` built from the raw ends.

    So `{1..3}` is one digit 1-3 and `{1..10}` is `[1-10]` (the digits 1 and 0), exactly
    as picomatch compiles them; zero-padded ends (`{01..03}`) are kept as literal text.
    """
    match = re.fullmatch(r"([A-Za-z]|[1-9][0-9]*|0)\.\.([A-Za-z]|[1-9][0-9]*|0)", body)
    if match is None:
        if re.fullmatch(r"[0-9]+\.\.[0-9]+", body):
            return re.escape(body)
        return None
    lo, hi = match.group(1), match.group(2)
    if len(lo) == 1 and len(hi) == 1 and lo > hi:
        lo, hi = hi, lo
    return f"[{lo}-{hi}]"


def _class(pattern: str, start: int) -> tuple[str, int] | None:
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
        return f"[^{members}/]", end
    if re.fullmatch(r"(?:\[:[a-z]+:\])+", body):
        return f"[{_class_members(body)}]", end
    # picomatch accepts the bracket text literally too, and reads `!` as a plain member.
    return f"(?:{re.escape(pattern[start:end])}|[{_class_members(body)}])", end


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


def _translate(pattern: str, in_group: bool) -> str:
    """Regex source for `pattern`; `in_group` relaxes the dot rule as picomatch does."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        seg_start = i == 0 or pattern[i - 1] == "/"
        if ch == "\\":
            out.append(re.escape(pattern[i + 1]) if i + 1 < n else re.escape("\\"))
            i += 2
            continue
        if ch in "@*+?!" and i + 1 < n and pattern[i + 1] == "(":
            close = _find_close(pattern, i + 1, "(", ")")
            if close > 0:
                alternatives = "|".join(
                    _translate(alt, True) for alt in _split_top(pattern[i + 2 : close], "|")
                )
                if ch == "!":
                    # picomatch only looks ahead here: `!(a).md` rejects anything starting "a".
                    out.append(f"(?:(?!(?:{alternatives}))[^/]*?)")
                else:
                    out.append(f"(?:{alternatives}){_EXTGLOB_SUFFIX[ch]}")
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
                out.append(r"(?!\.)(?=.)")
            out.append("[^/]*?")
            i = run_end
            continue
        if ch == "?":
            out.append("[^./]" if seg_start and not in_group else "[^/]")
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
                    out.append("(?:" + "|".join(_translate(o, True) for o in options) + ")")
                    i = close + 1
                    continue
        out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _globstar(pattern: str, start: int, run_end: int, out: list[str]) -> int:
    """Emit a whole-segment `**`; returns the index to continue from."""
    at_end = run_end == len(pattern)
    if at_end and start > 0:
        # `a/**`: `a`, `a/` or anything below it; drop the `/` already emitted.
        out.pop()
        out.append(f"(?:/(?:{_GLOBSTAR_BODY})?)?")
        return run_end
    if at_end:
        out.append(f"(?=.){_GLOBSTAR_BODY}")
        return run_end
    # `**/` (leading or in the middle): zero or more dot-free segments, each with its `/`.
    out.append(f"(?:{_NO_DOT_SEGMENT}/)*")
    return run_end + 1


@lru_cache(maxsize=512)
def glob_to_regex(pattern: str) -> re.Pattern[str]:
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
    source = _translate(body, in_group=False)
    if negated:
        return re.compile(rf"(?!(?:{source})\Z).*\Z", re.DOTALL)
    # picomatch accepts an input identical to the pattern before trying the regex.
    return re.compile(rf"(?:{source}|{re.escape(pattern)})\Z", re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    return glob_to_regex(pattern).match(path) is not None

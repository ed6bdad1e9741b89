"""JavaScript string semantics the original relies on, for byte-identical output.

QMD is written in TypeScript, so wherever it splits on `/\\s+/`, calls `trim()` or compares
`.length`, it uses JavaScript's definitions. Python's `str.split()`/`strip()` differ at the
edges (`\\x1c`-`\\x1f` are whitespace to Python, U+FEFF is whitespace to JavaScript) and
`len()` counts code points where JavaScript counts UTF-16 code units.
"""

from __future__ import annotations

import re
import unicodedata

# ECMAScript WhiteSpace + LineTerminator, the set `\s` and `trim()` use.
JS_WS_CHARS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
JS_WS_CLASS = "[" + re.escape(JS_WS_CHARS) + "]"
_JS_WS_RUN = re.compile(JS_WS_CLASS + "+")

# Line terminators for `.` and `^`/`$` (multiline) in JavaScript regexes.
JS_LINE_TERMINATORS = "\n\r\u2028\u2029"


def is_js_space(ch: str) -> bool:
    return ch in JS_WS_CHARS


def js_trim(text: str) -> str:
    return text.strip(JS_WS_CHARS)


def js_split_ws(text: str) -> list[str]:
    """`text.split(/\\s+/)`: keeps the empty strings a leading/trailing run produces."""
    return _JS_WS_RUN.split(text)


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def utf16_len(text: str) -> int:
    """`String.prototype.length`: astral characters count twice."""
    if text.isascii():  # the common case, answered without a per-character loop
        return len(text)
    return len(text) + len(_ASTRAL.findall(text))


def utf16_prefix(text: str, units: int) -> str:
    """`text.substring(0, units)` without ever ending on half a surrogate pair.

    Where JavaScript would cut an astral character in two (leaving a lone surrogate that
    cannot be encoded as UTF-8), the whole character is dropped instead.
    """
    if units <= 0:
        return ""
    if _ASTRAL.search(text) is None:  # every character is one unit: a plain slice
        return text[:units]
    used = 0
    for index, ch in enumerate(text):
        width = 2 if ord(ch) > 0xFFFF else 1
        if used + width > units:
            return text[:index]
        used += width
    return text


def is_letter_or_number(ch: str) -> bool:
    """`/[\\p{L}\\p{N}]/u` for one code point."""
    return unicodedata.category(ch)[0] in "LN"

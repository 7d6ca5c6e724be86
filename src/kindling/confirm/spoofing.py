"""Characters that make what an approver reads differ from what runs, and the action-name fold.

``text_warnings`` finds, in a request's action, description and details, bidi overrides (text that shows
in another order than it runs), invisible characters (zero-width spaces and joiners, fillers,
unusual spaces) and look-alike letters (a Cyrillic ``а`` inside ``staging``, a full-width ``ｓ``,
the ``ﬁ`` ligature: anything NFKC turns into ASCII); the API returns them
with every request and the web page marks each one where it stands.

Look-alike letters come from ``folding.LOOKALIKES``, the table the action-name fold uses too.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from kindling.confirm.folding import LOOKALIKES

MAX_WARNINGS = 50

# Characters that reorder the text around them on screen.
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
# Characters that show as nothing, or as a blank that is not a space, beside the format (Cf) ones.
BLANKS = frozenset("\u3164\u115f\u1160\uffa0\u2800\u180e\u034f")
_WORD_RE = re.compile(r"\w+")


def _invisible(ch: str) -> bool:
    return ch in BLANKS or unicodedata.category(ch) == "Cf"


def char_problem(ch: str) -> str | None:
    """Return why ``ch`` alone could mislead a reader (``bidi``, ``invisible``, ``space``), or None."""
    if ch.isascii():
        return "invisible" if unicodedata.category(ch) == "Cc" and ch not in "\n\t\r" else None
    if ch in BIDI:
        return "bidi"
    if ch in BLANKS or unicodedata.category(ch) in ("Cf", "Cc", "Zl", "Zp"):
        return "invisible"
    if unicodedata.category(ch) == "Zs":
        return "space"
    return None


def _compat_ascii(ch: str) -> bool:
    """True for a non-ASCII character NFKC turns into one visible ASCII character: a full-width
    ``ｓ``, the ``ﬁ`` ligature, a one-dot leader that reads as ``.``, a mathematical ``𝐚``."""
    if ch.isascii():
        return False
    folded = unicodedata.normalize("NFKC", ch)
    if not folded.isascii() or not folded.strip() or not folded.isprintable():
        return False
    return len(folded) == 1 or (folded.isalpha() and ch.isalpha())  # one character, or a ligature


def suspicious_positions(text: str) -> dict[int, str]:
    """Return ``{index: kind}`` for every character of ``text`` that could mislead a reader.

    Kinds: ``bidi``, ``invisible``, ``space`` (a blank that is not U+0020) and ``lookalike`` (a
    letter from another script inside a word with Latin letters, or a word made only of letters
    that look Latin, such as Cyrillic ``рор``).
    """
    if text.isascii() and text.isprintable():
        return {}
    found: dict[int, str] = {}
    for i, ch in enumerate(text):
        kind = char_problem(ch)
        if kind:
            found[i] = kind
        elif _compat_ascii(ch):
            found[i] = "lookalike"
    for word in _WORD_RE.finditer(text):
        chunk = word.group()
        if chunk.isascii():
            continue
        lookalike = [i for i, ch in enumerate(chunk) if ch in LOOKALIKES]
        if not lookalike:
            continue
        letters = [ch for ch in chunk if ch.isalpha()]
        has_latin = any(ch.isascii() and ch.isalpha() for ch in chunk)
        all_lookalike = all(ch in LOOKALIKES for ch in letters)
        if has_latin or all_lookalike:
            for i in lookalike:
                found.setdefault(word.start() + i, "lookalike")
    return found


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            yield where, item
        elif isinstance(item, dict):
            for key, child in item.items():
                key_text = str(key)
                yield f"{where} (key)", key_text
                stack.append((child, f"{where}.{key_text}"))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))


def text_warnings(description: str, details: Any, action: str = "") -> list[dict[str, Any]]:
    """Return the misleading characters of a request, at most ``MAX_WARNINGS``, in reading order.

    Each is ``{"field", "kind", "char", "name", "index"}``: ``field`` is ``action``,
    ``description`` or a path into the details (``details.env``, ``details.hosts[2]``,
    ``details.env (key)``), ``char`` its code point (``U+200B``), ``index`` its position in that
    string.
    """
    warnings: list[dict[str, Any]] = []
    sources = [("action", action), ("description", description), *_strings(details, "details")]
    for field, text in sources:
        for index, kind in sorted(suspicious_positions(text).items()):
            ch = text[index]
            warnings.append(
                {
                    "field": field,
                    "kind": kind,
                    "char": f"U+{ord(ch):04X}",
                    "name": unicodedata.name(ch, "unnamed character"),
                    "index": index,
                }
            )
            if len(warnings) >= MAX_WARNINGS:
                return warnings
    return warnings


def marked_segments(text: str) -> list[tuple[str, str | None]]:
    """Split ``text`` into ``(piece, kind)`` runs: ``kind`` is None for plain text, else the
    warning kind of a one-character piece, so a page or a terminal can show each one visibly."""
    found = suspicious_positions(text)
    if not found:
        return [(text, None)]
    pieces: list[tuple[str, str | None]] = []
    start = 0
    for index in sorted(found):
        if index > start:
            pieces.append((text[start:index], None))
        pieces.append((text[index], found[index]))
        start = index + 1
    if start < len(text):
        pieces.append((text[start:], None))
    return pieces


def visible_text(text: str) -> str:
    """Return ``text`` for a terminal: every misleading character written as ``[U+XXXX kind]``,
    look-alike letters kept but followed by the marker."""
    out = []
    for piece, kind in marked_segments(text):
        if kind is None:
            out.append(piece)
        elif kind == "lookalike":
            out.append(f"{piece}[U+{ord(piece):04X} lookalike]")
        else:
            out.append(f"[U+{ord(piece):04X} {kind}]")
    return "".join(out)

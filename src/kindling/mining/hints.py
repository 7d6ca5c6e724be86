"""Rule a pattern out before the regex engine scans a text with it.

Kept examples are scanned with about thirty personal-data and credential patterns (see
``kindling.mining.personal`` and ``kindling.mining.redact``). Most of them start with a look-behind
or a word boundary, which leaves Python's regex engine no literal to skip ahead to: it tries every
position of every text, for every pattern. A *hint* is something a text must contain for its
pattern to match anywhere in it, which costs a substring search instead. A text without it is not
scanned with that pattern; the results are the same, only cheaper.

Hints are data, written beside the default patterns they belong to
(``kindling.mining.scrub_patterns.DEFAULT_PATTERN_HINTS``); a pattern without one (the user's own) is always
scanned. A hint is one of:

* ``("text", (a, b, ...))``: the text contains ``a`` or ``b`` ... (case as written);
* ``("word", (a, b, ...))``: the text contains one of them ignoring case (for a case-insensitive
  pattern; the words are lower case). Only ASCII texts are ruled out this way: under Unicode case
  folding a non-ASCII character can match an ASCII letter (the Kelvin sign matches "k"). The "…"
  of the marker ``truncate`` puts after a cut result matches no letter, so a text that is ASCII
  apart from it is ruled out too (otherwise every cut result would be scanned with every such
  pattern);
* ``("caseless", (a, b, ...))``: the text contains one of them ignoring case, as a case-insensitive
  pattern sees it (lower-case words; a text that is not ASCII is searched with the same folding
  the regex engine applies, so it is not let through unexamined);
* ``("match", expression)``: ``expression`` (a piece every match of the pattern contains, starting
  with a literal or a character class so the engine can skip ahead) is found in the text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

#: ``check(text, lowered)`` is False when the pattern cannot match ``text``; ``lowered`` is
#: ``text.lower()`` for an ASCII text, else None (see ``lowered``).
HintCheck = Callable[[str, "str | None"], bool]
# The one non-ASCII character of a cut result's marker (kindling.mining.passes.truncate).
_ELLIPSIS = "\u2026"


def lowered(text: str) -> str | None:
    """Return what ``("word", ...)`` hints look in: ``text`` in lower case when it is ASCII (apart
    from any "…", which no letter matches under case folding), else None."""
    if text.isascii() or (_ELLIPSIS in text and text.replace(_ELLIPSIS, "").isascii()):
        return text.lower()
    return None


@functools.cache
def compile_hint(spec: tuple[str, Any]) -> HintCheck:
    """Return the check of one hint (see the module docstring); the same spec gives the same check,
    so a scan can ask each distinct check once per text. Raises ValueError for an unknown kind."""
    kind, value = spec
    if kind == "text":
        needles = tuple(value)
        return lambda text, _lower: any(needle in text for needle in needles)
    if kind == "word":
        words = tuple(value)
        return lambda _text, lower: lower is None or any(word in lower for word in words)
    if kind == "caseless":
        words = tuple(value)
        folded = re.compile("|".join(re.escape(word) for word in words), re.IGNORECASE).search
        return lambda text, lower: (
            any(word in lower for word in words) if lower is not None else folded(text) is not None
        )
    if kind == "match":
        lazy = LazyPattern(value)
        return lambda text, _lower: lazy.regex.search(text) is not None
    raise ValueError(f"unknown hint kind {kind!r}")


class LazyPattern:
    """A regular expression compiled on its first use: most kept texts never need most patterns,
    and compiling them all costs more than scrubbing a few examples."""

    __slots__ = ("_regex", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._regex: re.Pattern[str] | None = None

    @property
    def regex(self) -> re.Pattern[str]:
        """The compiled expression. Raises re.error for an invalid pattern."""
        if self._regex is None:
            self._regex = re.compile(self.pattern)
        return self._regex


def hint_for(pattern: str) -> HintCheck | None:
    """Return the check of a default pattern's hint, or None when ``pattern`` has none.

    The checks are compiled once per process and shared by every scrubber and redactor.
    """
    global _DEFAULT
    if _DEFAULT is None:
        from kindling.mining.scrub_patterns import DEFAULT_PATTERN_HINTS

        _DEFAULT = {text: compile_hint(spec) for text, spec in DEFAULT_PATTERN_HINTS.items()}
    return _DEFAULT.get(pattern)


_DEFAULT: dict[str, HintCheck] | None = None


def check_for(pattern: str) -> str | None:
    """Return the name of the check a default personal-data pattern's matches must pass, or None."""
    from kindling.mining.scrub_patterns import DEFAULT_PATTERN_CHECKS

    return DEFAULT_PATTERN_CHECKS.get(pattern)

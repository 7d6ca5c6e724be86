"""Hide credentials in mined examples before they leave mining.

Examples carry real tool results, arguments and user requests, and templates inject them into new
sessions (possibly with another model provider, or shared with other people). A session that ran
``cat .env`` or ``export OPENAI_API_KEY=...`` must not spread the key. Only the kept examples are
redacted (at most ``max_examples`` of them, after ranking), so the mining hot path pays nothing and
de-duplication still sees the real arguments. The patterns are data
(``kindling.mining.scrub_patterns``, served as ``kindling.mining.config.DEFAULT_SECRET_PATTERNS``),
extensible from ``mining.json``; the credential formats of hosted services come from
detect-secrets' plugins (``kindling.mining.detectors``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from typing import Any

from kindling.mining.detectors import library_patterns, may_hold_library_secret
from kindling.mining.hints import HintCheck, LazyPattern, hint_for, lowered

REDACTED = "[REDACTED]"


class SecretRedactor:
    """Replaces what the patterns match with ``[REDACTED]``.

    A pattern with a group named ``secret`` replaces only that group (so ``password=`` stays
    readable); any other pattern replaces its whole match. With ``library`` (the default), the
    credential formats of detect-secrets' plugins are redacted after ``patterns``
    (``kindling.mining.detectors``): their first group when it holds at least eight characters (the
    secret of a URL's credentials), else their whole match without the spaces or quotes around it.
    """

    def __init__(self, patterns: Sequence[str], *, library: bool = True) -> None:
        self.patterns = tuple(patterns)
        self.library = library
        # (expression, replacement, hint or None): a text without a pattern's hint is not scanned.
        self._regexes = tuple(
            (
                LazyPattern(pattern),
                _keep_around_secret if "(?P<secret>" in pattern else REDACTED,
                hint_for(pattern),
            )
            for pattern in self.patterns
        )

    def scoped(self, texts: Iterable[str]) -> SecretRedactor:
        """Return this redactor limited to the patterns whose hints at least one of ``texts`` holds.

        Redacting an example's texts through it asks each hint once per example instead of once
        per text; the result is the same for those texts.
        """
        joined = "\n".join(texts)
        lower = lowered(joined)
        view = copy.copy(self)
        view._regexes = tuple(entry for entry in self._regexes if entry[2] is None or entry[2](joined, lower))
        view.library = self.library and may_hold_library_secret(joined, lower)
        return view

    def text(self, value: str) -> str:
        """Return ``value`` with every secret the patterns find replaced."""
        lower = lowered(value)
        asked: dict[HintCheck, bool] = {}  # patterns share hints: each is asked once per text
        for lazy, replacement, hint in self._regexes:
            if hint is not None:
                allowed = asked.get(hint)
                if allowed is None:
                    allowed = asked[hint] = hint(value, lower)
                if not allowed:
                    continue  # the pattern cannot match here (kindling.mining.hints)
            replaced = lazy.regex.sub(replacement, value)
            if replaced != value:
                value = replaced
                lower = lowered(value)
                asked.clear()
        if self.library and may_hold_library_secret(value, lower):
            for regex, hint in library_patterns():
                if hint is not None and not hint(value, lower):
                    continue
                replaced = regex.sub(_redact_library_match, value)
                if replaced != value:
                    value = replaced
                    lower = lowered(value)
        return value

    def value(self, value: Any) -> Any:
        """Return ``value`` (JSON-like: dicts, lists, strings) with secrets in its strings replaced."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self._keyed(key, item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value

    def _keyed(self, key: Any, item: Any) -> Any:
        # An argument named like a credential ({"api_key": "..."}) is hidden whatever its value.
        if isinstance(key, str) and isinstance(item, str) and item and _SECRET_KEY.search(key):
            return REDACTED
        return self.value(item)


# A whole name part (api_key, DB_PASSWORD, auth-token, accessToken), so "bypass" or "max_tokens" is no secret.
_SECRET_KEY = re.compile(
    r"(?:^|[_.-])(?i:pass(?:word|wd)?|secret|token|api[_-]?key|credentials?|private[_-]?key)$"
    r"|(?<=[a-z])(?:Pass(?:word|wd)?|Secret|Token|ApiKey|Credentials?|PrivateKey)$"
)


def _keep_around_secret(match: re.Match[str]) -> str:
    start, end = match.span("secret")
    whole = match.group(0)
    if start < 0:
        return whole
    offset = match.start()
    return whole[: start - offset] + REDACTED + whole[end - offset :]


_AROUND = " \t\r\n\"'=:"


def _redact_library_match(match: re.Match[str]) -> str:
    whole = match.group(0)
    if REDACTED in whole:
        return whole
    if match.re.groups and match.group(1) and len(match.group(1)) >= 8:
        start, end = match.span(1)
        offset = match.start()
        return whole[: start - offset] + REDACTED + whole[end - offset :]
    head = len(whole) - len(whole.lstrip(_AROUND))
    tail = len(whole.rstrip(_AROUND))
    return whole[:head] + REDACTED + whole[tail:] if tail > head else whole

"""Replace personal data in kept examples (and episodes) with typed placeholders.

A template carries one person's session into another person's: a past customer's user id, order,
card, e-mail or address must not reach the next customer's conversation, and a model must not take
them for the current user's. ``PersonalDataScrubber.scrub`` is a pure function over an
example-like or episode-like structure (a pydantic model, a dict, a list of them): it returns a
copy in which every personal value found anywhere in the record's content is replaced by a typed,
numbered placeholder (``<user_id_1>``, ``<email_1>``, ``<name_2>``). Within one call the same value
always becomes the same placeholder, in the request, the arguments and the result alike, so a call
to ``get_user_details`` with ``<user_id_1>`` still shows ``<user_id_1>`` in its result; distinct
values get distinct placeholders.

What counts as personal is data (``kindling.mining.config``): a table of argument/field names
(``user_id``, ``order_id``, ``payment_method_id``, ``email``, ``first_name``, ``zip``, ...) whose
values are personal, and a table of patterns per type (e-mails, phone numbers, card numbers, street
addresses, "my ID is ...", ...), both extensible from ``mining.json``. Values are found first in
the whole record (names in the JSON arguments, names inside a JSON result, patterns in every text),
then replaced everywhere, so a name found only in the arguments is also replaced in the request.
File paths, commands and code are left alone: patterns only match shapes that are personal.

Episodes (a task's opening request and its calls) use the same function: scrub the whole episode
in one call so one customer's id has one placeholder across all its calls::

    scrubber = PersonalDataScrubber.from_config(load_mining_config())
    clean_example = scrubber.scrub(example)          # an Example comes back
    clean_episode = scrubber.scrub({"request": text, "calls": [call, ...]})
    request, opening = scrubber.scrub_texts([request, opening], context=calls)  # only the texts
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel

from kindling.mining.hints import HintCheck, LazyPattern, check_for, hint_for, lowered

__all__ = ["CONTENT_FIELDS", "PersonalDataScrubber", "normalize_key"]

T = TypeVar("T")

# Fields of a record whose values are conversation content (scrubbed); every other scalar field
# (tool names, session ids, counts, positions, roles) is structure and kept as it is.
CONTENT_FIELDS: frozenset[str] = frozenset(
    {
        "arguments",
        "raw_arguments",
        "result",
        "context",
        "request",
        "content",
        "text",
        "instruction",
        "reasoning",
        "summary",
    }
)

_PLACEHOLDER = re.compile(r"^<[a-z][a-z0-9_]*_\d+>$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# A value shorter than this is replaced only where its key names it, never in free text: "1" or
# "NY" found everywhere would wreck the text around it.
_MIN_FREE_TEXT = 3
_MIN_FREE_DIGITS = 4
# One "key": "string" or "key": number pair of JSON text (escapes inside the string kept as they are).
_JSON_PAIR = re.compile(r'"([A-Za-z_][\w-]{0,63})"\s*:\s*(?:"((?:[^"\\\n]|\\.){1,200})"|(-?\d[\d.]{0,30}))')
_PREFIXED_ID = re.compile(r"#?[A-Z]{1,3}(\d{6,})")
# Joins the strings of a JSON value for one scan; "." and newlines stop every pattern at the seam.
_LEAF_BREAK = "\n.\n"
# What kindling.mining.patterns.truncate leaves after a cut, and a value cut short just before it.
_CUT_MARK = "\n…[truncated "
_CUT_VALUE = re.compile(r"(?<![\w@#.+-])([\w@#.+-]{3,})(\n…\[truncated \d+ of \d+ chars\])")
_MIN_FREE_NAME = 2  # "Li", "Wu": names are matched with their capital, so two letters are safe
_NAME_TYPES = frozenset({"name"})
_CASELESS_TYPES = frozenset({"email"})


def normalize_key(key: str) -> str:
    """Return ``key`` as lower snake case (``userId``, ``User-ID`` and ``user_id`` all become ``user_id``)."""
    return _CAMEL.sub("_", key).replace("-", "_").replace(" ", "_").lower()


class PersonalDataScrubber:
    """Finds personal values in a record and replaces them with typed placeholders.

    ``keys`` maps a field name (lower snake case; shell-style globs allowed, e.g. ``*_email``) to
    the placeholder type of its values. ``patterns`` maps a placeholder type to regular
    expressions; a pattern with a group named ``value`` takes only that group (so "my ID is" stays
    readable). Card numbers must also pass the Luhn check.
    """

    def __init__(self, keys: Mapping[str, str], patterns: Mapping[str, Sequence[str]]) -> None:
        self.keys = dict(keys)
        self.patterns = {kind: tuple(items) for kind, items in patterns.items()}
        self._exact = {normalize_key(k): v for k, v in self.keys.items() if not _is_glob(k)}
        self._globs = tuple((normalize_key(k), v) for k, v in self.keys.items() if _is_glob(k))
        # (type, expression, whether it has a "value" group, its hint or None, its check or
        # None): see _scan.
        self._regexes = tuple(
            (
                kind,
                LazyPattern(pattern),
                "(?P<value>" in pattern,
                hint_for(pattern),
                _CHECKS.get(check_for(pattern) or ""),
            )
            for kind, items in self.patterns.items()
            for pattern in items
        )
        self._key_cache: dict[str, str | None] = {}

    @classmethod
    def from_config(cls, config: Any) -> PersonalDataScrubber:
        """Return the scrubber for a ``MiningConfig``'s effective tables."""
        return cls(config.personal_keys_table(), config.personal_patterns_table())

    def type_of_key(self, key: str) -> str | None:
        """Return the placeholder type of a field named ``key``, or None when it is not personal."""
        found = self._key_cache.get(key, False)
        if found is not False:
            return found  # type: ignore[return-value]
        norm = normalize_key(key)
        kind = self._exact.get(norm)
        if kind is None:
            kind = next((k for glob, k in self._globs if fnmatch.fnmatchcase(norm, glob)), None)
        self._key_cache[key] = kind
        return kind

    def scrub(self, record: T, *, fields: Iterable[str] = CONTENT_FIELDS) -> T:
        """Return a copy of ``record`` with personal data in its content fields replaced.

        ``record`` is a pydantic model (an ``Example``, an episode), a dict or a list of them;
        the same type comes back. Only the values of ``fields`` (at any depth) are content; other
        scalar fields are kept. One call is one placeholder numbering: scrub an episode whole.
        """
        content = frozenset(fields)
        placeholders = Placeholders(self)
        for part, is_text in _content_parts(record, content):
            placeholders.collect(part, is_text=is_text)
        placeholders.seal()
        return _rebuild(record, content, placeholders)

    def scrub_texts(self, texts: Sequence[str], *, context: Iterable[Any] = ()) -> list[str]:
        """Return ``texts`` with personal data replaced, under one numbering.

        Values are found in the texts (field names and patterns) and in ``context`` (call
        arguments and results, as JSON-like values or texts) by field name only: the patterns
        scan just the texts returned, so long results cost little. Use it for an episode's
        request beside all of its calls.
        """
        placeholders = Placeholders(self)
        for text in texts:
            placeholders.collect(text, is_text=True)
        placeholders.scanning = False
        for part in context:
            placeholders.collect(part, is_text=isinstance(part, str))
        placeholders.seal()
        return [placeholders.text(text) for text in texts]

    def placeholders_for(self, parts: Iterable[Any]) -> Placeholders:
        """Return the placeholder map of ``parts`` (texts or JSON-like values) for ``Placeholders.apply``."""
        placeholders = Placeholders(self)
        for part in parts:
            placeholders.collect(part, is_text=isinstance(part, str))
        placeholders.seal()
        return placeholders


class Placeholders:
    """The personal values found in one record and their placeholders (``value -> <type_n>``)."""

    def __init__(self, scrubber: PersonalDataScrubber) -> None:
        self._scrubber = scrubber
        self.by_value: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._regex: re.Pattern[str] | None = None
        self._caseless: dict[str, str] = {}
        self.scanning = True  # False: collect only values that field names mark, no pattern scan

    def add(self, kind: str, value: str) -> str:
        """Return the placeholder of ``value`` (a new ``<kind_n>`` when it was not seen before)."""
        value = value.strip()
        if not value or _PLACEHOLDER.match(value):
            return value
        found = self.by_value.get(value)
        if found is None:
            number = self._counts.get(kind, 0) + 1
            self._counts[kind] = number
            found = self.by_value[value] = f"<{kind}_{number}>"
            # "#W9502127" is also given as "W9502127" or "9502127": the same id, the same placeholder.
            short = _PREFIXED_ID.fullmatch(value)
            if short is not None:
                for alias in (value.lstrip("#"), short.group(1)):
                    self.by_value.setdefault(alias, found)
            self._regex = None
        return found

    def collect(self, part: Any, *, is_text: bool) -> None:
        """Find the personal values in ``part`` (a text, or JSON-like arguments) and number them."""
        if isinstance(part, str):
            self._collect_text(part, parse=is_text)
        else:
            leaves: list[str] = []
            self._collect_value(part, None, leaves)
            self._scan(_LEAF_BREAK.join(leaves))

    def seal(self) -> None:
        """Build the one expression that finds every collected value in a text."""
        free = [
            (value, kind)
            for value, kind in ((v, p[1:].rsplit("_", 1)[0]) for v, p in self.by_value.items())
            if _free_text_ok(value, kind)
        ]
        if not free:
            self._regex = None
            return
        free.sort(key=lambda item: (-len(item[0]), item[0]))
        alternatives = [
            f"(?i:{re.escape(value)})" if kind in _CASELESS_TYPES else re.escape(value)
            for value, kind in free
        ]
        self._regex = re.compile(r"(?<![\w@])(?:" + "|".join(alternatives) + r")(?![\w@]|-\w)")
        self._caseless = {value.lower(): self.by_value[value] for value, _kind in free}

    def text(self, value: str) -> str:
        """Return ``value`` with every collected personal value replaced by its placeholder."""
        regex = self._regex
        if regex is None or not value:
            return value
        exact = self.by_value
        caseless = self._caseless

        def swap(match: re.Match[str]) -> str:
            found = match.group(0)
            return exact.get(found) or caseless.get(found.lower(), found)

        scrubbed = regex.sub(swap, value)
        if _CUT_MARK in scrubbed:
            scrubbed = _CUT_VALUE.sub(self._swap_cut, scrubbed)
        return scrubbed

    def _swap_cut(self, match: re.Match[str]) -> str:
        # A result cut to its limit may end inside a value ("…sophia_mar"): the part left is still hers.
        part = match.group(1)
        for value, placeholder in self.by_value.items():
            if len(value) > len(part) and value.startswith(part):
                return placeholder + match.group(2)
        return match.group(0)

    def value(self, value: Any, key: str | None = None) -> Any:
        """Return JSON-like ``value`` scrubbed: keyed values become their placeholder, texts are scrubbed."""
        kind = self._scrubber.type_of_key(key) if key is not None else None
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(item, key) for item in value]
        if kind is not None and _is_scalar(value):
            return self.by_value.get(str(value).strip(), self.text(str(value)))
        if isinstance(value, str):
            return self.text(value)
        return value

    def _collect_value(self, value: Any, key: str | None, leaves: list[str]) -> None:
        # Keyed values are numbered here; every text (keys too) goes to ``leaves``, which the
        # patterns then scan in one pass instead of once per string.
        kind = self._scrubber.type_of_key(key) if key is not None else None
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str):
                    leaves.append(k)
                self._collect_value(v, k if isinstance(k, str) else None, leaves)
        elif isinstance(value, list):
            for item in value:
                self._collect_value(item, key, leaves)
        elif kind is not None and _is_scalar(value):
            self._add_keyed(kind, str(value))
            if isinstance(value, str):
                leaves.append(value)
        elif isinstance(value, str) and value:
            if '":' in value and value.lstrip()[:1] in ("{", "["):
                self._collect_text(value, parse=True)  # JSON inside a string
            else:
                leaves.append(value)

    def _add_keyed(self, kind: str, value: str) -> None:
        if kind in _NAME_TYPES:
            # "Yara Silva" under full_name gives the same placeholders as first_name/last_name.
            for word in _name_words(value):
                self.add(kind, word)
        else:
            self.add(kind, value)

    def _collect_text(self, text: str, *, parse: bool) -> None:
        if not text:
            return
        if parse and '":' in text:
            try:
                if text.lstrip()[:1] not in ("{", "["):
                    raise ValueError("not a JSON document")
                leaves: list[str] = []
                self._collect_value(orjson.loads(text), None, leaves)
                if "\\u" in text:  # escaped characters: the decoded strings read differently
                    self._scan(_LEAF_BREAK.join(leaves))
            except ValueError:  # orjson.JSONDecodeError is one
                # Not JSON as a whole (a result cut to its limit, JSON inside a log line): its
                # "key": value pairs still say which values are personal.
                for match in _JSON_PAIR.finditer(text):
                    kind = self._scrubber.type_of_key(match.group(1))
                    found = match.group(2) if match.group(2) is not None else match.group(3)
                    if kind is not None and found:
                        self._add_keyed(kind, found)
        self._scan(text)

    def _scan(self, text: str) -> None:
        if not text or not self.scanning:
            return
        lower = lowered(text)
        asked: dict[HintCheck, bool] = {}  # patterns share hints: each is asked once per text
        for kind, lazy, has_group, hint, check in self._scrubber._regexes:
            if hint is not None:
                allowed = asked.get(hint)
                if allowed is None:
                    allowed = asked[hint] = hint(text, lower)
                if not allowed:
                    continue  # the pattern cannot match here (kindling.mining.hints)
            for match in lazy.regex.finditer(text):
                found = match.group("value") if has_group else match.group(0)
                if not found or (kind == "card_number" and not _card_ok(found)):
                    continue
                if check is not None and not check(found):
                    continue
                self._add_keyed(kind, found)


def _is_glob(key: str) -> bool:
    return any(ch in key for ch in "*?[")


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _free_text_ok(value: str, kind: str) -> bool:
    if kind in _NAME_TYPES:
        return len(value) >= _MIN_FREE_NAME and value[:1].isupper()
    if value.isdigit():
        return len(value) >= _MIN_FREE_DIGITS
    return len(value) >= _MIN_FREE_TEXT


_NAME_WORD = re.compile(r"[^\W\d_][\w'’.-]*")


def _name_words(value: str) -> list[str]:
    return [word.strip(".-'’") for word in _NAME_WORD.findall(value) if len(word.strip(".-'’")) >= 2]


def _card_ok(text: str) -> bool:
    # A whole card number passes the Luhn check (a timestamp rarely does); last-four digits pass.
    digits = [int(ch) for ch in text if ch.isdigit()]
    if len(digits) < 13:
        return len(digits) == 4
    if len(digits) > 19:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


# An IBAN's country (ISO 3166 code of a country that issues IBANs) and its length there.
_IBAN_LENGTHS = {
    country: int(length)
    for item in [
        "AD24",
        "AE23",
        "AL28",
        "AT20",
        "AZ28",
        "BA20",
        "BE16",
        "BG22",
        "BH22",
        "BI27",
        "BR29",
        "BY28",
        "CH21",
        "CR22",
        "CY28",
        "CZ24",
        "DE22",
        "DJ27",
        "DK18",
        "DO28",
        "EE20",
        "EG29",
        "ES24",
        "FI18",
        "FK18",
        "FO18",
        "FR27",
        "GB22",
        "GE22",
        "GI23",
        "GL18",
        "GR27",
        "GT28",
        "HR21",
        "HU28",
        "IE22",
        "IL23",
        "IQ23",
        "IS26",
        "IT27",
        "JO30",
        "KW30",
        "KZ20",
        "LB28",
        "LC32",
        "LI21",
        "LT20",
        "LU20",
        "LV21",
        "LY25",
        "MC27",
        "MD24",
        "ME22",
        "MK19",
        "MN20",
        "MR27",
        "MT31",
        "MU30",
        "NI28",
        "NL18",
        "NO15",
        "OM23",
        "PK24",
        "PL28",
        "PS29",
        "PT25",
        "QA29",
        "RO24",
        "RS22",
        "RU33",
        "SA24",
        "SC31",
        "SD18",
        "SE24",
        "SI19",
        "SK24",
        "SM27",
        "SO23",
        "ST25",
        "SV28",
        "TL23",
        "TN24",
        "TR26",
        "UA29",
        "VA22",
        "VG24",
        "XK20",
        "YE30",
    ]
    for country, length in ((item[:2], item[2:]),)
}


def _iban_ok(text: str) -> bool:
    # ISO 13616: the country's length, then the ISO 7064 mod-97 check (the first four characters
    # moved to the end, letters as 10..35, the number modulo 97 is 1). A random match fails it.
    iban = text.replace(" ", "")
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban):
        return False
    digits = "".join(str(int(ch, 36)) for ch in iban[4:] + iban[:4])
    return int(digits) % 97 == 1


_CHECKS: dict[str, Callable[[str], bool]] = {"iban": _iban_ok}


def _content_parts(record: Any, content: frozenset[str]) -> Iterable[tuple[Any, bool]]:
    """Yield every content value in ``record`` (texts and JSON-like values) in reading order."""
    if isinstance(record, BaseModel):
        record = {name: getattr(record, name) for name in type(record).model_fields}
    if isinstance(record, Mapping):
        for key, value in record.items():
            if key in content:
                if value is not None:
                    yield value, isinstance(value, str)
            elif isinstance(value, (Mapping, list, tuple, BaseModel)):
                yield from _content_parts(value, content)
    elif isinstance(record, (list, tuple)):
        for item in record:
            yield from _content_parts(item, content)


def _rebuild(record: Any, content: frozenset[str], placeholders: Placeholders) -> Any:
    if isinstance(record, BaseModel):
        updates = {
            name: _rebuild_field(name, getattr(record, name), content, placeholders)
            for name in type(record).model_fields
        }
        return record.model_copy(update=updates)
    if isinstance(record, Mapping):
        return type(record)(  # type: ignore[call-arg]
            {key: _rebuild_field(key, value, content, placeholders) for key, value in record.items()}
        )
    if isinstance(record, list):
        return [_rebuild(item, content, placeholders) for item in record]
    if isinstance(record, tuple):
        return tuple(_rebuild(item, content, placeholders) for item in record)
    return record


def _rebuild_field(key: Any, value: Any, content: frozenset[str], placeholders: Placeholders) -> Any:
    if key in content:
        if isinstance(value, str):
            return placeholders.text(value)
        return placeholders.value(value)
    if isinstance(value, (Mapping, list, tuple, BaseModel)):
        return _rebuild(value, content, placeholders)
    return value

"""Decide whether a tool call worked, from its result text and the source's explicit error flag.

The rules are data (``kindling.mining.config.OutcomeRule``); this module only applies them, fast:
it runs once per tool result on the mining hot path. The order of checks:

1. an explicit error flag from the source (tau2-bench) decides alone;
   (a result Hermes wrapped in ``<untrusted_tool_result …>`` is judged by its inner text)
2. an empty result is ``unknown`` (``empty_result``), never a failure;
3. a result that is a JSON object is judged only by the ``json`` rules: a JSON value that merely
   contains the word "error" somewhere is not a failure;
4. any other text is judged by the ``text`` rules (``start`` rules first, then ``anywhere``);
5. nothing fired: ``ok`` (``no_failure_signal``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from kindling.mining.config import MiningConfig, OutcomeRule, load_mining_config
from kindling.mining.model import Outcome, OutcomeStatus
from kindling.sessions.convert import UNTRUSTED_OPEN, unwrap_untrusted

_META = frozenset(".^$*+?{}[]|()")
# The test of an ``equals`` rule whose value is true or false, once compiled.
_IS = "is"


def _as_literal(pattern: str) -> str | None:
    # A pattern with no regex syntax is checked with ``in``, which is several times faster than re.
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if i + 1 < len(pattern) and not pattern[i + 1].isalnum():
                out.append(pattern[i + 1])
                i += 2
                continue
            return None
        if char in _META:
            return None
        out.append(char)
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class _TextCheck:
    outcome: Outcome
    literal: str | None
    regex: re.Pattern[str]


@dataclass(frozen=True)
class _ToolRules:
    json_rules: tuple[tuple[Outcome, str, str, Any, bool], ...]
    start: tuple[_TextCheck, ...]
    anywhere: tuple[_TextCheck, ...]
    # The fields the json rules look at: an object holding none of them is decided at once.
    json_fields: frozenset[str] = frozenset()


def _nonzero(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    if isinstance(value, str):
        try:
            return float(value.strip()) != 0
        except ValueError:
            return False
    return False


def _nonempty(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, str):
        return value.strip() != ""
    if isinstance(value, (list, dict)):
        return len(value) > 0
    if isinstance(value, (int, float)):
        # An error code of 0 is the usual way to say "no error" ({"error": 0, "data": ...}).
        return value != 0
    return True


def _json_fires(test: str, value: Any, expected: Any) -> bool:
    if test == "equals":
        if isinstance(expected, bool) or isinstance(value, bool):
            # bool is an int in Python: false must not equal 0, true must not equal 1.
            return type(value) is type(expected) and value == expected
        return bool(value == expected)
    if test == "in":
        return isinstance(value, (str, int, float)) and value in expected
    if test == "nonzero":
        return _nonzero(value)
    return _nonempty(value)


class OutcomeClassifier:
    """Applies a table of outcome rules to tool results; build one per mining run.

    Compiled rules are cached per tool name, so a rule limited to some tools costs nothing for
    the others.
    """

    def __init__(self, rules: Sequence[OutcomeRule]) -> None:
        self.rules = tuple(rules)
        self._outcomes: dict[tuple[OutcomeStatus, str], Outcome] = {}
        self._by_tool: dict[str, _ToolRules] = {}
        # The outcomes every result can get without a rule firing, built once: this runs per result.
        self._flag_failed = self._outcome(OutcomeStatus.FAILED, "error_flag")
        self._flag_clear = self._outcome(OutcomeStatus.OK, "error_flag_clear")
        self._empty = self._outcome(OutcomeStatus.UNKNOWN, "empty_result")
        self._no_signal = self._outcome(OutcomeStatus.OK, "no_failure_signal")

    def _outcome(self, status: OutcomeStatus, rule: str) -> Outcome:
        # Outcome is frozen, so one instance per (status, rule) is shared by every result.
        key = (status, rule)
        found = self._outcomes.get(key)
        if found is None:
            found = self._outcomes[key] = Outcome(status=status, rule=rule)
        return found

    def _rules_for(self, tool_name: str) -> _ToolRules:
        found = self._by_tool.get(tool_name)
        if found is not None:
            return found
        json_rules: list[tuple[Outcome, str, str, Any, bool]] = []
        start: list[_TextCheck] = []
        anywhere: list[_TextCheck] = []
        for rule in self.rules:
            if rule.tools and not any(fnmatch.fnmatchcase(tool_name, glob) for glob in rule.tools):
                continue
            outcome = self._outcome(OutcomeStatus(rule.status), rule.name)
            if rule.kind == "json":
                assert rule.field is not None and rule.test is not None  # enforced by the model
                # Only ``equals null`` fires on a null value (see _json_fires).
                fires_on_none = rule.test == "equals" and rule.value is None
                # Equal to true or false means being that very object (see _json_fires): checked
                # inline, without a call, for every result holding the field ("success": true).
                test = _IS if rule.test == "equals" and isinstance(rule.value, bool) else rule.test
                json_rules.append((outcome, rule.field, test, rule.value, fires_on_none))
                continue
            assert rule.pattern is not None
            flags = re.IGNORECASE if rule.ignore_case else 0
            literal = None if rule.ignore_case else _as_literal(rule.pattern)
            if rule.where == "start":
                check = _TextCheck(outcome, None, re.compile(rf"\s*(?:{rule.pattern})", flags))
                start.append(check)
            else:
                anywhere.append(_TextCheck(outcome, literal, re.compile(rule.pattern, flags)))
        found = self._by_tool[tool_name] = _ToolRules(
            tuple(json_rules), tuple(start), tuple(anywhere), frozenset(rule[1] for rule in json_rules)
        )
        return found

    def classify(self, tool_name: str, content: str | None, error_flag: bool | None = None) -> Outcome:
        """Return the outcome of one tool result (see the module docstring for the order)."""
        if error_flag is not None:
            return self._flag_failed if error_flag else self._flag_clear
        if not content:
            return self._empty
        rules = self._by_tool.get(tool_name)
        if rules is None:
            rules = self._rules_for(tool_name)
        head = content[0]
        if head != "{":  # most results are JSON objects: none of the next steps applies to them
            if head == "<" and content.startswith(UNTRUSTED_OPEN):
                # Hermes's wrapper around web/browser/MCP output says nothing about the outcome.
                content = unwrap_untrusted(content)
                if not content:
                    return self._empty
                head = content[0]
            if head.isspace():
                if content.isspace():
                    return self._empty
                head = content.lstrip()[:1]
        if head == "{" or head == "[":
            try:
                parsed = orjson.loads(content)
            except orjson.JSONDecodeError:
                parsed = None
            if type(parsed) is dict:
                if rules.json_fields.isdisjoint(parsed):
                    return self._no_signal
                for outcome, field, test, expected, fires_on_none in rules.json_rules:
                    if field in parsed:
                        value = parsed[field]
                        # The common values (null, 0) are decided here without a call.
                        if value is None:
                            if fires_on_none:
                                return outcome
                        elif test is _IS:
                            if value is expected:
                                return outcome
                        elif type(value) is int and test == "nonzero":
                            if value:
                                return outcome
                        elif _json_fires(test, value, expected):
                            return outcome
                return self._no_signal
            if type(parsed) is list:
                return self._no_signal
        for check in rules.start:
            if check.regex.match(content):
                return check.outcome
        for check in rules.anywhere:
            if (check.literal in content) if check.literal is not None else check.regex.search(content):
                return check.outcome
        return self._no_signal


_default: tuple[MiningConfig, OutcomeClassifier] | None = None


def default_classifier() -> OutcomeClassifier:
    """Return a classifier for the effective rules (defaults plus ``mining.json``); cached.

    Raises ConfigError when the user's mining config is invalid.
    """
    global _default
    config = load_mining_config()
    if _default is None or _default[0] is not config:
        _default = (config, OutcomeClassifier(config.rules()))
    return _default[1]


def classify_outcome(
    tool_name: str,
    content: str | None,
    *,
    error_flag: bool | None = None,
    rules: Sequence[OutcomeRule] | None = None,
) -> Outcome:
    """Return whether one tool call worked (ok | failed | unknown) and which rule decided it.

    ``rules`` replaces the effective table (defaults plus the user's ``mining.json``).
    Raises ConfigError when the user's mining config is invalid.
    """
    classifier = OutcomeClassifier(rules) if rules is not None else default_classifier()
    return classifier.classify(tool_name, content, error_flag)

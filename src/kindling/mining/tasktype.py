"""What kind of task a session was: code, file, research, terminal, or mixed.

Two ways to tell. After the fact, from the tool calls: a tool family with more than 60% of the
classified calls wins, else ``mixed``. Before any tool has run, from the task text (the first user
message): keyword scoring against each family's keywords, so a template can be chosen at turn zero.
Families and keywords are data (``kindling.mining.config``), extensible from ``mining.json``.
"""

from __future__ import annotations

import fnmatch
import operator
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from kindling.mining.config import load_mining_config
from kindling.sessions.model import Session

DOMINANCE = 0.6
# A task text's family needs more than this share of the keyword hits (the same 60% as for calls):
# texts that name two kinds of work about equally ("clone it, run the tests and write a report")
# are mixed.
TEXT_DOMINANCE = DOMINANCE


class TaskType(str, Enum):
    """The kind of task a session was, named after the tool family that dominated it."""

    CODE = "code"
    FILE = "file"
    RESEARCH = "research"
    TERMINAL = "terminal"
    MIXED = "mixed"


class TaskClassifier:
    """Classifies calls and task texts against one set of tool families and keywords.

    ``families`` maps a family name to tool names or shell-style globs (``browser_*``);
    ``keywords`` maps a family name to regular-expression stems matched at word starts.
    """

    def __init__(
        self,
        families: Mapping[str, Sequence[str]],
        keywords: Mapping[str, Sequence[str]] | None = None,
        *,
        threshold: float = DOMINANCE,
        text_threshold: float = TEXT_DOMINANCE,
    ) -> None:
        self.threshold = threshold
        self.text_threshold = text_threshold
        self._exact: dict[str, str] = {}
        self._globs: list[tuple[str, str]] = []
        for family, names in families.items():
            for name in names:
                if any(ch in name for ch in "*?["):
                    self._globs.append((name, family))
                else:
                    self._exact.setdefault(name, family)
        self._family_cache: dict[str, str | None] = {}
        self._keywords: list[tuple[TaskType, re.Pattern[str]]] = []
        for family, words in (keywords or {}).items():
            if words:
                pattern = re.compile(
                    r"(?<!\w)(?:" + "|".join(f"(?:{w})" for w in words) + r")", re.IGNORECASE
                )
                self._keywords.append((TaskType(family), pattern))

    def family_of(self, tool_name: str) -> str | None:
        """Return the family a tool belongs to, or None when it belongs to none."""
        try:
            return self._family_cache[tool_name]
        except KeyError:
            pass
        family = self._exact.get(tool_name)
        if family is None:
            family = next((fam for glob, fam in self._globs if fnmatch.fnmatchcase(tool_name, glob)), None)
        self._family_cache[tool_name] = family
        return family

    def classify_calls(self, tool_names: Iterable[str]) -> TaskType:
        """Return the family holding more than ``threshold`` of the calls that belong to a family.

        Calls to tools in no family (memory, clarify, ...) say nothing about the task and are not
        counted. No classified call at all, or no dominant family, is ``mixed``.
        """
        names = tool_names if isinstance(tool_names, (list, tuple)) else list(tool_names)
        try:
            # Every name seen before: map and count run in C, no Python-level loop per call.
            counts = Counter(map(self._family_cache.__getitem__, names))
        except KeyError:
            counts = Counter(map(self.family_of, names))
        return self._dominant(counts)

    def classify_call_counts(self, calls: Mapping[str, int]) -> TaskType:
        """Return ``classify_calls`` of calls given as tool -> how many calls, each tool in the order
        of its first call (the same answer as for the list of the calls' tools)."""
        counts: Counter[str | None] = Counter()
        family_of = self.family_of
        for name, number in calls.items():
            counts[family_of(name)] += number
        return self._dominant(counts)

    def _dominant(self, counts: Counter[str | None]) -> TaskType:
        # Families in order of their first call, so ties break as in the calls' order.
        counts.pop(None, None)
        total = sum(counts.values())
        if total == 0:
            return TaskType.MIXED
        family, top = max(counts.items(), key=_second)
        if top <= self.threshold * total:
            return TaskType.MIXED
        # A dict lookup instead of TaskType(family): an Enum call costs more than the counting.
        found = _TYPES.get(family)  # type: ignore[arg-type]
        return found if found is not None else TaskType(family)

    def score_text(self, text: str) -> dict[TaskType, int]:
        """Return how many keyword hits each family has in ``text``."""
        return {task_type: len(pattern.findall(text)) for task_type, pattern in self._keywords}

    def classify_text(self, text: str) -> TaskType:
        """Return the family whose keywords hit most often, when it holds more than
        ``text_threshold`` (60%) of the hits.

        No hit, or no family with that share, is ``mixed``.
        """
        scores = self.score_text(text)
        total = sum(scores.values())
        if total == 0:
            return TaskType.MIXED
        best = max(scores, key=lambda t: scores[t])
        return best if scores[best] > self.text_threshold * total else TaskType.MIXED


_TYPES: dict[str, TaskType] = {t.value: t for t in TaskType}
_second = operator.itemgetter(1)

_default: tuple[object, TaskClassifier] | None = None


def default_task_classifier() -> TaskClassifier:
    """Return a classifier for the effective families and keywords (defaults plus ``mining.json``).

    Raises ConfigError when the user's mining config is invalid.
    """
    global _default
    config = load_mining_config()
    if _default is None or _default[0] is not config:
        _default = (config, TaskClassifier(config.families(), config.keywords()))
    return _default[1]


def classify_calls(
    tool_names: Iterable[str], *, families: Mapping[str, Sequence[str]] | None = None
) -> TaskType:
    """Return the task type of a list of tool calls (by name): the dominant family, else mixed.

    ``families`` replaces the effective families. Raises ConfigError on an invalid mining config.
    """
    classifier = TaskClassifier(families) if families is not None else default_task_classifier()
    return classifier.classify_calls(tool_names)


def classify_task_text(text: str, *, keywords: Mapping[str, Sequence[str]] | None = None) -> TaskType:
    """Return the task type a free-text task most likely is, before any tool has run.

    ``keywords`` replaces the effective keyword table. Raises ConfigError on an invalid config.
    """
    classifier = TaskClassifier({}, keywords) if keywords is not None else default_task_classifier()
    return classifier.classify_text(text)


@dataclass
class TextAccuracy:
    """How well task-text classification predicts the tool-call task type on some sessions.

    ``confusion`` maps (type from the calls, type from the text) to a count.
    """

    total: int = 0
    correct: int = 0
    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def accuracy(self) -> float | None:
        """Correct / total, or None when no session had a call to judge by."""
        return self.correct / self.total if self.total else None


def measure_text_accuracy(
    sessions: Iterable[Session], classifier: TaskClassifier | None = None
) -> TextAccuracy:
    """Return how often the first user message's text type equals the type of the session's calls.

    Sessions without an agent tool call or without a user message are not counted. Raises
    ConfigError on an invalid mining config when ``classifier`` is None.
    """
    classifier = classifier if classifier is not None else default_task_classifier()
    result = TextAccuracy()
    for session in sessions:
        first = next((m.content for m in session.messages if m.role == "user" and m.content), None)
        names = [
            call.name
            for message in session.messages
            if message.role == "assistant"
            for call in message.tool_calls
            if call.requestor == "assistant"
        ]
        if first is None or not names:
            continue
        truth = classifier.classify_calls(names)
        guess = classifier.classify_text(first)
        result.total += 1
        result.correct += truth is guess
        result.confusion[(truth.value, guess.value)] += 1
    return result


# Words that carry no task: greetings, politeness and function words. A user message made of these
# alone ("Hi there!", "ok, thanks") is not where a task is stated.
_FILLER = frozenset(
    "a an and are as at be but by do for from has have hello hey hi how i i'm if in into is it its me "  # noqa: SIM905
    "my of ok okay on or our please so that the their then there these this to up us was we what when "
    "where which with you your can could would should will good morning afternoon evening thanks thank "
    "yes no sure great im id like want need help just".split()
)
_WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Summaries a compaction leaves in place of earlier turns are not the user's request.
_NOT_A_REQUEST = ("[CONTEXT COMPACTION",)
SUBSTANTIVE_WORDS = 3
# What an agent's harness adds to its user's words: Claude Code's reminders of the context (its
# CLAUDE.md, the date, open files), in the first user turn before the request itself.
_HARNESS_NOTE = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)


def request_text(text: str) -> str:
    """Return a user message's own words: ``text`` without the notes an agent's harness added
    (``<system-reminder>`` blocks), stripped. A note cut short (a request truncated inside it) is
    dropped to the end."""
    if "<system-reminder>" in text:
        text = _HARNESS_NOTE.sub("", text)
        unclosed = text.find("<system-reminder>")
        if unclosed >= 0:
            text = text[:unclosed]
    return text.strip()


def is_substantive(text: str) -> bool:
    """True when ``text`` states something beyond greetings and filler (at least three content words)."""
    if text.lstrip().startswith(_NOT_A_REQUEST):
        return False
    words = [w for w in _WORD_RE.findall(text.lower()) if w not in _FILLER]
    return len(words) >= SUBSTANTIVE_WORDS


def opening_request(session: Session) -> str:
    """Return the session's first substantive user message (the task as stated at turn zero).

    Falls back to the first non-empty user message that is not a compaction summary; "" when the
    session has none.
    """
    fallback = ""
    for message in session.messages:
        if message.role != "user" or not message.content:
            continue
        text = request_text(message.content)
        if not text:
            continue
        if is_substantive(text):
            return text
        if not fallback and not text.startswith(_NOT_A_REQUEST):
            fallback = text
    return fallback

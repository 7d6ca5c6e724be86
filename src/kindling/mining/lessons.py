"""Lessons: the calls that failed in past sessions, grouped by kind, with what worked next.

A fresh agent gets wrong what experienced ones got wrong before. Mining keeps, beside the calls
that worked, each failed call paired with the next call that worked in the same turn (before the
user spoke again): the same tool with changed arguments, or another tool. A failure with no later
success in its turn is kept too, as a class with no fix.

Failures are grouped by tool and error class: the error's first line with its values normalised
(``error_class``: ids, numbers, quoted names, uuids, paths, e-mails, hex, placeholders), so "order
#W123 not found" and "order #W456 not found" are one class and "order #W123 not found" and
"payment method not found" are two. A class keeps how many sessions met it and one or two pairs,
redacted and scrubbed like examples, with their provenance.

Pairs from a session that was itself warmed by kindling (its conversation holds a warm-up), or
whose request or calls carry instructions to the agent (``kindling.injection``), are left out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from kindling.injection import instruction_in
from kindling.mining.model import Lesson, LessonCall, LessonPair, OutcomeStatus
from kindling.mining.outcome import OutcomeClassifier
from kindling.mining.passes import canonical_key, truncate
from kindling.mining.personal import PersonalDataScrubber
from kindling.mining.redact import SecretRedactor
from kindling.mining.tasktype import opening_request
from kindling.sessions.model import Session

__all__ = [
    "LESSONS_INTRO",
    "WARM_MARKERS",
    "LessonCollector",
    "PairedCall",
    "error_class",
    "failure_pairs",
    "lessons_by_tool",
    "mine_lessons",
    "paired_calls",
    "warmed_by_kindling",
]

#: The first line of a warm-up's lessons block (``kindling.warmup.build``); here so mining can tell
#: a warmed session without importing the warm-up.
LESSONS_INTRO = (
    "[Lessons from earlier sessions, not this conversation: calls that failed and what worked next.]"
)
#: Text only a kindling warm-up puts in a conversation: its examples' frame and its lessons block.
WARM_MARKERS: tuple[str, ...] = (
    "[Past examples from earlier sessions, shown for reference.",
    "[Lessons from earlier sessions:",
)

_ERROR_CLASS_CHARS = 80
_RESULT_CHARS = 300  # a pair's results, as stored: the error's text and what the fix returned
MAX_PAIRS = 2
_KEPT_CHARS = 4 * _RESULT_CHARS  # of a result, while a build runs: enough to scrub and cut what is stored

_LABEL = re.compile(r"^\s*(?:error|exception|failed|failure)\s*[:!-]\s*", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"<([a-z][a-z0-9_]*?)_\d+>")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE)
_PATH = re.compile(r"(?<![\w<>/])(?:~|\.{1,2})?/?[\w.@%+~-]*(?:/[\w.@%+~-]+)+/?")
# A file name with an extension (README.md, table.csv), not a number (1.5) or an abbreviation.
_FILE = re.compile(r"(?<![\w.<])[A-Za-z_][\w-]*\.[A-Za-z][A-Za-z0-9]{0,4}\b(?![.(])")
_QUOTED = re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|`[^`\n]{0,200}`")
_HEX = re.compile(r"\b(?:0x[0-9a-f]+|[0-9a-f]{12,})\b", re.IGNORECASE)
# A token with a digit in it: an id (#W123, CUST-884422, a1b2c3), a number (12, 3.5, -1), a date.
_IDLIKE = re.compile(r"(?<![\w<])[#$]?-?[A-Za-z_-]*\d[\w.:#-]*(?<![.:-])")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[^\W\d_]{3}")


# The fields a JSON result says what went wrong in, in the order they are asked.
_MESSAGE_FIELDS = ("error", "message", "detail", "reason", "stderr", "output", "content", "result")
_MESSAGE_FIELD = re.compile(r'"(?:error|message|detail|reason|stderr|output)"\s*:\s*"((?:[^"\\]|\\.){1,400})')


def _message(text: str) -> str:
    """Return what a result says went wrong: the message field of a JSON result, else the text."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return stripped
    try:
        data = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        # A result cut short: its first message field still says it.
        found = _MESSAGE_FIELD.search(stripped)
        if found is None:
            return stripped
        try:
            return str(orjson.loads(f'"{found.group(1)}"'))
        except orjson.JSONDecodeError:
            return found.group(1)
    if not isinstance(data, dict):
        return stripped
    for key in _MESSAGE_FIELDS:
        value = data.get(key)
        if isinstance(value, dict):
            value = value.get("message") or value.get("error")
        if isinstance(value, str) and value.strip():
            return value.strip()
    return stripped


def _message_line(message: str) -> str:
    """Return the line of ``message`` that names the error: the exception of a traceback (its last
    line), else the first line with a word in it (a test runner's "F." progress line is none)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback") and len(lines) > 1:
        return lines[-1]
    return next((line for line in lines if _WORD.search(line)), lines[0])


def error_class(text: str) -> str:
    """Return the class of a failed call's error text: its first line with its values normalised.

    The text of a JSON result is its message field (``error``, ``message``, ``detail``, ``reason``,
    ``stderr``, ``output``, ...); a traceback's line is its last (the exception).

    Placeholders keep their type (``<user_id_2>`` -> ``<user_id>``); e-mails become ``<email>``,
    URLs ``<url>``, paths and file names ``<path>``, quoted values ``<value>``, uuids, hex and any token with a
    digit (``#W123``, ``CUST-884422``, ``42``) ``<id>``; a leading ``Error:`` label goes, spacing
    is collapsed and case folded; at most 80 characters. "empty result" when there is no text.

    "order #W123 not found" and "order #W456 not found" get one class ("order <id> not found");
    "payment method not found" another.
    """
    line = _message_line(_message(text))
    if not line:
        return "empty result"
    line = _LABEL.sub("", line)
    line = _PLACEHOLDER.sub(r"<\1>", line)
    line = _EMAIL.sub("<email>", line)
    line = _URL.sub("<url>", line)
    line = _UUID.sub("<id>", line)
    line = _QUOTED.sub("<value>", line)
    line = _PATH.sub("<path>", line)
    line = _FILE.sub("<path>", line)
    line = _HEX.sub("<id>", line)
    line = _IDLIKE.sub("<id>", line)
    line = _SPACE.sub(" ", line).strip().casefold()
    return line[:_ERROR_CLASS_CHARS] or "empty result"


@dataclass(slots=True)
class PairedCall:
    """One call the agent made, paired with its result: where it was, in which turn, how it went.

    ``turn`` counts the user messages before the call; ``status`` is None for a trivial tool (not
    judged).
    """

    name: str
    position: int
    arguments: Mapping[str, Any]
    raw_arguments: str | None
    result: str
    turn: int
    status: OutcomeStatus | None


def paired_calls(
    session: Session, classify: OutcomeClassifier, *, trivial: Collection[str] = ()
) -> list[PairedCall]:
    """Return the agent's own calls in ``session`` (``requestor == "assistant"``) that got a result,
    in the order of their results, each with its turn and outcome (trivial tools: no outcome)."""
    pending: dict[str, tuple[str, int, Mapping[str, Any], str | None, int]] = {}
    calls: list[PairedCall] = []
    turn = 0
    for position, message in enumerate(session.messages):
        role = message.role
        if role == "user":
            turn += 1
        elif role == "assistant":
            for call in message.tool_calls:
                if call.requestor == "assistant" and call.id not in pending:
                    pending[call.id] = (call.name, position, call.arguments, call.raw_arguments, turn)
        elif role == "tool" and message.tool_call_id in pending:
            name, call_position, arguments, raw_arguments, call_turn = pending.pop(message.tool_call_id)
            content = message.content or ""
            status = None if name in trivial else classify.classify(name, content, message.error).status
            calls.append(
                PairedCall(name, call_position, arguments, raw_arguments, content, call_turn, status)
            )
    return calls


def failure_pairs(calls: Sequence[PairedCall]) -> list[tuple[PairedCall, PairedCall | None]]:
    """Return each failed call of ``calls`` with the next call that worked in its turn (or None).

    The fix is a later call (a later message) of the same turn whose outcome is ok: another tool,
    or the same tool with changed arguments (the same call again is a retry, not a fix).
    """
    pairs: list[tuple[PairedCall, PairedCall | None]] = []
    for index, call in enumerate(calls):
        if call.status is not OutcomeStatus.FAILED:
            continue
        key: bytes | None = None
        fix: PairedCall | None = None
        for later in calls[index + 1 :]:
            if later.turn != call.turn:
                if later.turn > call.turn:
                    break
                continue
            if later.status is not OutcomeStatus.OK or later.position <= call.position:
                continue
            if later.name == call.name:
                if key is None:
                    key = canonical_key(call.arguments, call.raw_arguments)
                if canonical_key(later.arguments, later.raw_arguments) == key:
                    continue
            fix = later
            break
        pairs.append((call, fix))
    return pairs


def warmed_by_kindling(session: Session) -> bool:
    """True when ``session``'s conversation holds a kindling warm-up (its examples or its lessons)."""
    for message in session.messages:
        if message.role not in ("user", "assistant", "system"):
            continue
        content = message.content
        if content and "[" in content and any(marker in content for marker in WARM_MARKERS):
            return True
    return False


def _fix_name(failure: _Failure) -> str:
    return failure.fix.name if failure.fix is not None else ""


def _light(call: PairedCall | None) -> Any:
    if call is None or len(call.result) <= _KEPT_CHARS:
        return call
    return PairedCall(
        call.name,
        call.position,
        call.arguments,
        call.raw_arguments,
        call.result[:_KEPT_CHARS],
        call.turn,
        call.status,
    )


@dataclass
class _Failure:
    session_id: str
    source: str
    failed: PairedCall
    fix: PairedCall | None


@dataclass
class _Group:
    failures: list[_Failure] = field(default_factory=list)


def _call(call: PairedCall) -> LessonCall:
    return LessonCall(
        tool_name=call.name,
        arguments=dict(call.arguments),
        raw_arguments=call.raw_arguments,
        result=truncate(call.result.strip(), _RESULT_CHARS),
    )


def _instructs(pair: LessonPair) -> bool:
    calls = [pair.failed] if pair.fix is None else [pair.failed, pair.fix]
    for call in calls:
        texts = [call.result, call.raw_arguments or "", *_strings(call.arguments)]
        if any(instruction_in(text) for text in texts):
            return True
    return False


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


class LessonCollector:
    """Collects the failures of the sessions a build reads, and turns them into lessons.

    Call ``add`` once per mined session with its ``paired_calls``; ``drop_sessions`` leaves out
    sessions found later to carry injected instructions; ``lessons`` returns the classes, most
    sessions first. ``redact`` and ``scrubber`` are the ones examples go through (None: off).
    """

    def __init__(
        self,
        *,
        redact: SecretRedactor | None = None,
        scrubber: PersonalDataScrubber | None = None,
        max_pairs: int = MAX_PAIRS,
    ) -> None:
        self.redact = redact
        self.scrubber = scrubber
        self.max_pairs = max_pairs
        self._groups: dict[tuple[str, str], _Group] = {}
        self._dropped: set[str] = set()
        self._sessions: set[str] = set()  # the sessions with a failure recorded
        #: Sessions whose failures were left out because a kindling warm-up was in them.
        self.warmed = 0

    def add(self, session: Session, calls: Sequence[PairedCall]) -> int:
        """Record the failures of ``session`` (its ``paired_calls``); return how many were recorded."""
        pairs = failure_pairs(calls)
        if not pairs:
            return 0
        if warmed_by_kindling(session):
            self.warmed += 1
            return 0
        self._sessions.add(session.id)
        for failed, fix in pairs:
            group = self._groups.setdefault((failed.name, error_class(failed.result)), _Group())
            # Only a pair's start is ever stored: memory grows with failures, not with their output.
            group.failures.append(_Failure(session.id, session.source or "", _light(failed), _light(fix)))
        return len(pairs)

    @property
    def instructed(self) -> int:
        """How many sessions with a failure were left out for instructions (``drop_sessions``)."""
        return len(self._dropped & self._sessions)

    def counts(self) -> dict[str, int]:
        """Return why sessions' failures were left out: ``lessons_warmed_session`` (a kindling
        warm-up was in it) and ``lessons_prompt_injection`` (its request or calls give instructions)."""
        return {"lessons_warmed_session": self.warmed, "lessons_prompt_injection": self.instructed}

    def drop_sessions(self, sessions: Collection[str]) -> None:
        """Leave out the failures of ``sessions`` (their request or calls give the agent instructions)."""
        self._dropped.update(sessions)

    def _pair(self, failure: _Failure) -> LessonPair:
        pair = LessonPair(
            failed=_call(failure.failed),
            fix=None if failure.fix is None else _call(failure.fix),
            session_id=failure.session_id,
            source=failure.source,
            position=failure.failed.position,
        )
        if self.redact is not None:
            calls = [pair.failed] if pair.fix is None else [pair.failed, pair.fix]
            for call in calls:
                call.arguments = self.redact.value(call.arguments)
                call.result = self.redact.text(call.result)
                if call.raw_arguments is not None:
                    call.raw_arguments = self.redact.text(call.raw_arguments)
        if self.scrubber is not None:
            # One numbering for the pair: the same customer's id reads the same in both calls.
            pair = self.scrubber.scrub(pair)
        return pair

    def _chosen(self, failures: Sequence[_Failure]) -> list[LessonPair]:
        """Return up to ``max_pairs`` pairs of one class, each from its own session, none carrying
        instructions: the most common fix first, then another fix, then the same fix again, then a
        failure with no fix."""
        fixes = Counter(f.fix.name for f in failures if f.fix is not None)
        order = sorted(
            range(len(failures)),
            key=lambda i: (-fixes[_fix_name(failures[i])] if failures[i].fix is not None else 1, i),
        )
        chosen: list[LessonPair] = []
        tried: set[int] = set()

        def take(wanted: Callable[[_Failure], bool]) -> bool:
            for i in order:
                failure = failures[i]
                if i in tried or not wanted(failure):
                    continue
                if any(pair.session_id == failure.session_id for pair in chosen):
                    continue
                tried.add(i)
                pair = self._pair(failure)
                if not _instructs(pair):
                    chosen.append(pair)
                    return True
            return False

        def new_fix(failure: _Failure) -> bool:
            shown = {pair.fix.tool_name for pair in chosen if pair.fix is not None}
            return failure.fix is not None and failure.fix.name not in shown

        while len(chosen) < self.max_pairs:
            if not (take(new_fix) or take(lambda f: f.fix is not None) or take(lambda f: True)):
                break
        return chosen

    def _label(self, raw: str, failure: _Failure) -> str:
        # The class as computed from the error, unless it still holds a secret or personal data
        # (an unquoted name): then the class of the error as scrubbed.
        label = raw
        if self.redact is not None:
            label = self.redact.text(label)
        if self.scrubber is not None:
            context = [dict(failure.failed.arguments), failure.failed.result]
            label = self.scrubber.scrub_texts([label], context=context)[0]
        return raw if label == raw else error_class(label)

    def lessons(self) -> list[Lesson]:
        """Return the lessons: one per (tool, error class), most sessions first, then tool and class.

        A class that still holds personal data or a secret is named from its scrubbed error, so
        classes whose errors differed only in those become one. Classes whose every pair carries instructions are left out.
        """
        merged: dict[tuple[str, str], list[_Failure]] = {}
        for (tool, raw), group in self._groups.items():
            failures = [f for f in group.failures if f.session_id not in self._dropped]
            if not failures:
                continue
            merged.setdefault((tool, self._label(raw, failures[0])), []).extend(failures)
        lessons: list[Lesson] = []
        for (tool, label), failures in merged.items():
            pairs = self._chosen(failures)
            if not pairs:
                continue
            sessions = {f.session_id for f in failures}
            fixed = {f.session_id for f in failures if f.fix is not None}
            lessons.append(
                Lesson(
                    tool_name=tool, error_class=label, sessions=len(sessions), fixed=len(fixed), pairs=pairs
                )
            )
        lessons.sort(key=lambda lesson: (-lesson.sessions, lesson.tool_name, lesson.error_class))
        return lessons


def mine_lessons(
    sessions: Iterable[Session],
    *,
    config: Any = None,
    keep_personal_data: bool = False,
    skip_tools: Collection[str] | None = None,
) -> list[Lesson]:
    """Return the lessons of every session in ``sessions`` (``kindling stats --lessons``), most
    sessions first.

    Calls are judged by ``config``'s outcome rules (default: the effective ``mining.json``); trivial
    tools (or ``skip_tools``) are left out; pairs are redacted and scrubbed as examples are, unless
    ``keep_personal_data``. Sessions that were warmed by kindling, or whose request gives the agent
    instructions, give none. Raises ConfigError on a bad ``mining.json``.
    """
    from kindling.mining.config import load_mining_config
    from kindling.mining.patterns import personal_data_scrubber

    config = config if config is not None else load_mining_config()
    classify = OutcomeClassifier(config.rules())
    trivial = frozenset(skip_tools) if skip_tools is not None else config.trivial()
    patterns = config.secrets()
    collector = LessonCollector(
        redact=SecretRedactor(patterns) if patterns else None,
        scrubber=personal_data_scrubber(config, keep_personal_data=keep_personal_data),
    )
    for session in sessions:
        calls = paired_calls(session, classify, trivial=trivial)
        if collector.add(session, calls) and instruction_in(opening_request(session)):
            collector.drop_sessions((session.id,))
    return collector.lessons()


def lessons_by_tool(lessons: Iterable[Lesson]) -> dict[str, list[Lesson]]:
    """Return ``lessons`` grouped per tool: tools by their sessions with a failure (most first),
    each tool's lessons most sessions first."""
    grouped: dict[str, list[Lesson]] = {}
    for lesson in lessons:
        grouped.setdefault(lesson.tool_name, []).append(lesson)
    for items in grouped.values():
        items.sort(key=lambda lesson: (-lesson.sessions, lesson.error_class))
    return dict(sorted(grouped.items(), key=lambda kv: (-sum(x.sessions for x in kv[1]), kv[0])))

"""Held-out sessions as replay cases: the conversation before a recorded call, and that call.

``prepare_session`` turns a session into what may be sent: OpenAI-format messages with the agent's
own calls and their recorded results (a simulated user's calls are left out), credentials hidden,
and personal data replaced by typed placeholders under one numbering per session, exactly as a
warm-up's examples are (``keep_personal_data`` keeps it). Call ids become ``call_N``, which every
provider accepts. The recorded calls are kept beside the messages in the same form, so a model's
call is compared with the recorded one in the same words.

``recorded_calls`` is the light form, calls only, for the training side (its failure classes and
the tools' schemas). ``cases_of`` makes the cases of a prepared session: at each of its first
``steps`` agent tool-call steps whose calls worked (a session that succeeded only), the
conversation before that step and the calls it made; and at each of its first ``steps`` calls that
failed, the conversation before it, the failed call and its error class.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from kindling.errors import ConversationError
from kindling.eval.score import CALL, FAILED, error_class
from kindling.mining.model import OutcomeStatus
from kindling.mining.outcome import OutcomeClassifier
from kindling.mining.personal import PersonalDataScrubber
from kindling.mining.redact import SecretRedactor
from kindling.sessions.model import Message, Session, ToolCall
from kindling.warmup.inject import validate_conversation

__all__ = [
    "CALL",
    "FAILED",
    "Case",
    "PreparedSession",
    "RecordedCall",
    "cases_of",
    "has_steps",
    "prepare_session",
    "recorded_calls",
    "succeeded",
]


@dataclass(frozen=True)
class RecordedCall:
    """One agent call as it may be sent: ``message`` is the index of its assistant message."""

    message: int
    name: str
    arguments: Any  # the parsed object, or the raw text when it was not JSON
    status: OutcomeStatus
    error_class: str | None


@dataclass
class PreparedSession:
    """A session ready to replay: its messages as sent, its agent calls, and whether it succeeded."""

    session: Session
    messages: list[dict[str, Any]]
    calls: list[RecordedCall]
    succeeded: bool
    dropped: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """One replayed step: the conversation before it (cold) and what the session did there.

    ``expected`` holds the step's calls (name, arguments); for a FAILED case it is the failed call
    alone and ``error_class`` its error class.
    """

    session_id: str
    source: int
    fold: int
    group: int
    kind: str
    step: int
    messages: list[dict[str, Any]]
    expected: tuple[tuple[str, Any], ...]
    error_class: str | None = None

    @property
    def tool(self) -> str:
        """The tool of the first expected call (what per-tool figures are grouped by)."""
        return self.expected[0][0]


def _arguments(call: Any) -> Any:
    if call.raw_arguments is not None:
        return call.raw_arguments
    return dict(call.arguments)


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return orjson.dumps(arguments).decode("utf-8")


class _Cleaner:
    """Hides credentials, then numbers personal values, for one session's parts."""

    def __init__(self, redactor: SecretRedactor | None, scrubber: PersonalDataScrubber | None) -> None:
        self.redactor = redactor
        self.scrubber = scrubber
        self.placeholders: Any = None

    def learn(self, parts: Sequence[Any]) -> None:
        if self.scrubber is not None:
            self.placeholders = self.scrubber.placeholders_for(parts)

    def hide(self, value: Any) -> Any:
        if self.redactor is None:
            return value
        return self.redactor.text(value) if isinstance(value, str) else self.redactor.value(value)

    def text(self, value: str) -> str:
        return self.placeholders.text(value) if self.placeholders is not None else value

    def value(self, value: Any) -> Any:
        if self.placeholders is None:
            return value
        return self.placeholders.text(value) if isinstance(value, str) else self.placeholders.value(value)


def _paired(session: Session) -> Iterator[tuple[ToolCall, Message | None]]:
    """The agent's calls in order, each with the result that answers it (None when none does)."""
    results: dict[str, Message] = {}
    for message in session.messages:
        if message.role == "tool" and message.tool_call_id and message.tool_call_id not in results:
            results[message.tool_call_id] = message
    seen: set[str] = set()
    for message in session.messages:
        if message.role != "assistant":
            continue
        for call in message.tool_calls:
            if call.requestor == "assistant" and call.id not in seen:
                seen.add(call.id)
                yield call, results.get(call.id)


def recorded_calls(
    session: Session,
    classifier: OutcomeClassifier,
    *,
    redactor: SecretRedactor | None = None,
    scrubber: PersonalDataScrubber | None = None,
) -> list[RecordedCall]:
    """Return the agent's answered calls of ``session`` with their arguments in the form they would
    be sent (credentials hidden, personal values as placeholders numbered over the arguments
    alone), for a training side's failure classes and the tools' schemas. ``message`` is -1."""
    cleaner = _Cleaner(redactor, scrubber)
    pairs = [(call, result, cleaner.hide(_arguments(call))) for call, result in _paired(session)]
    cleaner.learn([arguments for _c, _r, arguments in pairs])
    calls: list[RecordedCall] = []
    for call, result, arguments in pairs:
        if result is None:
            continue
        status = classifier.classify(call.name, result.content, result.error).status
        failed = status is OutcomeStatus.FAILED
        calls.append(
            RecordedCall(
                -1,
                call.name,
                cleaner.value(arguments),
                status,
                error_class(result.content or "") if failed else None,
            )
        )
    return calls


def prepare_session(
    session: Session,
    classifier: OutcomeClassifier,
    *,
    redactor: SecretRedactor | None = None,
    scrubber: PersonalDataScrubber | None = None,
) -> PreparedSession:
    """Return ``session`` as it may be sent (see the module docstring).

    A session succeeded when it records no reward or a reward above 0. Messages left out are
    counted in ``dropped`` by reason (a simulated user's calls and their results, results that
    answer no call, empty messages). Error classes are taken from the results as recorded (they
    are never sent).
    """
    cleaner = _Cleaner(redactor, scrubber)
    agent_calls: dict[str, str] = {}
    user_calls: set[str] = set()
    dropped: dict[str, int] = {}

    def drop(reason: str) -> None:
        dropped[reason] = dropped.get(reason, 0) + 1

    # Credentials first, then one placeholder numbering over everything the session says.
    hidden: list[tuple[Message, str, tuple[tuple[str, str, Any, str], ...]]] = []
    for message in session.messages:
        calls = tuple(
            (call.id, call.name, cleaner.hide(_arguments(call)), call.requestor)
            for call in message.tool_calls
        )
        hidden.append((message, cleaner.hide(message.content or ""), calls))
    cleaner.learn([part for _m, text, calls in hidden for part in (text, *(c[2] for c in calls))])

    messages: list[dict[str, Any]] = []
    recorded: list[RecordedCall] = []
    pending: dict[str, int] = {}  # call id -> index in ``recorded``
    ids: dict[str, str] = {}
    for message, text, calls in hidden:
        content = cleaner.text(text)
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            if call_id in user_calls:
                drop("user_tool_result")
                continue
            if call_id not in pending:
                drop("unanswered_result")
                continue
            index = pending.pop(call_id)
            name = agent_calls[call_id]
            status = classifier.classify(name, message.content, message.error).status
            failed = status is OutcomeStatus.FAILED
            recorded[index] = RecordedCall(
                recorded[index].message,
                name,
                recorded[index].arguments,
                status,
                error_class(message.content or "") if failed else None,
            )
            messages.append({"role": "tool", "tool_call_id": ids[call_id], "content": content})
            continue
        own: list[dict[str, Any]] = []
        for call_id, name, arguments, requestor in calls:
            if requestor != "assistant" or message.role != "assistant":
                user_calls.add(call_id)
                drop("user_tool_call")
                continue
            if call_id in agent_calls:
                drop("repeated_call_id")
                continue
            sent = cleaner.value(arguments)
            agent_calls[call_id] = name
            ids[call_id] = f"call_{len(ids) + 1}"
            pending[call_id] = len(recorded)
            recorded.append(RecordedCall(len(messages), name, sent, OutcomeStatus.UNKNOWN, None))
            own.append(
                {
                    "id": ids[call_id],
                    "type": "function",
                    "function": {"name": name, "arguments": _arguments_text(sent)},
                }
            )
        if not content and not own:
            drop("empty_message")
            continue
        entry: dict[str, Any] = {"role": message.role, "content": content or None}
        if message.role != "assistant":
            entry["content"] = content
        if own:
            entry["tool_calls"] = own
        messages.append(entry)
    return PreparedSession(session, messages, recorded, succeeded(session), dropped)


def succeeded(session: Session) -> bool:
    """True when a session records no reward or a reward above 0."""
    return session.reward is None or session.reward > 0


def has_steps(session: Session, calls: Sequence[RecordedCall]) -> bool:
    """True when ``calls`` (``recorded_calls`` of ``session``) give the session a step to replay."""
    won = succeeded(session)
    return any(
        call.status is OutcomeStatus.FAILED or (won and call.status is OutcomeStatus.OK) for call in calls
    )


def _conversation_before(prepared: PreparedSession, index: int) -> list[dict[str, Any]] | None:
    messages = prepared.messages[:index]
    if not any(m["role"] == "user" for m in messages):
        return None
    try:
        validate_conversation(messages)
    except ConversationError:
        return None
    return messages


def cases_of(
    prepared: PreparedSession, *, source: int, fold: int, group: int, steps: int, skipped: dict[str, int]
) -> list[Case]:
    """Return the CALL and FAILED cases of ``prepared`` (at most ``steps`` of each kind).

    A step is left out, counted in ``skipped`` by reason, when the conversation before it has no
    user turn yet or breaks the tool-call protocol (a call never answered).
    """
    cases: list[Case] = []
    by_message: dict[int, list[RecordedCall]] = {}
    for call in prepared.calls:
        by_message.setdefault(call.message, []).append(call)
    session_id = prepared.session.id
    call_steps = 0
    failed_steps = 0
    for step, (index, calls) in enumerate(sorted(by_message.items())):
        worked = all(c.status is OutcomeStatus.OK for c in calls)
        failed = [c for c in calls if c.status is OutcomeStatus.FAILED]
        wanted_call = prepared.succeeded and worked and call_steps < steps
        wanted_failed = bool(failed) and failed_steps < steps
        if not (wanted_call or wanted_failed):
            continue
        before = _conversation_before(prepared, index)
        if before is None:
            key = (
                "before_first_request"
                if not any(m["role"] == "user" for m in prepared.messages[:index])
                else ("broken_conversation")
            )
            skipped[key] = skipped.get(key, 0) + 1
            continue
        if wanted_call:
            call_steps += 1
            expected = tuple((c.name, c.arguments) for c in calls)
            cases.append(Case(session_id, source, fold, group, CALL, step, before, expected))
        if wanted_failed:
            failed_steps += 1
            first = failed[0]
            cases.append(
                Case(
                    session_id,
                    source,
                    fold,
                    group,
                    FAILED,
                    step,
                    before,
                    ((first.name, first.arguments),),
                    first.error_class,
                )
            )
    return cases

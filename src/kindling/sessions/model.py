"""The canonical session model every reader produces and every later layer consumes.

Frozen, slotted dataclasses rather than pydantic models: readers build millions of these on the
mining hot path, and validation happens where data enters (the readers), not on every copy.
Readers build them through ``new_message``/``new_tool_call`` (same objects, about half the cost).
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import orjson

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the model made it.

    ``arguments`` is the parsed argument object. When the model sent arguments that are not a
    JSON object, ``arguments`` is empty and ``raw_arguments`` keeps the text exactly as sent.
    ``requestor`` is ``"assistant"`` for the agent's own calls; tau2-bench's simulated user
    can call tools too, and those calls carry ``"user"`` and are never counted as the agent's.
    Treat ``arguments`` as read-only: a reader may share one parsed object between calls that
    sent the same argument text.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    requestor: str = "assistant"

    def as_dict(self) -> dict[str, Any]:
        """Return the call in OpenAI shape (``arguments`` as a JSON string, raw text kept as is)."""
        arguments = self.raw_arguments if self.raw_arguments is not None else _json_text(self.arguments)
        data: dict[str, Any] = {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": arguments},
        }
        if self.requestor != "assistant":
            data["requestor"] = self.requestor
        return data


@dataclass(frozen=True, slots=True)
class Message:
    """One message in OpenAI chat shape.

    Tool results are ``role="tool"`` messages with ``tool_call_id`` naming the call they answer
    and ``name`` the tool. ``error`` is an explicit error flag from the source (tau2-bench sets
    one on tool results); ``None`` means the source said nothing. ``reasoning`` is the model's own
    reasoning text for an assistant turn where the source keeps it (Hermes ``reasoning`` /
    ``reasoning_content``, the same keys in OpenAI-style logs); it is never part of ``content``.
    """

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    error: bool | None = None
    timestamp: float | None = None
    reasoning: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Return the message as an OpenAI chat message dict (extras only when set)."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.as_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.error is not None:
            data["error"] = self.error
        if self.timestamp is not None:
            data["timestamp"] = self.timestamp
        if self.reasoning is not None:
            data["reasoning"] = self.reasoning
        return data


@dataclass(frozen=True, slots=True)
class Session:
    """One agent session: who ran it, how it ended, and its messages in order.

    ``reward`` is set only where the source records one (tau-bench: 1.0 is success).
    ``metadata`` holds source-specific extras (task_id, trial, platform, title, ...).
    ``cwd`` is the folder the agent worked in, where the source records one (coding agents do).
    """

    id: str
    source: str
    messages: tuple[Message, ...] = ()
    started_at: float | None = None
    ended_at: float | None = None
    end_reason: str | None = None
    model: str | None = None
    parent_id: str | None = None
    reward: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    cwd: str | None = None

    @property
    def message_count(self) -> int:
        """Number of messages in the session."""
        return len(self.messages)

    def as_dict(self) -> dict[str, Any]:
        """Return the session as a JSON-ready dict with OpenAI-shaped messages."""
        return {
            "id": self.id,
            "source": self.source,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "end_reason": self.end_reason,
            "model": self.model,
            "parent_id": self.parent_id,
            "reward": self.reward,
            "metadata": dict(self.metadata),
            "cwd": self.cwd,
            "messages": [message.as_dict() for message in self.messages],
        }


@dataclass
class ReadReport:
    """What a read saw: counts of what was read and of what was skipped, by reason.

    ``tool_calls`` and ``tool_results`` count the agent's calls and the results answering them.
    Calls a simulated user made (tau2-bench, ``requestor="user"``) are not the agent's: they are
    counted apart in ``user_tool_calls``, and their results in neither.

    Readers update the report they are given as they stream, so a caller can show progress and,
    at the end, say exactly what was skipped and why. Nothing malformed is ever skipped silently.
    """

    sessions: int = 0
    messages: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    user_tool_calls: int = 0

    def skip(self, reason: str, count: int = 1) -> None:
        """Count ``count`` skipped things under ``reason`` (a short, stable, snake_case key)."""
        self.skipped[reason] += count

    def add_session(self, session: Session) -> None:
        """Count a session that is about to be yielded, with its messages, calls and results.

        A tool result is assumed to answer the agent unless it names a call the user made before it.
        """
        messages = session.messages
        self.sessions += 1
        self.messages += len(messages)
        calls = results = 0
        user_calls: set[str] | None = None  # the ids of the calls the user made, once there is one
        for message in messages:
            if message.tool_calls:
                for call in message.tool_calls:
                    if call.requestor == "assistant":
                        calls += 1
                    else:
                        self.user_tool_calls += 1
                        if user_calls is None:
                            user_calls = set()
                        user_calls.add(call.id)
            if message.role == "tool" and (user_calls is None or message.tool_call_id not in user_calls):
                results += 1
        self.tool_calls += calls
        self.tool_results += results

    def add_counted(self, messages: int, tool_calls: int, tool_results: int) -> None:
        """Count a session about to be yielded whose reader counted its contents while building it.

        The same counts as ``add_session`` without walking the messages again.
        """
        self.sessions += 1
        self.messages += messages
        self.tool_calls += tool_calls
        self.tool_results += tool_results

    def merge(self, other: ReadReport) -> None:
        """Add another report's counts to this one."""
        self.sessions += other.sessions
        self.messages += other.messages
        self.tool_calls += other.tool_calls
        self.tool_results += other.tool_results
        self.user_tool_calls += other.user_tool_calls
        self.skipped.update(other.skipped)

    def as_dict(self) -> dict[str, Any]:
        """Return the counts with the documented JSON keys."""
        return {
            "sessions": self.sessions,
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "tool_results": self.tool_results,
            "user_tool_calls": self.user_tool_calls,
            "skipped": dict(sorted(self.skipped.items())),
        }


def _json_text(value: Mapping[str, Any]) -> str:
    return orjson.dumps(dict(value), default=str).decode("utf-8")


# Readers build hundreds of thousands of messages per second on the mining hot path. A frozen
# dataclass's __init__ pays one object.__setattr__ call per field. These twins have the same slots
# (so the same memory layout), plain attribute stores in __init__ (specialised by the interpreter),
# and then become the real class: the result is an ordinary, still frozen Message or ToolCall, equal
# to one built the slow way, for about half the cost. Only for readers passing checked values.


class _MessageInit:
    __slots__ = Message.__slots__

    def __init__(
        self,
        role: Role,
        content: str | None,
        tool_calls: tuple[ToolCall, ...],
        tool_call_id: str | None,
        name: str | None,
        error: bool | None,
        timestamp: float | None,
        reasoning: str | None = None,
    ) -> None:
        self.role = role
        self.content = content
        self.tool_calls = tool_calls
        self.tool_call_id = tool_call_id
        self.name = name
        self.error = error
        self.timestamp = timestamp
        self.reasoning = reasoning
        self.__class__ = Message  # type: ignore[assignment]


class _ToolCallInit:
    __slots__ = ToolCall.__slots__

    def __init__(
        self, id: str, name: str, arguments: Mapping[str, Any], raw_arguments: str | None, requestor: str
    ) -> None:
        self.id = id
        self.name = name
        self.arguments = arguments
        self.raw_arguments = raw_arguments
        self.requestor = requestor
        self.__class__ = ToolCall  # type: ignore[assignment]


class _SessionInit:
    __slots__ = Session.__slots__

    def __init__(
        self,
        id: str,
        source: str,
        messages: tuple[Message, ...],
        started_at: float | None,
        ended_at: float | None,
        end_reason: str | None,
        model: str | None,
        parent_id: str | None,
        reward: float | None,
        metadata: Mapping[str, Any],
        cwd: str | None = None,
    ) -> None:
        self.id = id
        self.source = source
        self.messages = messages
        self.started_at = started_at
        self.ended_at = ended_at
        self.end_reason = end_reason
        self.model = model
        self.parent_id = parent_id
        self.reward = reward
        self.metadata = metadata
        self.cwd = cwd
        self.__class__ = Session  # type: ignore[assignment]


# Typed as what they return: calling one of these gives a Message / ToolCall / Session.
new_message = cast(
    "Callable[[Role, str | None, tuple[ToolCall, ...], str | None, str | None, bool | None, float | None,"
    " str | None], Message]",
    _MessageInit,
)
new_tool_call = cast("Callable[[str, str, Mapping[str, Any], str | None, str], ToolCall]", _ToolCallInit)
new_session = cast(
    "Callable[[str, str, tuple[Message, ...], float | None, float | None, str | None, str | None,"
    " str | None, float | None, Mapping[str, Any], str | None], Session]",
    _SessionInit,
)


def build_message(
    role: Role,
    content: str | None,
    tool_calls: tuple[ToolCall, ...],
    tool_call_id: str | None,
    name: str | None,
    error: bool | None,
    timestamp: float | None,
    reasoning: str | None = None,
) -> Message:
    """Return ``Message(role, content, tool_calls, tool_call_id, name, error, timestamp, reasoning)``, built fast."""
    return new_message(role, content, tool_calls, tool_call_id, name, error, timestamp, reasoning)


def build_tool_call(
    id: str, name: str, arguments: Mapping[str, Any], raw_arguments: str | None, requestor: str
) -> ToolCall:
    """Return ``ToolCall(id, name, arguments, raw_arguments, requestor)``, built fast (see build_message)."""
    return new_tool_call(id, name, arguments, raw_arguments, requestor)


# ------------------------------------------------------------------------------------- row form

#: A message as a plain tuple of its fields, in ``Message``'s field order.
MessageRow = tuple[
    Role,
    "str | None",
    "tuple[ToolCall, ...]",
    "str | None",
    "str | None",
    "bool | None",
    "float | None",
    "str | None",
]
#: ``message_row(message)`` returns the message in row form.
message_row = cast("Callable[[Message], MessageRow]", operator.attrgetter(*Message.__slots__))
#: A session in row form: the session (its ``messages`` may be left empty) and its messages as rows.
SessionRows = tuple[Session, list[MessageRow]]


def with_messages(session: Session, rows: list[MessageRow]) -> Session:
    """Return ``session`` holding ``rows`` as its messages (built fast; see ``new_message``)."""
    new_object = object.__new__
    blank = _MessageInit
    message_class = Message
    messages: list[Message] = []
    append = messages.append
    for role, content, tool_calls, tool_call_id, name, error, timestamp, reasoning in rows:
        message: Any = new_object(blank)
        message.role = role
        message.content = content
        message.tool_calls = tool_calls
        message.tool_call_id = tool_call_id
        message.name = name
        message.error = error
        message.timestamp = timestamp
        message.reasoning = reasoning
        message.__class__ = message_class
        append(message)
    return Session(
        session.id,
        session.source,
        tuple(messages),
        session.started_at,
        session.ended_at,
        session.end_reason,
        session.model,
        session.parent_id,
        session.reward,
        session.metadata,
        session.cwd,
    )


class SessionStream:
    """An iterator of Sessions that can hand the same sessions over in row form instead.

    Readers that hold their rows as tuples anyway (the Hermes database reader) return one, so a
    consumer that only reads fields (mining) can skip building a Message object per row:
    ``session_rows(stream)`` takes the row form when the stream has not been iterated yet.
    ``on_rows`` is called when the row form is taken, before the first row is read: a reader may
    then leave out what only Message objects carry (name, timestamp, reasoning are None in rows).
    """

    __slots__ = ("_on_assemble", "_on_rows", "_rows", "_started")

    def __init__(
        self,
        rows: Iterator[SessionRows],
        *,
        on_rows: Callable[[], None] | None = None,
        on_assemble: Callable[[Callable[..., Iterator[Any]]], None] | None = None,
    ) -> None:
        self._rows = rows
        self._started = False
        self._on_rows = on_rows
        self._on_assemble = on_assemble

    def __iter__(self) -> SessionStream:
        return self

    def __next__(self) -> Session:
        self._started = True
        session, rows = next(self._rows)
        return with_messages(session, rows)

    def rows(self) -> Iterator[SessionRows]:
        """Return the sessions in row form; the stream is then consumed through that iterator.

        Raises ValueError when sessions were already taken from the stream.
        """
        if self._started:
            raise ValueError("this session stream has already been read")
        self._started = True
        if self._on_rows is not None:
            self._on_rows()  # the reader may then read less (what row form leaves empty)
        return self._rows

    def assembled(self, assembler: Callable[..., Iterator[Any]]) -> Iterator[Any] | None:
        """Return what ``assembler`` yields, run by the reader over its rows in place of its own assembly.

        For a consumer that would take every session apart at once (mining a Hermes database,
        ``kindling.mining.hermes_rows``): ``assembler`` takes the arguments of
        ``kindling.sessions.hermes.assemble_rows`` (lean rows) and the stream is consumed through
        the iterator returned. None when the reader has no such hook or the stream was started.
        """
        if self._on_assemble is None or self._started:
            return None
        self._started = True
        self._on_assemble(assembler)  # before the first row is read
        return self._rows

    def close(self) -> None:
        """Stop reading: the reader closes what it opened."""
        close = getattr(self._rows, "close", None)
        if close is not None:
            close()


def session_rows(sessions: Iterable[Session]) -> Iterator[SessionRows]:
    """Return ``sessions`` in row form: a fresh ``SessionStream``'s own rows, else each converted."""
    if isinstance(sessions, SessionStream) and not sessions._started:
        return sessions.rows()
    return ((session, list(map(message_row, session.messages))) for session in sessions)

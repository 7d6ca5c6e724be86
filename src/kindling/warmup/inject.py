"""Put warm messages into an existing conversation, and check a conversation's tool protocol."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from kindling.errors import ConversationError
from kindling.warmup.build import is_valid_tool_call_id

__all__ = ["inject", "leading_system_count", "validate_conversation"]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def leading_system_count(messages: Sequence[Mapping[str, Any]]) -> int:
    """Return how many messages at the start are system (or developer) messages."""
    count = 0
    for message in messages:
        if message.get("role") not in ("system", "developer"):
            break
        count += 1
    return count


def _call_ids(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    ids: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls") or ():
            if isinstance(call, Mapping) and call.get("id"):
                ids.add(str(call["id"]))
    return ids


def _renamed(warm: list[dict[str, Any]], taken: set[str]) -> list[dict[str, Any]]:
    # The caller's ids win; ours get a suffix until they are unique and still <= 40 characters.
    # A new id must also miss every other warm id, or renaming "a" to "a_1" could meet our own "a_1".
    warm_ids = _call_ids(warm)
    used = taken | warm_ids
    mapping: dict[str, str] = {}
    for old in sorted(warm_ids & taken):
        n = 1
        new = old
        while new in used:
            suffix = f"_{n}"
            new = old[: 40 - len(suffix)] + suffix
            n += 1
        mapping[old] = new
        used.add(new)
    for message in warm:
        for call in message.get("tool_calls") or ():
            call["id"] = mapping.get(call["id"], call["id"])
        if message.get("tool_call_id") in mapping:
            message["tool_call_id"] = mapping[message["tool_call_id"]]
    return warm


def inject(
    conversation: Sequence[Mapping[str, Any]], warm_messages: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Return a new list: the leading system messages, then ``warm_messages``, then the rest.

    Neither input is mutated (messages are copied). Warm system messages are merged after the
    caller's leading system messages, never before them. Tool-call ids of the warm messages that
    clash with the conversation's are renamed.
    """
    original = [dict(m) for m in conversation]
    warm = copy.deepcopy([dict(m) for m in warm_messages])
    clashes = _call_ids(original) & _call_ids(warm)
    if clashes:
        warm = _renamed(warm, _call_ids(original))
    head = leading_system_count(original)
    warm_head = leading_system_count(warm)
    return original[:head] + warm[:warm_head] + warm[warm_head:] + original[head:]


def validate_conversation(messages: Sequence[Mapping[str, Any]], *, strict_ids: bool = False) -> None:
    """Check the tool-call protocol of an OpenAI-format conversation; return None when it holds.

    Every message has a known role; every tool call has a unique, provider-safe id and is answered
    exactly once by a tool message that follows it before the next user or assistant message; every
    tool message answers a pending call. ``strict_ids`` also requires ids of at most 40 characters
    from ``[A-Za-z0-9_-]`` (what kindling generates; some providers' own ids use other characters).
    Raises ConversationError (with ``.index``) otherwise.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise ConversationError("A conversation must be a list of messages.")
    seen: set[str] = set()
    pending: dict[str, int] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ConversationError(f"Message {index} is not an object.", index=index)
        role = message.get("role")
        if role not in _ROLES:
            raise ConversationError(f"Message {index} has an unknown role {role!r}.", index=index)
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not call_id:
                raise ConversationError(f"Tool message {index} has no tool_call_id.", index=index)
            if not isinstance(call_id, str):
                raise ConversationError(
                    f"Tool message {index} has a tool_call_id that is not a string.", index=index
                )
            if call_id not in pending:
                why = "was already answered" if call_id in seen else "does not match any earlier call"
                raise ConversationError(
                    f"Tool message {index} answers call {call_id!r}, which {why}.", index=index
                )
            del pending[call_id]
            continue
        if pending:
            first = next(iter(pending))
            raise ConversationError(
                f"Tool call {first!r} (message {pending[first]}) is not answered before message {index}.",
                index=pending[first],
            )
        calls = message.get("tool_calls") or ()
        if calls and role != "assistant":
            raise ConversationError(f"Message {index} has tool calls but is not an assistant.", index=index)
        for call in calls:
            call_id = call.get("id") if isinstance(call, Mapping) else None
            if not isinstance(call_id, str) or not call_id:
                raise ConversationError(f"A tool call in message {index} has no id.", index=index)
            if strict_ids and not is_valid_tool_call_id(call_id):
                raise ConversationError(
                    f"Tool call id {call_id!r} in message {index} is longer than 40 characters "
                    "or uses characters other than letters, digits, '-' and '_'.",
                    index=index,
                )
            if call_id in seen:
                raise ConversationError(
                    f"Tool call id {call_id!r} is used twice (message {index}).", index=index
                )
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping) or not function.get("name"):
                raise ConversationError(
                    f"Tool call {call_id!r} in message {index} has no function name.", index=index
                )
            seen.add(call_id)
            pending[call_id] = index
    if pending:
        first = next(iter(pending))
        raise ConversationError(
            f"Tool call {first!r} (message {pending[first]}) is never answered.", index=pending[first]
        )

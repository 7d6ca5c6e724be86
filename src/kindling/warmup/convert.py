"""OpenAI chat messages -> Anthropic Messages API format, and -> OpenAI Responses API items.

Anthropic: system messages are split out into ``system``; assistant tool calls become ``tool_use``
blocks; tool results become ``tool_result`` blocks in a user turn; consecutive turns of one role are
merged so user and assistant strictly alternate, starting with a user turn as the API requires.

Responses: each message becomes a ``message`` item of its role, each tool call a ``function_call``
item and each tool result a ``function_call_output`` item with the same ``call_id``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from kindling.errors import ConversationError

__all__ = ["anthropic_prefix", "to_anthropic", "to_responses_items", "with_system_text"]


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)
    return str(content)


def _tool_input(arguments: Any, call_id: str) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not arguments:
        return {}
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"input": str(arguments)}
    if not isinstance(parsed, dict):
        raise ConversationError(f"Arguments of tool call {call_id!r} are not a JSON object.")
    return parsed


def to_anthropic(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Return ``{"system": str, "messages": [...]}`` for an OpenAI-format conversation.

    Raises ConversationError for a message with an unknown role or unparseable tool arguments.
    """
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})

    for index, message in enumerate(messages):
        role = message.get("role")
        if role in ("system", "developer"):
            text = _text(message.get("content"))
            if text:
                system_parts.append(text)
        elif role == "user":
            add("user", [{"type": "text", "text": _text(message.get("content")) or "(empty)"}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            text = _text(message.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                call_id = str(call.get("id") or "")
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": str(function.get("name") or ""),
                        "input": _tool_input(function.get("arguments"), call_id),
                    }
                )
            add("assistant", blocks or [{"type": "text", "text": "(empty)"}])
        elif role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": str(message.get("tool_call_id") or ""),
                        "content": _text(message.get("content")),
                    }
                ],
            )
        else:
            raise ConversationError(f"Message {index} has an unknown role {role!r}.", index=index)
    if turns and turns[0]["role"] != "user":
        # The Messages API requires the first turn to be the user's.
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continued)"}]})
    return {"system": "\n\n".join(system_parts), "messages": turns}


def anthropic_prefix(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Return warm-up ``messages`` as ``{"system": ..., "messages": [...]}`` turns to put before a
    request's own, or None when there are none.

    The turns end with an assistant turn, so the request's first (user) turn follows in
    alternation. Raises ConversationError as ``to_anthropic`` does.
    """
    converted = to_anthropic(messages)
    turns = converted["messages"]
    if not turns:
        return None
    if turns[-1]["role"] != "assistant":
        turns.append({"role": "assistant", "content": [{"type": "text", "text": "(continued)"}]})
    return converted


def to_responses_items(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return an OpenAI-format conversation as Responses API input items.

    An assistant message's text (if any) comes before its calls, as a model's output holds them.
    Raises ConversationError for a message with an unknown role.
    """
    items: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role in ("system", "developer", "user"):
            items.append({"type": "message", "role": role, "content": _text(message.get("content"))})
        elif role == "assistant":
            text = _text(message.get("content"))
            if text:
                items.append({"type": "message", "role": "assistant", "content": text})
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                arguments = function.get("arguments")
                items.append(
                    {
                        "type": "function_call",
                        "call_id": str(call.get("id") or ""),
                        "name": str(function.get("name") or ""),
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else orjson.dumps(arguments or {}).decode(),
                    }
                )
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id") or ""),
                    "output": _text(message.get("content")),
                }
            )
        else:
            raise ConversationError(f"Message {index} has an unknown role {role!r}.", index=index)
    return items


def with_system_text(system: Any, text: str) -> Any:
    """Return an Anthropic ``system`` (text or blocks) with ``text`` added at its end."""
    if isinstance(system, list):
        return [*system, {"type": "text", "text": text}]
    if isinstance(system, str) and system:
        return f"{system}\n\n{text}"
    return text

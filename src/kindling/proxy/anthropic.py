"""Anthropic's Messages API through the proxy: requests and replies in kindling's canonical shape.

The proxy recognises, records and warms a ``POST /v1/messages`` conversation the same way as a chat
completion; this module translates. A request's ``system`` and turns become OpenAI-format messages
(``canonical_messages``): text blocks become a message's content, ``tool_use`` blocks its
``tool_calls``, each ``tool_result`` block a ``tool`` message (``is_error`` kept as ``error``), a
``thinking`` block its ``reasoning_content``. The conversion is per turn, so a request that
repeats an earlier one's turns repeats its messages, and the prefix hashes match. A reply is
converted the same way, whole (``reply_of_message``) or rebuilt from its event stream
(``StreamedMessage``).

A warm-up goes in as turns before the request's first turn (``with_block``), ending with an
assistant turn so user and assistant still alternate; a template's system addendum goes last in
``system``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from kindling.proxy.reply import EventStream, joined_text

__all__ = [
    "StreamedMessage",
    "canonical_messages",
    "canonical_turn",
    "reply_of_message",
    "tool_names",
    "with_block",
]


def _text(content: Any, placeholder: bool = True) -> str:
    """The text of a ``system``, a turn's content or a tool result: strings and text blocks joined.

    Other blocks (an image, a document) stand as ``[image]``, so a message that only shows one is not
    empty; ``placeholder=False`` leaves them out.
    """
    return joined_text(content, _block_text if placeholder else _block_text_only)


def _block_text_only(block: Mapping[str, Any]) -> str | None:
    text = block.get("text")
    return text if block.get("type") == "text" and isinstance(text, str) else None


def _block_text(block: Mapping[str, Any]) -> str | None:
    text = _block_text_only(block)
    if text is not None:
        return text
    kind = block.get("type")
    return f"[{kind}]" if isinstance(kind, str) and kind not in ("thinking", "redacted_thinking") else None


def canonical_turn(turn: Any) -> list[dict[str, Any]]:
    """Return the OpenAI-format messages of one Messages API turn (a user turn may give several).

    A user turn's tool results come first, one ``tool`` message each, then its text as a ``user``
    message; an assistant turn is one message. A turn that is not an object, or has another role,
    is kept as one message of that role, for the reader to count and skip.
    """
    if not isinstance(turn, Mapping):
        return [{"role": "unknown", "content": None}]
    role = turn.get("role")
    content = turn.get("content")
    if role == "assistant":
        return [_assistant(content)]
    if role != "user":
        return [{"role": str(role), "content": _text(content) or None}]
    if not isinstance(content, list):
        return [{"role": "user", "content": _text(content)}]
    out: list[dict[str, Any]] = []
    rest: list[Any] = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            result: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": str(block.get("tool_use_id") or ""),
                "content": _text(block.get("content")),
            }
            if block.get("is_error") is True:
                result["error"] = True
            out.append(result)
        else:
            rest.append(block)
    if rest or not out:
        out.append({"role": "user", "content": _text(rest)})
    return out


def _assistant(content: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": _text(content, placeholder=False) or None}
    if not isinstance(content, list):
        return message
    calls = []
    thinking = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in ("tool_use", "server_tool_use"):
            arguments = block.get("input")
            calls.append(
                {
                    "id": str(block.get("id") or ""),
                    "type": "function",
                    "function": {
                        "name": str(block.get("name") or ""),
                        "arguments": orjson.dumps(arguments if arguments is not None else {}).decode(),
                    },
                }
            )
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thinking.append(block["thinking"])
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message["reasoning_content"] = "\n".join(thinking)
    return message


def canonical_messages(data: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Return a Messages API request's ``system`` and turns as OpenAI-format messages.

    None when the body has no ``messages`` list (it is not a request kindling understands).
    """
    turns = data.get("messages")
    if not isinstance(turns, list):
        return None
    out: list[dict[str, Any]] = []
    system = _text(data.get("system"), placeholder=False)
    if system:
        out.append({"role": "system", "content": system})
    for turn in turns:
        out.extend(canonical_turn(turn))
    return out


def tool_names(tools: Any) -> list[str]:
    """The names of the tools a Messages API request declares (client and server tools alike)."""
    names: list[str] = []
    if isinstance(tools, list):
        for tool in tools:
            name = tool.get("name") if isinstance(tool, Mapping) else None
            if isinstance(name, str) and name:
                names.append(name)
    return names


def with_block(data: Mapping[str, Any], block: bytes) -> bytes:
    """The request body with the warm-up ``block`` (``anthropic_prefix``'s JSON) before its turns.

    The same block gives the same bytes on every request of the conversation (orjson writes a
    parsed value the same way each time), so a provider's prompt cache keeps hitting.
    """
    from kindling.warmup.convert import with_system_text  # warm-up's package loads its models

    warm = orjson.loads(block)
    spliced = dict(data)
    spliced["messages"] = [*warm["messages"], *data["messages"]]
    if warm.get("system"):
        spliced["system"] = with_system_text(data.get("system"), warm["system"])
    return orjson.dumps(spliced)


def reply_of_message(data: Any) -> tuple[dict[str, Any], str | None, str | None] | None:
    """Return ``(message, model, stop_reason)`` of a Messages API response body, or None."""
    if not isinstance(data, Mapping) or data.get("type") != "message" or data.get("role") != "assistant":
        return None
    model = data.get("model")
    stop = data.get("stop_reason")
    return (
        _assistant(data.get("content")),
        model if isinstance(model, str) else None,
        stop if isinstance(stop, str) else None,
    )


class StreamedMessage(EventStream):
    """Rebuilds the reply from a Messages API event stream, fed as bytes arrive.

    ``done`` turns true at ``message_stop``; a stream cut off before it (or ended by an ``error``
    event) leaves ``done`` false, and the proxy then records no reply.
    """

    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[int, dict[str, Any]] = {}
        self._partial_json: dict[int, list[str]] = {}
        self.model: str | None = None
        self.finish_reason: str | None = None

    def _data(self, data: bytes) -> None:
        payload = self._json(data)
        if payload is None:
            return
        kind = payload.get("type")
        index = payload.get("index")
        if kind == "message_start" and isinstance(payload.get("message"), Mapping):
            model = payload["message"].get("model")
            self.model = model if isinstance(model, str) else self.model
        elif kind == "content_block_start" and isinstance(index, int):
            block = payload.get("content_block")
            self.blocks[index] = dict(block) if isinstance(block, Mapping) else {}
        elif kind == "content_block_delta" and isinstance(index, int):
            self._delta(index, payload.get("delta"))
        elif kind == "message_delta" and isinstance(payload.get("delta"), Mapping):
            stop = payload["delta"].get("stop_reason")
            self.finish_reason = stop if isinstance(stop, str) else self.finish_reason
        elif kind == "message_stop":
            self.done = True

    def _delta(self, index: int, delta: Any) -> None:
        if not isinstance(delta, Mapping):
            return
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            block["text"] = block.get("text", "") + delta["text"]
        elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            self._partial_json.setdefault(index, []).append(delta["partial_json"])
        elif kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            block["thinking"] = block.get("thinking", "") + delta["thinking"]

    def message(self) -> dict[str, Any]:
        """The reply as an OpenAI-format assistant message (``canonical_turn`` of the whole message)."""
        content = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            pieces = self._partial_json.get(index)
            if pieces:
                text = "".join(pieces)
                try:
                    block["input"] = orjson.loads(text)
                except orjson.JSONDecodeError:
                    block["input"] = {"input": text}
            content.append(block)
        return _assistant(content)

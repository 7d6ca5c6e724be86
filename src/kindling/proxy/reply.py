"""The assistant reply of a chat completion, from a whole response or from its server-sent events."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

__all__ = ["EventStream", "StreamedReply", "event_end", "joined_text", "reply_of_response"]


def joined_text(content: Any, part_text: Callable[[Mapping[str, Any]], str | None]) -> str:
    """The text of a content given as a string or as a list of parts, the parts' texts joined by lines.

    A string part is its own text; ``part_text`` says what an object part stands for (None: nothing).
    Each API's formats (Anthropic's blocks, the Responses API's parts) differ only there.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and (text := part_text(part)) is not None:
                parts.append(text)
    return "\n".join(parts)


def reply_of_response(data: Any) -> tuple[dict[str, Any], str | None, str | None] | None:
    """Return ``(message, model, finish_reason)`` of a chat-completion response body, or None.

    The message is the first choice's, as the upstream sent it.
    """
    if not isinstance(data, Mapping):
        return None
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None
    message = choices[0].get("message")
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return None
    model = data.get("model")
    finish = choices[0].get("finish_reason")
    return (
        dict(message),
        model if isinstance(model, str) else None,
        finish if isinstance(finish, str) else None,
    )


class EventStream:
    """Server-sent events fed as bytes as they arrive: each whole event's data goes to ``_data``.

    Events may be split anywhere and end with either line ending; data that is not JSON is counted
    in ``malformed`` (``_json``).
    """

    def __init__(self) -> None:
        self._buffer = b""
        self.done = False
        self.malformed = 0

    def feed(self, chunk: bytes) -> None:
        """Consume the next bytes of the stream."""
        self._buffer += chunk
        while True:
            end, size = event_end(self._buffer)
            if end < 0:
                return
            event, self._buffer = self._buffer[:end], self._buffer[end + size :]
            data = b"\n".join(
                line[5:].lstrip(b" ")
                for line in event.replace(b"\r\n", b"\n").split(b"\n")
                if line.startswith(b"data:")
            )
            if data:
                self._data(data)

    def _data(self, data: bytes) -> None:
        raise NotImplementedError

    def _json(self, data: bytes) -> dict[str, Any] | None:
        """The event's JSON object, or None (counted when it is not JSON)."""
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            self.malformed += 1
            return None
        return payload if isinstance(payload, dict) else None


class StreamedReply(EventStream):
    """Rebuilds the first choice's message from a chat-completion event stream, fed as bytes arrive.

    ``done`` turns true at ``data: [DONE]``; a stream cut off before it leaves ``done`` false, and the
    proxy then records no reply (the client never got a whole one).
    """

    def __init__(self) -> None:
        super().__init__()
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.model: str | None = None
        self.finish_reason: str | None = None
        self.extras: dict[str, Any] = {}

    def _data(self, data: bytes) -> None:
        if data.strip() == b"[DONE]":
            self.done = True
            return
        payload = self._json(data)
        if payload is None:
            return
        if isinstance(payload.get("model"), str):
            self.model = payload["model"]
        choices = payload.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        text = delta.get("content")
        if isinstance(text, str):
            self.content.append(text)
        for key in ("reasoning_content", "reasoning"):
            if isinstance(delta.get(key), str):
                self.extras[key] = self.extras.get(key, "") + delta[key]
        for call in delta.get("tool_calls") or ():
            if not isinstance(call, dict):
                continue
            index = call.get("index", len(self.calls))
            slot = self.calls.setdefault(
                index if isinstance(index, int) else len(self.calls),
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            if call.get("id"):
                slot["id"] = call["id"]
            function = call.get("function")
            if isinstance(function, dict):
                if isinstance(function.get("name"), str):
                    slot["function"]["name"] += function["name"]
                if isinstance(function.get("arguments"), str):
                    slot["function"]["arguments"] += function["arguments"]

    def message(self) -> dict[str, Any]:
        """The reply as an OpenAI-format assistant message."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[key] for key in sorted(self.calls)]
        message.update(self.extras)
        return message


def event_end(buffer: bytes) -> tuple[int, int]:
    """Return (where the first whole event ends, the length of its end) in ``buffer``, or (-1, _).

    Events end with a blank line; servers use either line ending.
    """
    lf = buffer.find(b"\n\n")
    crlf = buffer.find(b"\r\n\r\n")
    if crlf >= 0 and (lf < 0 or crlf < lf):
        return crlf, 4
    return lf, 2

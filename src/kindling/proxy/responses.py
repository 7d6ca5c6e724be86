"""OpenAI's Responses API through the proxy: requests and replies in kindling's canonical shape.

The proxy recognises, records and warms a ``POST /v1/responses`` conversation the same way as a chat
completion; this module translates. A request's ``instructions`` become a system message and its
``input`` (a string, or a list of items) OpenAI-format messages (``canonical_messages``): a
``message`` item is a message of its role (``input_text``/``output_text`` parts as its content),
each ``function_call_output`` a ``tool`` message, and the items a response produced (an assistant
``message``, ``function_call``, ``reasoning``) one assistant message, in the order they come, as a
chat reply holds its text and its calls. A response's ``output`` converts the same way
(``reply_of_response``, or ``StreamedResponse`` from its event stream), so a client that sends the
whole history back (Codex, the Agents SDK) repeats the same messages and the prefix hashes match.

A client that sends ``previous_response_id`` (or a ``conversation``) sends only its new items; the
upstream keeps the rest. ``state_key`` names the conversation such a request continues: the proxy
records each response's id under ``response_key`` and appends the turn to that conversation.

A ``reasoning`` item adds its summary to the reply's ``reasoning_content``; its encrypted content is
not recorded. Server-side tool calls (web search, file search, computer use, shell and patch calls)
and ``item_reference`` items are not recorded either; ``custom_tool_call`` items are, with their
raw input as the call's arguments.

A warm-up goes in as items before the request's first user item (``with_block``); the request's
string ``input``, if it is one, becomes that user item.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from kindling.proxy.reply import EventStream, joined_text

__all__ = [
    "StreamedResponse",
    "canonical_input",
    "canonical_messages",
    "instructions_message",
    "reply_of_response",
    "response_key",
    "state_key",
    "tool_names",
    "with_block",
]

# Items a model produces: consecutive ones are one assistant message, as a chat reply is.
_REPLY_ITEMS = frozenset({"function_call", "custom_tool_call", "reasoning"})
# What a response's status or incomplete reason is called in a chat completion's finish_reason.
_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _text(content: Any) -> str:
    """The text of a message's content or a call's output: strings and text parts joined.

    Other parts (an image, a file) stand as ``[image]``, ``[file]``, so a message that only shows
    one is not empty.
    """
    return joined_text(content, _part_text)


def _part_text(part: Mapping[str, Any]) -> str | None:
    kind = part.get("type")
    if isinstance(part.get("text"), str):
        return str(part["text"])
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return str(part["refusal"])
    return f"[{kind.removeprefix('input_')}]" if isinstance(kind, str) else None


def _is_reply_item(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    if kind in _REPLY_ITEMS:
        return True
    return kind in (None, "message") and item.get("role") == "assistant"


def _add_to_reply(reply: dict[str, Any], item: Mapping[str, Any]) -> None:
    """Add one item a model produced to the assistant message ``reply``."""
    kind = item.get("type")
    if kind == "function_call" or kind == "custom_tool_call":
        arguments = item.get("arguments") if kind == "function_call" else item.get("input")
        reply.setdefault("tool_calls", []).append(
            {
                "id": str(item.get("call_id") or item.get("id") or ""),
                "type": "function",
                "function": {
                    "name": str(item.get("name") or ""),
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else orjson.dumps(arguments).decode(),
                },
            }
        )
    elif kind == "reasoning":
        summary = _text(item.get("summary"))
        if summary:
            earlier = reply.get("reasoning_content")
            reply["reasoning_content"] = f"{earlier}\n{summary}" if earlier else summary
    else:
        text = _text(item.get("content"))
        if text:
            reply["content"] = f"{reply['content']}\n{text}" if reply["content"] else text


def canonical_input(data: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Return a Responses request's ``input`` as OpenAI-format messages (without ``instructions``).

    None when the body has no ``input`` string or list (it is not a request kindling understands).
    """
    items = data.get("input")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list):
        return None
    out: list[dict[str, Any]] = []
    reply: dict[str, Any] | None = None  # the assistant message the model's consecutive items make
    for item in items:
        if isinstance(item, str):
            item = {"role": "user", "content": item}
        if not isinstance(item, Mapping):
            out.append({"role": "unknown", "content": None})  # for the reader to count and skip
            reply = None
            continue
        kind = item.get("type")
        if _is_reply_item(item):
            if reply is None:
                reply = {"role": "assistant", "content": None}
                out.append(reply)
            _add_to_reply(reply, item)
            continue
        if kind in (None, "message"):
            out.append({"role": str(item.get("role")), "content": _text(item.get("content"))})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": str(item.get("call_id") or ""),
                    "content": _text(item.get("output")),
                }
            )
        elif not (isinstance(kind, str) and kind.endswith("_output")):
            continue  # a server-side call or a reference: not recorded, and the reply goes on
        reply = None  # anything from the client ends the model's reply
    return out


def instructions_message(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The request's ``instructions`` as a system message (a list of one), or ``[]`` when it has none."""
    text = _text(data.get("instructions"))
    return [{"role": "system", "content": text}] if text else []


def canonical_messages(data: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Return a Responses request's ``instructions`` and ``input`` as OpenAI-format messages.

    None when the body has no ``input`` string or list.
    """
    messages = canonical_input(data)
    if messages is None:
        return None
    return [*instructions_message(data), *messages]


def state_key(data: Mapping[str, Any]) -> tuple[str, bool] | None:
    """``(key, after_response)`` of what the upstream keeps for this request, or None when the
    request sends its conversation whole.

    A request with ``previous_response_id`` continues right after that response
    (``after_response`` true); one with a ``conversation`` (an id, or an object with one) at that
    conversation's end.
    """
    previous = data.get("previous_response_id")
    if isinstance(previous, str) and previous:
        return response_key(previous), True
    conversation = data.get("conversation")
    if isinstance(conversation, Mapping):
        conversation = conversation.get("id")
    if isinstance(conversation, str) and conversation:
        return _key("conversation", conversation), False
    return None


def response_key(response_id: str) -> str:
    """The key a response's id is recorded under (a hash: ids have no bound on their length)."""
    return _key("response", response_id)


def _key(kind: str, value: str) -> str:
    return hashlib.sha256(f"{kind}\n{value}".encode()).hexdigest()


def tool_names(tools: Any) -> list[str]:
    """The names of the function tools a Responses request declares (``{"type": "function", "name"}``)."""
    names: list[str] = []
    if isinstance(tools, list):
        for tool in tools:
            if isinstance(tool, Mapping) and tool.get("type") == "function":
                name = tool.get("name")
                if isinstance(name, str) and name:
                    names.append(name)
    return names


def with_block(data: Mapping[str, Any], block: bytes) -> bytes:
    """The request body with the warm-up ``block`` (a JSON array of items) before its first user item.

    The block's bytes go in verbatim (an orjson Fragment), so every request of the conversation
    carries exactly the same bytes there. A string ``input`` becomes one user message item.
    """
    inner = block.strip()[1:-1].strip()
    items = data["input"]
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    head = next(
        (
            index
            for index, item in enumerate(items)
            if isinstance(item, str)
            or (
                isinstance(item, Mapping)
                and item.get("type") in (None, "message")
                and item.get("role") == "user"
            )
        ),
        len(items),
    )
    spliced = dict(data)
    spliced["input"] = [*items[:head], orjson.Fragment(inner), *items[head:]] if inner else items
    return orjson.dumps(spliced)


def reply_of_response(data: Any) -> tuple[dict[str, Any], str | None, str | None] | None:
    """Return ``(message, model, finish_reason)`` of a finished Responses API response, or None.

    None also for a response that is not finished (``queued`` or ``in_progress`` in background
    mode, ``failed``, ``cancelled``): the client has no whole reply yet.
    """
    if not isinstance(data, Mapping) or data.get("object") != "response":
        return None
    output = data.get("output")
    status = data.get("status")
    if not isinstance(output, list) or status not in (None, "completed", "incomplete"):
        return None
    message: dict[str, Any] = {"role": "assistant", "content": None}
    for item in output:
        if isinstance(item, Mapping) and _is_reply_item(item):
            _add_to_reply(message, item)
    if message.get("tool_calls"):
        finish = "tool_calls"
    elif status == "incomplete":
        details = data.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        finish = _FINISH.get(reason, reason) if isinstance(reason, str) else "incomplete"
    else:
        finish = "stop"
    model = data.get("model")
    return message, model if isinstance(model, str) else None, finish


class StreamedResponse(EventStream):
    """Follows a Responses API event stream, fed as bytes arrive, for the whole response it ends with.

    Only the final event (``response.completed``, or ``response.incomplete``) is parsed: it carries
    the whole response, so the deltas before it need not be. ``done`` turns true there; a stream
    cut off before it (or ended by ``response.failed`` or an ``error`` event) leaves ``done`` false,
    and the proxy then records no reply.
    """

    def __init__(self) -> None:
        super().__init__()
        self.response_id: str | None = None
        self.model: str | None = None
        self.finish_reason: str | None = None
        self._message: dict[str, Any] | None = None

    def _data(self, data: bytes) -> None:
        if b'"response.completed"' not in data and b'"response.incomplete"' not in data:
            return  # a delta, or another event: its text may be long, and nothing in it is needed
        payload = self._json(data)
        if payload is None or payload.get("type") not in ("response.completed", "response.incomplete"):
            return
        response = payload.get("response")
        found = reply_of_response(response)
        if found is None:
            return
        self._message, self.model, self.finish_reason = found
        response_id = response.get("id") if isinstance(response, Mapping) else None
        self.response_id = response_id if isinstance(response_id, str) else None
        self.done = True

    def message(self) -> dict[str, Any]:
        """The reply as an OpenAI-format assistant message (empty until ``done``)."""
        return self._message or {"role": "assistant", "content": None}

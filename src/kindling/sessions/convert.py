"""Turning raw source values into the canonical model: tool calls, content, OpenAI-shaped messages.

Every reader shares these so that a tool call, a multimodal content blob or an unknown role means
the same thing whichever file it came from. Nothing here raises on bad data: each malformed piece is
counted in the ``ReadReport`` under a stable reason and dropped or kept as raw text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from kindling.sessions.files import epoch
from kindling.sessions.model import ROLES, Message, ReadReport, Role, ToolCall, new_tool_call
from kindling.sessions.skips import COMPACTION_COPY

# Hermes stores list-shaped (multimodal) content as a string with one of these prefixes followed by
# JSON. "\x00json:" is the original marker; "\x01json:" replaced it where NUL bytes upset FTS5.
CONTENT_SENTINELS: tuple[str, ...] = ("\x00json:", "\x01json:")

# Roles other tools write that map cleanly onto the four canonical ones.
ROLE_ALIASES: dict[str, Role] = {
    "developer": "system",
    "human": "user",
    "gpt": "assistant",
    "ai": "assistant",
}

_EMPTY: dict[str, Any] = {}

# Hermes wraps the results of tools that fetch outside content (web_*, browser_*, mcp_*) before
# storing them: an opening tag naming the tool, one sentence telling the model the block is data,
# a blank line, the tool's own output, and the closing tag. Inside, Hermes defangs any literal
# delimiter (underscores become hyphens), so the first closing tag after an opening one ends it.
UNTRUSTED_OPEN = "<untrusted_tool_result"
_UNTRUSTED_BLOCK = re.compile(
    r"<untrusted_tool_result(?: [^>\n]*)?>\n"
    r"(?:The following content was retrieved from an external source\.[^\n]*\n\n)?"
    r"(.*?)\n?</untrusted_tool_result>",
    re.DOTALL,
)

# How a Hermes context-compaction summary starts (the current prefix and the older ones Hermes still
# recognises), and the markers it puts around a summary merged into a real message.
COMPACTION_PREFIXES: tuple[str, ...] = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:")
_MERGED_PRIOR_HEADER = "[PRIOR CONTEXT — for reference only; not a new message]"
_MERGED_SUMMARY_DELIMITER = "[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]"


def dumps(value: Any) -> str:
    """Return ``value`` as compact JSON text (non-JSON values become strings)."""
    return orjson.dumps(value, default=str).decode("utf-8")


def normalize_role(role: Any) -> Role | None:
    """Return the canonical role for ``role``, or None when it is not one kindling knows."""
    if isinstance(role, str):
        if role in ROLES:
            return role  # type: ignore[return-value]
        return ROLE_ALIASES.get(role.lower())
    return None


def content_text(value: Any) -> str | None:
    """Return message content as text.

    Strings pass through (a Hermes multimodal sentinel is decoded); a list of OpenAI content parts
    becomes its text parts joined by newlines, with ``[image]``/``[<type>]`` marking the other parts
    so a reader sees something was there. Other JSON values are serialized.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if value[:1] in ("\x00", "\x01") and value.startswith(CONTENT_SENTINELS):
            return decode_sentinel(value)
        return value
    if isinstance(value, list):
        return _parts_text(value)
    return dumps(value)


def decode_sentinel(value: str) -> str:
    """Decode a Hermes ``"\\x00json:"``/``"\\x01json:"`` content string into text.

    When the JSON after the marker is broken, the text after the marker is returned as is: a row
    kindling cannot decode should still read as something rather than vanish.
    """
    body = value[len(CONTENT_SENTINELS[0]) :]
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if isinstance(parsed, str):
        return parsed
    if isinstance(parsed, list):
        return _parts_text(parsed)
    if isinstance(parsed, dict):
        inner = parsed.get("content")
        if isinstance(inner, list):
            return _parts_text(inner)
        if isinstance(inner, str):
            return inner
    return dumps(parsed)


def unwrap_untrusted(text: str) -> str:
    """Return ``text`` with every Hermes ``<untrusted_tool_result …>`` block replaced by its inner text.

    Text without the wrapper comes back unchanged (the same object).
    """
    if UNTRUSTED_OPEN not in text:
        return text
    return _UNTRUSTED_BLOCK.sub(_inner, text)


def _inner(match: re.Match[str]) -> str:
    return match.group(1)


def compaction_remainder(text: str) -> str | None:
    """Return what a Hermes compaction summary leaves of a message, or None when it holds none.

    None: ``text`` is no summary. ``""``: the message is only a summary (Hermes's note about
    earlier turns, never anyone's request). Otherwise the real message Hermes merged the summary
    into (its prior content, before the summary), with the summary removed.
    """
    head = text.lstrip()
    if head.startswith(_MERGED_PRIOR_HEADER):
        before, found, _summary = head.partition(_MERGED_SUMMARY_DELIMITER)
        if not found:
            return None
        return before[len(_MERGED_PRIOR_HEADER) :].strip()
    if head.startswith(COMPACTION_PREFIXES):
        return ""
    return None


def drop_repeated_calls(
    calls: tuple[ToolCall, ...], earlier: dict[str, ToolCall], copies: set[str], report: ReadReport
) -> tuple[ToolCall, ...]:
    """Return ``calls`` without the copies of calls in ``earlier`` (same id, tool and arguments).

    Each copy dropped is counted as ``compaction_copy`` and its id added to ``copies``, so the
    result answering it can be dropped too.
    """
    kept: list[ToolCall] = []
    for call in calls:
        seen = earlier.get(call.id)
        if (
            seen is not None
            and seen.name == call.name
            and seen.arguments == call.arguments
            and seen.raw_arguments == call.raw_arguments
        ):
            copies.add(call.id)
            report.skip(COMPACTION_COPY)
        else:
            kept.append(call)
    return calls if len(kept) == len(calls) else tuple(kept)


def _parts_text(parts: list[Any]) -> str:
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            text = part.get("text")
            if isinstance(text, str) and kind in (None, "text", "input_text", "output_text"):
                texts.append(text)
            elif kind in ("image_url", "image", "input_image"):
                texts.append("[image]")
            elif isinstance(kind, str):
                texts.append(f"[{kind}]")
    return "\n".join(texts)


def arguments_value(value: Any) -> Any:
    """A call's arguments by their value: JSON text parsed (clients re-serialize the arguments they
    echo back, Hermes without spaces), anything else as written."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def parse_arguments(value: Any) -> tuple[Mapping[str, Any], str | None]:
    """Return ``(arguments, raw_arguments)`` for a call's arguments as sent.

    A JSON object (or a string holding one) becomes the arguments; anything else keeps its exact
    text in ``raw_arguments`` with empty arguments, so nothing the model sent is lost.
    """
    if value is None or value == "":
        return _EMPTY, None
    if isinstance(value, dict):
        return value, None
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return _EMPTY, value
        if isinstance(parsed, dict):
            return parsed, None
        return _EMPTY, value
    return _EMPTY, dumps(value)


# Argument texts parsed once per read: agents repeat the same arguments a great deal (the same
# command, the same file), and parsing them is most of the cost of reading a call. Bounded, so a
# read's memory stays constant however many sessions it reads (at most about 8192 texts of 1024
# characters and their parsed objects). The cache is emptied when full: it holds the few thousand
# argument texts a large database repeats (4,400 in 117,000 calls of the anchor's 312k-message
# database), so their parsed objects, and mining's groups looked up by object, stay the same.
ARGUMENT_CACHE_ENTRIES = 8192
ARGUMENT_CACHE_MAX_CHARS = 1024


def parse_tool_calls(
    value: Any,
    report: ReadReport,
    *,
    id_prefix: str,
    requestor: str = "assistant",
    cache: dict[str, dict[str, Any]] | None = None,
) -> tuple[ToolCall, ...]:
    """Return the tool calls in ``value`` (a JSON string or an already parsed list).

    Accepts OpenAI's ``{"id", "type", "function": {"name", "arguments"}}`` and the flat
    ``{"id", "name", "arguments"}`` shape. Calls without an id get ``<id_prefix>:<n>`` so ids stay
    stable across reads. Malformed JSON or a call with no name is counted and skipped. ``cache``
    (a dict the caller keeps for one read) lets calls with the same argument text share one parsed
    object instead of parsing it again.
    """
    return parse_calls_at(value, report, id_prefix, _NO_ORDER, requestor, cache)


_NO_ORDER = object()


def parse_calls_at(
    value: Any,
    report: ReadReport,
    prefix: Any,
    order: Any,
    requestor: str = "assistant",
    cache: dict[str, dict[str, Any]] | None = None,
) -> tuple[ToolCall, ...]:
    """Return ``parse_tool_calls(value, report, id_prefix=f"{prefix}:{order}", ...)``.

    For readers calling it once per row: the id prefix is only formatted for a call that has no id.
    """
    if value is None or value == "":
        return ()
    if isinstance(value, (str, bytes)):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            report.skip("malformed_tool_calls")
            return ()
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        report.skip("malformed_tool_calls")
        return ()
    calls: list[ToolCall] = []
    loads = orjson.loads
    for index, item in enumerate(value):
        # Fast path for the shape Hermes and OpenAI write: {"id", "function": {"name", "arguments": "<JSON object>"}}.
        # This runs once per call on the mining hot path; anything else takes the general path below.
        if type(item) is dict and "requestor" not in item:
            function = item.get("function")
            if type(function) is dict:
                name = function.get("name")
                text = function.get("arguments")
                if type(name) is str and name and type(text) is str:
                    arguments = cache.get(text) if cache is not None else None
                    if arguments is None and text[:1] == "{":
                        try:
                            arguments = loads(text)
                        except orjson.JSONDecodeError:
                            arguments = None
                        if (
                            cache is not None
                            and type(arguments) is dict
                            and len(text) <= ARGUMENT_CACHE_MAX_CHARS
                        ):
                            if len(cache) >= ARGUMENT_CACHE_ENTRIES:
                                cache.clear()
                            cache[text] = arguments
                    if type(arguments) is dict:
                        call_id = item.get("id") or item.get("call_id") or _fallback_id(prefix, order, index)
                        calls.append(new_tool_call(str(call_id), name, arguments, None, requestor))
                        continue
        call = tool_call_from_dict(item, report, _fallback_id(prefix, order, index), requestor)
        if call is not None:
            calls.append(call)
    return tuple(calls)


def _fallback_id(prefix: Any, order: Any, index: int) -> str:
    if order is _NO_ORDER:
        return f"{prefix}:{index}"
    return f"{prefix}:{order}:{index}"


def tool_call_from_dict(item: Any, report: ReadReport, fallback_id: str, requestor: str) -> ToolCall | None:
    """Return one ToolCall from a call object, or None (counted) when it has no usable name."""
    if not isinstance(item, dict):
        report.skip("malformed_tool_call")
        return None
    function = item.get("function")
    holder = function if isinstance(function, dict) else item
    name = holder.get("name")
    if not isinstance(name, str) or not name:
        report.skip("tool_call_without_name")
        return None
    arguments, raw = parse_arguments(holder.get("arguments"))
    call_id = item.get("id") or item.get("call_id") or fallback_id
    who = item.get("requestor")
    return ToolCall(str(call_id), name, arguments, raw, who if isinstance(who, str) and who else requestor)


def message_from_dict(
    data: Any, report: ReadReport, *, id_prefix: str, known_calls: set[str]
) -> Message | None:
    """Return a Message from an OpenAI-format message object, or None (counted) when unusable.

    ``known_calls`` holds the ids of the calls seen so far in the session: a tool result naming a
    call that was never made is counted as ``orphan_tool_result`` and skipped. New call ids are
    added to it.
    """
    if not isinstance(data, dict):
        report.skip("malformed_message")
        return None
    role = normalize_role(data.get("role"))
    if role is None:
        report.skip("unknown_role")
        return None
    content = content_text(data.get("content"))
    calls: tuple[ToolCall, ...] = ()
    raw_calls = data.get("tool_calls")
    if raw_calls:
        calls = parse_tool_calls(raw_calls, report, id_prefix=id_prefix)
        for call in calls:
            known_calls.add(call.id)
    tool_call_id = data.get("tool_call_id")
    name = data.get("name")
    if role == "tool" and (tool_call_id is None or str(tool_call_id) not in known_calls):
        report.skip("orphan_tool_result")
        return None
    error = data.get("error")
    timestamp = data.get("timestamp")
    reasoning = data.get("reasoning") or data.get("reasoning_content")
    return Message(
        role,
        content,
        calls,
        str(tool_call_id) if tool_call_id is not None else None,
        name if isinstance(name, str) else None,
        error if isinstance(error, bool) else None,
        epoch(timestamp),
        reasoning if isinstance(reasoning, str) else None,
    )


def messages_from_dicts(items: Iterable[Any], report: ReadReport, *, session_id: str) -> tuple[Message, ...]:
    """Convert a sequence of OpenAI-format message objects, counting and skipping bad ones."""
    known: set[str] = set()
    out: list[Message] = []
    for index, item in enumerate(items):
        message = message_from_dict(item, report, id_prefix=f"{session_id}:{index}", known_calls=known)
        if message is not None:
            out.append(message)
    return tuple(out)

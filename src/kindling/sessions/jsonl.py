"""Line-oriented session files: Hermes session exports, ShareGPT trajectories, OpenAI chat logs.

Each reader streams the file one line at a time (``.gz`` content is decompressed on the fly), so a
file of any size reads in constant memory. A line that is not JSON, not UTF-8, or cut short by a
truncated file is counted under its reason and the read goes on with the next line. OpenAI chat
logs may also be one JSON array of ``{"messages": [...]}`` objects, or a plain list of chat messages (one
conversation, in a document or on each line); such a document is parsed whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from kindling.sessions.convert import (
    UNTRUSTED_OPEN,
    compaction_remainder,
    content_text,
    drop_repeated_calls,
    dumps,
    message_from_dict,
    messages_from_dicts,
    parse_arguments,
    unwrap_untrusted,
)
from kindling.sessions.files import (
    LEADING_BYTES,
    Record,
    epoch,
    iter_records,
    peek,
    probe,
    read_document,
)
from kindling.sessions.model import Message, ReadReport, Session, ToolCall
from kindling.sessions.skips import (
    COMPACTION_COPY,
    COMPACTION_SUMMARY,
    MALFORMED_MESSAGE,
    MALFORMED_RECORD,
    MALFORMED_TOOL_CALL,
    NOT_AN_OBJECT,
    ORPHAN_TOOL_RESULT,
    TOOL_CALL_WITHOUT_NAME,
    UNKNOWN_ROLE,
)

__all__ = ["iter_records", "read_hermes_export", "read_openai", "read_sharegpt", "sharegpt_messages"]

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*(?:</tool_response>|$)", re.DOTALL)
_SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


# ------------------------------------------------------------------------------- Hermes export


def read_hermes_export(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream sessions from a Hermes session export (one session row plus ``messages`` per line).

    Raises SourceError when the file cannot be opened.
    """
    probe(path)
    return _hermes_export(path, report)


def _hermes_export(path: Path, report: ReadReport) -> Iterator[Session]:
    for number, record in iter_records(path, report):
        messages = record.get("messages")
        if not isinstance(messages, list):
            report.skip(MALFORMED_RECORD)
            continue
        session_id = str(record.get("id") or f"{path.name}:{number}")
        metadata = {
            key: record[key]
            # The same session columns the state.db reader keeps.
            for key in ("title", "message_count", "tool_call_count", "user_id", "system_prompt")
            if record.get(key) is not None
        }
        yield Session(
            session_id,
            str(record.get("source") or "hermes"),
            _hermes_messages(messages, report, session_id, _compressed_segments(record, len(messages))),
            epoch(record.get("started_at")),
            epoch(record.get("ended_at")),
            _text(record.get("end_reason")),
            _text(record.get("model")),
            _text(record.get("parent_session_id")),
            None,
            metadata,
        )


def _hermes_messages(
    items: list[Any], report: ReadReport, session_id: str, repeated: frozenset[int] = frozenset()
) -> tuple[Message, ...]:
    # Read as the state.db reader reads (kindling.sessions.hermes): rewound rows are not, rows
    # compaction summarised away are; a compaction's copies of earlier calls count once; Hermes's
    # summary is no message; wrapped results are unwrapped. A lineage export (Hermes's
    # export_session_lineage) concatenates a compression chain, whose later parts repeat calls of
    # the earlier ones exactly as a compacted session does.
    known: set[str] = set()
    earlier: dict[str, ToolCall] = {}
    copies: set[str] = set()
    out: list[Message] = []
    for index, item in enumerate(items):
        compacted = False
        if isinstance(item, dict):
            if item.get("active") in (0, False):
                if not item.get("compacted"):
                    continue  # rewound: the user took it back
                compacted = True
            if "name" not in item and item.get("tool_name"):
                item = {**item, "name": item["tool_name"]}
        message = message_from_dict(item, report, id_prefix=f"{session_id}:{index}", known_calls=known)
        if message is None:
            continue
        content = message.content
        if content:
            if message.role == "tool":
                if content.startswith(UNTRUSTED_OPEN):
                    message = replace(message, content=unwrap_untrusted(content))
            else:
                remainder = compaction_remainder(content)
                if remainder is not None:
                    if not remainder and not message.tool_calls:
                        report.skip(COMPACTION_SUMMARY)
                        continue
                    message = replace(message, content=remainder or None)
        if message.tool_calls:
            calls = message.tool_calls
            if earlier:
                calls = drop_repeated_calls(calls, earlier, copies, report)
                if not calls and not message.content:
                    continue
                if calls is not message.tool_calls:
                    message = replace(message, tool_calls=calls)
            if compacted or index in repeated:
                for call in calls:
                    earlier[call.id] = call
        elif message.role == "tool" and message.tool_call_id in copies:
            copies.discard(message.tool_call_id)
            report.skip(COMPACTION_COPY)
            continue
        out.append(message)
    return tuple(out)


def _compressed_segments(record: dict[str, Any], count: int) -> frozenset[int]:
    """Indexes of a lineage export's messages from sessions that ended by compression."""
    segments = record.get("segments")
    if not isinstance(segments, list):
        return frozenset()
    indexes: set[int] = set()
    start = 0
    for segment in segments:
        part = segment.get("messages") if isinstance(segment, dict) else None
        if not isinstance(part, list):
            return frozenset()
        if segment.get("end_reason") == "compression":
            indexes.update(range(start, start + len(part)))
        start += len(part)
    return frozenset(indexes) if start == count else frozenset()


# ----------------------------------------------------------------------------------- OpenAI chat


def read_openai(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream sessions from OpenAI chat logs: ``{"messages": [...]}`` per line, or a JSON array.

    A record's ``metadata`` object becomes the session's, and its ``tools`` (the tool definitions the
    agent was given) go to ``metadata["tools"]``. Raises SourceError when the file cannot be opened.
    """
    probe(path)
    return _openai(path, report)


def _openai(path: Path, report: ReadReport) -> Iterator[Session]:
    for number, record in _records_or_array(path, report, conversations=True):
        messages = record.get("messages")
        if not isinstance(messages, list):
            report.skip(MALFORMED_RECORD)
            continue
        session_id = str(record.get("id") or f"{path.name}:{number}")
        found = record.get("metadata")
        metadata: dict[str, Any] = dict(found) if isinstance(found, dict) else {}
        if isinstance(record.get("tools"), list):
            # The tool definitions the agent was given (fine-tuning logs keep them beside the messages).
            metadata["tools"] = record["tools"]
        yield Session(
            session_id,
            "openai",
            messages_from_dicts(messages, report, session_id=session_id),
            epoch(record.get("created") or record.get("timestamp")),
            None,
            None,
            _text(record.get("model")),
            metadata=metadata or {},
        )


def _is_conversation(value: Any) -> bool:
    # A plain list of OpenAI chat messages (no {"messages": ...} around it) is one conversation.
    first = (
        next((item for item in value if isinstance(item, dict)), None) if isinstance(value, list) else None
    )
    return first is not None and "role" in first and "messages" not in first


def _lines_of_lists(head: bytes) -> bool:
    # JSONL whose lines are arrays: the first line is a whole JSON array and another line follows.
    first, _, rest = head.partition(b"\n")
    if not rest.strip():
        return False
    try:
        return isinstance(orjson.loads(first), list)
    except orjson.JSONDecodeError:
        return False


def _records_or_array(path: Path, report: ReadReport, *, conversations: bool = False) -> Iterator[Record]:
    """Yield the records of a JSONL file or a JSON array; ``conversations`` reads a list of messages as one."""
    head = peek(path).lstrip(LEADING_BYTES)
    if not head.startswith(b"[") or (conversations and _lines_of_lists(head)):
        for number, value in iter_records(path, report, lists=conversations):
            if isinstance(value, dict):
                yield number, value
            elif _is_conversation(value):
                yield number, {"messages": value}
            else:
                report.skip(NOT_AN_OBJECT)
        return
    document = read_document(path, report)
    if document is None:
        return
    if not isinstance(document, list):
        report.skip(MALFORMED_RECORD)
        return
    if conversations and _is_conversation(document):
        yield 1, {"messages": document}
        return
    for index, item in enumerate(document, start=1):
        if isinstance(item, dict):
            yield index, item
        else:
            report.skip(NOT_AN_OBJECT)


# -------------------------------------------------------------------------------------- ShareGPT


def read_sharegpt(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream sessions from ShareGPT trajectories (``.jsonl`` or ``.jsonl.gz``).

    ``gpt`` turns carry ``<think>`` and ``<tool_call>{"name", "arguments"}</tool_call>`` blocks;
    ``tool`` turns carry ``<tool_response>{"tool_call_id", "name", "content"}</tool_response>``
    blocks. Calls without ids get stable synthetic ids and responses pair with calls in order.
    Raises SourceError when the file cannot be opened.
    """
    probe(path)
    return _sharegpt(path, report)


def _sharegpt(path: Path, report: ReadReport) -> Iterator[Session]:
    for number, record in _records_or_array(path, report):
        turns = record.get("conversations")
        if not isinstance(turns, list):
            report.skip(MALFORMED_RECORD)
            continue
        session_id = str(record.get("id") or f"{path.name}:{number}")
        completed = record.get("completed")
        end_reason = None if completed is None else ("completed" if completed else "incomplete")
        metadata = {
            key: record[key]
            for key in ("task_id", "toolsets", "partial", "source")
            if record.get(key) is not None
        }
        yield Session(
            session_id,
            "sharegpt",
            sharegpt_messages(turns, report, session_id),
            epoch(record.get("timestamp")),
            None,
            end_reason,
            _text(record.get("model")),
            metadata=metadata,
        )


def sharegpt_messages(turns: list[Any], report: ReadReport, session_id: str) -> tuple[Message, ...]:
    """Convert ShareGPT turns to canonical messages, pairing tool responses with calls in order."""
    out: list[Message] = []
    pending: list[ToolCall] = []
    for index, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value", ""), (str, list, type(None))):
            report.skip(MALFORMED_MESSAGE)
            continue
        role = _SHAREGPT_ROLES.get(str(turn.get("from")))
        value = turn.get("value") or ""
        if isinstance(value, list):
            # Hermes writes a user turn's content as is, so a message with an image is a list of parts.
            value = content_text(value) or ""
        if str(turn.get("from")) == "tool":
            out.extend(_tool_responses(value, pending, report))
            continue
        if role is None:
            report.skip(UNKNOWN_ROLE)
            continue
        if role != "assistant":
            out.append(Message(role, value))  # type: ignore[arg-type]
            continue
        calls = _tool_calls(value, report, f"{session_id}:{index}")
        pending = list(calls)
        text = _TOOL_CALL.sub("", _THINK.sub("", value)).strip()
        out.append(Message("assistant", text or None, calls))
    return tuple(out)


def _tool_calls(value: str, report: ReadReport, prefix: str) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for number, body in enumerate(_TOOL_CALL.findall(value)):
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            report.skip(MALFORMED_TOOL_CALL)
            continue
        name = data.get("name") if isinstance(data, dict) else None
        if not isinstance(name, str) or not name:
            report.skip(TOOL_CALL_WITHOUT_NAME)
            continue
        arguments, raw = parse_arguments(data.get("arguments"))
        call_id = data.get("id") or data.get("tool_call_id") or f"{prefix}:{number}"
        calls.append(ToolCall(str(call_id), name, arguments, raw))
    return tuple(calls)


def _tool_responses(value: str, pending: list[ToolCall], report: ReadReport) -> list[Message]:
    out: list[Message] = []
    # A tool turn without <tool_response> tags is one response in plain text.
    bodies = _TOOL_RESPONSE.findall(value) or ([value] if value.strip() else [])
    for body in bodies:
        call_id: Any = None
        name: Any = None
        content: Any = body
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            data = None
        # The Hermes wrapper is {"tool_call_id", "name", "content"}; some trajectories hold the bare
        # result instead, which may itself have a "content" key (read_file does): keep it whole.
        if isinstance(data, dict) and ("name" in data or "tool_call_id" in data) and "content" in data:
            call_id, name = data.get("tool_call_id"), data.get("name")
            content = data["content"]
        call = _match(pending, call_id, name)
        if call is None:
            report.skip(ORPHAN_TOOL_RESULT)
            continue
        # Hermes parses a result that looks like JSON before wrapping it: an object or an array here
        # was JSON text in the session (a list is not content parts: trajectories hold text only).
        text = content if isinstance(content, str) or content is None else dumps(content)
        out.append(Message("tool", text, (), call.id, call.name))
    return out


def _match(pending: list[ToolCall], call_id: Any, name: Any) -> ToolCall | None:
    # Prefer the id the response names, then the first unanswered call of that tool, then order.
    choice: Callable[[ToolCall], bool]
    for choice in (
        lambda call: call_id is not None and call.id == str(call_id),
        lambda call: name is not None and call.name == name,
        lambda call: True,
    ):
        for index, call in enumerate(pending):
            if choice(call):
                return pending.pop(index)
    return None

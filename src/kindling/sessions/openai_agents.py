"""OpenAI Agents SDK traces: the traces and spans its tracing processors export, saved as JSON.

The SDK records each run as a *trace* (``{"object": "trace", "id", "workflow_name", "group_id",
"metadata"}``) made of *spans* (``{"object": "trace.span", "id", "trace_id", "parent_id",
"started_at", "ended_at", "span_data": {"type", ...}, "error"}``): what ``Trace.export()`` and
``Span.export()`` return, and what a ``TracingExporter`` receives. Read here wherever they were
saved: one object a line (JSONL), a JSON list of them, the batch ``{"data": [...]}`` the SDK sends
to its backend (one a line too), or a document keeping ``traces`` and ``spans`` lists.

Each trace is one session (its id, ``workflow_name`` as the title, ``group_id``). Its spans, in the
order they started, give the messages:

- a ``function`` span is a tool call (``name``, the arguments the model sent in ``input``) and its
  result (``output``); a span with an ``error`` is a failed call, its result the error's message
  when there is no output. Function spans under the same parent one after another are one
  assistant turn (calls made together);
- a ``generation`` span (a Chat Completions model) gives the user's requests (the user messages
  of its ``input`` not seen before), the assistant's text (its ``output``) and the model;
- ``agent``, ``handoff`` and ``guardrail`` spans say who ran (``metadata["agents"]``), who handed
  over to whom (``metadata["handoffs"]``) and which guardrail tripped
  (``metadata["guardrails_triggered"]``); the other span types carry nothing a session keeps.

A span exported twice (when it started and when it ended) counts once, as it ended.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from kindling.sessions.convert import CONTENT_SENTINELS, content_text, dumps, parse_arguments
from kindling.sessions.files import LEADING_BYTES, epoch, iter_records, peek, read_document
from kindling.sessions.model import (
    Message,
    ReadReport,
    Session,
    ToolCall,
    new_message,
    new_session,
    new_tool_call,
)
from kindling.sessions.skips import MALFORMED_RECORD, NOT_AN_OBJECT, TOOL_CALL_WITHOUT_NAME

OPENAI_AGENTS = "openai-agents"

_TRACE = "trace"
_SPAN = "trace.span"
# What a string content_text decodes rather than passes through starts with one of these.
_SENTINEL_STARTS = tuple(marker[:1] for marker in CONTENT_SENTINELS)


def is_agents_record(obj: Any) -> bool:
    """Whether a JSON value is a trace or span exported by the OpenAI Agents SDK."""
    if not isinstance(obj, dict):
        return False
    kind = obj.get("object")
    if kind == _SPAN:
        return isinstance(obj.get("span_data"), dict)
    return kind == _TRACE and "workflow_name" in obj


def is_agents_document(obj: Any) -> bool:
    """Whether a JSON object holds exported traces and spans (``{"data": [...]}`` or ``traces``/``spans`` lists)."""
    if not isinstance(obj, dict):
        return False
    for key in ("data", "spans", "traces"):
        items = obj.get(key)
        if isinstance(items, list) and items and is_agents_record(items[0]):
            return True
    return False


def read_openai_agents(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream the sessions (one a trace) of a file of exported OpenAI Agents SDK traces and spans.

    Raises SourceError when the file cannot be opened.
    """
    head = peek(path).lstrip(LEADING_BYTES)
    if head[:1] == b"[" or (head[:1] == b"{" and not _first_line_whole(head)):
        document = read_document(path, report)
        if document is None:
            return iter(())
        return agents_sessions(path, document, report)
    return _sessions(_unbatched(record for _number, record in iter_records(path, report)), report)


def agents_sessions(path: Path, document: Any, report: ReadReport) -> Iterator[Session]:
    """The sessions of a file whose content ``document`` (a list or an object) is already parsed."""
    if isinstance(document, list):
        return _sessions(_unbatched(document), report)
    items = _batch(document) if isinstance(document, dict) else None
    return _sessions((document,) if items is None else items, report)


def _batch(document: dict[str, Any]) -> list[Any] | None:
    """The traces and spans a batch (``{"data": [...]}``, ``traces``/``spans``) holds, traces first.

    None when ``document`` is no batch (``is_agents_document`` is false).
    """
    items: list[Any] = []
    batch = False
    for key in ("traces", "data", "spans"):
        found = document.get(key)
        if isinstance(found, list) and found:
            batch = batch or is_agents_record(found[0])
            items.extend(found)
    return items if batch else None


def _unbatched(items: Iterable[Any]) -> Iterator[Any]:
    """The traces and spans of ``items``, each batch among them opened up."""
    for item in items:
        batch = _batch(item) if isinstance(item, dict) and "object" not in item else None
        if batch is None:
            yield item
        else:
            yield from batch


def _first_line_whole(head: bytes) -> bool:
    # JSONL when the first line is a whole JSON object; a document spread over lines otherwise.
    line = head.split(b"\n", 1)[0].strip()
    return line[:1] == b"{" and line[-1:] == b"}"


class _Trace:
    __slots__ = ("header", "id", "spans")

    def __init__(self, trace_id: str) -> None:
        self.id = trace_id
        self.header: dict[str, Any] = {}
        self.spans: dict[str, dict[str, Any]] = {}  # span id -> its latest export, in first-seen order


def _sessions(items: Iterable[Any], report: ReadReport) -> Iterator[Session]:
    traces: dict[str, _Trace] = {}
    trace: _Trace | None = None  # the trace of the record before (a trace's spans mostly come together)
    for item in items:
        if not isinstance(item, dict):
            report.skip(NOT_AN_OBJECT)
            continue
        kind = item.get("object")
        if kind == _SPAN:
            trace_id = item.get("trace_id")
            if trace_id.__class__ is not str or item.get("span_data").__class__ is not dict:
                report.skip(MALFORMED_RECORD)  # a span of no trace, or with no data
                continue
            if trace is None or trace_id != trace.id:
                trace = traces.get(trace_id) or traces.setdefault(trace_id, _Trace(trace_id))
            spans = trace.spans
            span_id = item.get("id")
            # Exported again when it ended: the later export wins.
            spans[span_id if span_id.__class__ is str else f"{trace_id}:{len(spans)}"] = item
        elif kind == _TRACE and "workflow_name" in item and item.get("id").__class__ is str:
            trace_id = item["id"]
            if trace is None or trace_id != trace.id:
                trace = traces.get(trace_id) or traces.setdefault(trace_id, _Trace(trace_id))
            trace.header = item
        else:
            report.skip(MALFORMED_RECORD)  # not an exported trace or span
    for trace in traces.values():
        yield _session(trace, report)


_STARTED_AT = operator.itemgetter("started_at")


def _in_start_order(spans: Collection[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans in the order they started.

    The SDK writes every time the same way (ISO 8601 in UTC), so the text sorts as the time does. A
    span without a start (or with one of another type) goes after every time.
    """
    try:
        ordered = sorted(spans, key=_STARTED_AT)
    except (KeyError, TypeError):
        return sorted(spans, key=_start_text)
    if ordered and ordered[-1]["started_at"].__class__ is not str:
        return sorted(spans, key=_start_text)  # none with a string start: as they came (stable)
    return ordered


def _session(trace: _Trace, report: ReadReport) -> Session:
    # Only the times a message or the session keeps are parsed.
    spans = _in_start_order(trace.spans.values())
    messages: list[Message] = []
    seen_requests: set[str] = set()
    metadata: dict[str, Any] = {}
    model: str | None = None
    group: list[dict[str, Any]] = []  # function spans made together, not yet written out
    ends: list[str] = []
    for span in spans:
        data = span["span_data"]
        kind = data.get("type")
        ended = span.get("ended_at")
        if ended.__class__ is str:
            ends.append(ended)
        if kind == "function":
            if group and group[-1].get("parent_id") != span.get("parent_id"):
                _calls(group, messages, report)
            group.append(span)
            continue
        if group:
            _calls(group, messages, report)
        if kind == "generation":
            if model is None and isinstance(data.get("model"), str):
                model = data["model"]
            _generation(data, _time(span.get("started_at")), seen_requests, messages)
        elif kind == "agent":
            name = data.get("name")
            if isinstance(name, str):
                agents = metadata.setdefault("agents", [])
                if name not in agents:
                    agents.append(name)
        elif kind == "handoff":
            metadata.setdefault("handoffs", []).append(f"{data.get('from_agent')} -> {data.get('to_agent')}")
        elif kind == "guardrail" and data.get("triggered") is True:
            metadata.setdefault("guardrails_triggered", []).append(data.get("name"))
        error = span.get("error")
        if error.__class__ is dict:
            metadata.setdefault("errors", []).append(_error_text(error))
    if group:
        _calls(group, messages, report)
    header = trace.header
    if header:
        if isinstance(header.get("workflow_name"), str):
            metadata["title"] = metadata["workflow_name"] = header["workflow_name"]
        if header.get("group_id") is not None:
            metadata["group_id"] = header["group_id"]
        if isinstance(header.get("metadata"), dict) and header["metadata"]:
            metadata["trace_metadata"] = header["metadata"]
    return new_session(
        trace.id,
        OPENAI_AGENTS,
        tuple(messages),
        _time(spans[0].get("started_at")) if spans else None,
        _time(max(ends)) if ends else None,
        None,
        model,
        None,
        None,
        metadata,
        None,
    )


def _start_text(span: dict[str, Any]) -> str:
    started = span.get("started_at")
    return started if isinstance(started, str) else "~"  # no start: after every time


_from_iso = datetime.fromisoformat


def _time(value: Any) -> float | None:
    """``epoch(value)``, the SDK's own form (``datetime.isoformat()`` of a UTC time) parsed directly."""
    if value.__class__ is str and value.endswith("+00:00"):
        try:
            return _from_iso(value).timestamp()  # aware (UTC): no local time zone involved
        except ValueError:
            pass
    return epoch(value)


def _generation(data: dict[str, Any], started: float | None, seen: set[str], messages: list[Message]) -> None:
    for sent in _message_list(data.get("input")):
        if (sent.__class__ is not dict and not isinstance(sent, dict)) or sent.get("role") != "user":
            continue
        text = _text(sent.get("content"))
        if text and text.strip() and text not in seen:
            seen.add(text)
            messages.append(new_message("user", text, (), None, None, None, started, None))
    for said in _message_list(data.get("output")):
        if (said.__class__ is not dict and not isinstance(said, dict)) or said.get(
            "role", "assistant"
        ) != "assistant":
            continue
        text = _text(said.get("content"))
        if text and text.strip():
            messages.append(new_message("assistant", text, (), None, None, None, started, None))


def _message_list(value: Any) -> Iterable[Any]:
    """The messages of a generation's input or output (a list, or one message); the items not checked."""
    if value.__class__ is list or isinstance(value, list):
        return value
    return (value,) if isinstance(value, dict) else ()


def _text(content: Any) -> str | None:
    """``content_text(content)``, plain text passed through without a call."""
    if content.__class__ is str and content[:1] not in _SENTINEL_STARTS:
        return content
    return content_text(content)


def _calls(group: list[dict[str, Any]], messages: list[Message], report: ReadReport) -> None:
    """Write the function spans made together as one assistant turn and their results."""
    calls: list[ToolCall] = []
    results: list[Message] = []
    started: Any = None  # when the first call the turn keeps started
    for span in group:
        data = span["span_data"]
        name = data.get("name")
        if not isinstance(name, str) or not name:
            report.skip(TOOL_CALL_WITHOUT_NAME)
            continue
        if not calls:
            started = span.get("started_at")
        arguments, raw = parse_arguments(data.get("input"))
        call_id = span.get("id")
        if call_id.__class__ is not str or not call_id:
            call_id = str(call_id or f"{span.get('trace_id')}:{len(messages)}:{len(calls)}")
        calls.append(new_tool_call(call_id, name, arguments, raw, "assistant"))
        error = span.get("error")
        output = data.get("output")
        text = None if output is None else _text(output)
        if error is None:
            failed = None
        else:
            failed = True
            if text is None:
                text = _error_text(error)
        results.append(
            new_message("tool", text, (), call_id, name, failed, _time(span.get("ended_at")), None)
        )
    if calls:
        messages.append(new_message("assistant", None, tuple(calls), None, None, None, _time(started), None))
        messages.extend(results)
    group.clear()


def _error_text(error: Any) -> str:
    """A span's error as text: its message, then its data."""
    if not isinstance(error, dict):
        return str(error)
    message = str(error.get("message") or "error")
    data = error.get("data")
    return f"{message}\n{dumps(data)}" if data else message

"""Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``, one session a file.

Two layouts are read:

- current: every line is ``{"timestamp", "type", "payload"}``; ``session_meta`` holds the session's
  id, working folder and start time, ``turn_context`` the model of each turn, ``response_item`` the
  conversation (``event_msg`` repeats it for the terminal and is not read; ``compacted`` is a
  compaction summary, counted ``compaction_summary``);
- older: a bare header line ``{"id", "timestamp", "instructions", "git"}``, ``{"record_type":
  "state"}`` markers, and the response items themselves with no ``payload`` wrapper; the working
  folder is only in the ``<cwd>`` of the ``<environment_context>`` block of the user's first turn.

Response items: ``message`` (user, assistant, developer as system); ``reasoning`` (its summary text
is the next assistant turn's reasoning); ``function_call`` / ``custom_tool_call`` /
``local_shell_call`` (consecutive calls are one assistant turn), answered by ``function_call_output``
/ ``custom_tool_call_output`` with the same ``call_id``. A shell output ``{"output", "metadata":
{"exit_code"}}`` is read as its output text, and a non-zero exit code marks the call failed (zero
marks it worked), as does Codex's own report of a command it could not run (``failed in sandbox
…``). The blocks Codex writes into the user's turn (``<environment_context>``,
``<user_instructions>``, ``# AGENTS.md instructions``) are counted ``agent_note``, never requests.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from kindling.sessions.convert import content_text, parse_arguments
from kindling.sessions.files import Record, epoch, iter_records
from kindling.sessions.model import Message, ReadReport, Session, ToolCall, new_message, new_tool_call
from kindling.sessions.skips import (
    AGENT_NOTE,
    COMPACTION_SUMMARY,
    MALFORMED_RECORD,
    ORPHAN_TOOL_RESULT,
    TOOL_CALL_WITHOUT_NAME,
)

CODEX = "codex"

_ENVELOPE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
    }
)
_NOTE_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<turn_aborted>",
    "<user_shell_command>",
)
# The working folder in the <environment_context> block Codex writes into the user's first turn.
_CWD = re.compile(r"<cwd>\s*([^<\n]+?)\s*</cwd>")
# How Codex itself reports a command it could not run (in place of the command's output).
_CODEX_FAILURES = ("failed in sandbox", "execution error", "sandbox error")
_CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


def is_codex_record(obj: dict[str, Any]) -> bool:
    """Whether a JSON object is a line of a Codex rollout (either layout)."""
    kind = obj.get("type")
    if kind in _ENVELOPE_TYPES and "payload" in obj:
        return True
    if obj.get("record_type") == "state":
        return True
    # The older layout's header line.
    return "id" in obj and "timestamp" in obj and "instructions" in obj and "messages" not in obj


def read_codex(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream the session of one Codex rollout file (either layout).

    Raises SourceError when the file cannot be opened.
    """
    return _read(path, iter_records(path, report), report)


class _Rollout:
    def __init__(self, fallback_id: str) -> None:
        self.id = fallback_id
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.model: str | None = None
        self.cwd: str | None = None
        self.metadata: dict[str, Any] = {}
        self.messages: list[Message] = []
        self.calls: dict[str, str] = {}
        self.reasoning: list[str] = []
        self.open_calls: list[ToolCall] | None = None  # the assistant turn whose calls are still coming


def _read(path: Path, records: Iterator[Record], report: ReadReport) -> Iterator[Session]:
    rollout = _Rollout(path.stem)
    seen = False
    first_time: Any = None
    last_time: Any = None
    for number, record in records:
        kind = record.get("type")
        stamp = record.get("timestamp")
        if stamp is not None:
            # Parsed when a message takes it, and for the session's start and end: not on every line.
            last_time = stamp
            if first_time is None:
                first_time = stamp
        payload = record.get("payload")
        if kind in _ENVELOPE_TYPES and payload.__class__ is dict:
            seen = True
            if kind == "response_item":
                _item(rollout, payload, stamp, report)
            elif kind == "session_meta":
                _meta(rollout, payload)
            elif kind == "turn_context":
                if isinstance(payload.get("model"), str) and rollout.model is None:
                    rollout.model = payload["model"]
                if rollout.cwd is None and isinstance(payload.get("cwd"), str):
                    rollout.cwd = payload["cwd"]
            elif kind == "compacted":
                report.skip(COMPACTION_SUMMARY)
            continue  # event_msg: the terminal's copy of the same turns
        if record.get("record_type") is not None:
            continue
        if number == 1 and "id" in record and "type" not in record:
            seen = True
            _meta(rollout, record)  # the older layout's header
            continue
        if kind in _ITEM_TYPES:
            seen = True
            _item(rollout, record, stamp, report)
        else:
            report.skip(MALFORMED_RECORD)
    if not seen:
        return
    yield Session(
        rollout.id,
        CODEX,
        tuple(rollout.messages),
        rollout.started_at if rollout.started_at is not None else epoch(first_time),
        epoch(last_time),
        None,
        rollout.model,
        None,
        None,
        rollout.metadata,
        rollout.cwd,
    )


def _meta(rollout: _Rollout, meta: dict[str, Any]) -> None:
    if meta.get("id"):
        rollout.id = str(meta["id"])
    started = epoch(meta.get("timestamp"))
    if started is not None:
        rollout.started_at = started
    if isinstance(meta.get("cwd"), str):
        rollout.cwd = meta["cwd"]
    if isinstance(meta.get("model"), str):
        rollout.model = meta["model"]
    for key in ("cli_version", "originator", "model_provider", "source"):
        if isinstance(meta.get(key), str):
            rollout.metadata[key] = meta[key]
    git = meta.get("git")
    if isinstance(git, dict) and isinstance(git.get("branch"), str):
        rollout.metadata["git_branch"] = git["branch"]


def _item(rollout: _Rollout, item: dict[str, Any], stamp: Any, report: ReadReport) -> None:
    kind = item.get("type")
    if kind == "reasoning":
        summary = item.get("summary")
        if isinstance(summary, list):
            rollout.reasoning.extend(
                part["text"]
                for part in summary
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
        return
    if kind in _CALL_TYPES:
        call = _call(item, len(rollout.messages), report)
        if call is None:
            return
        rollout.calls[call.id] = call.name
        if rollout.open_calls is None:
            rollout.open_calls = [call]
            rollout.messages.append(
                new_message("assistant", None, (call,), None, None, None, epoch(stamp), _take(rollout))
            )
        else:
            rollout.open_calls.append(call)
            last = rollout.messages[-1]
            rollout.messages[-1] = new_message(
                "assistant",
                last.content,
                tuple(rollout.open_calls),
                None,
                None,
                None,
                last.timestamp,
                last.reasoning,
            )
        return
    rollout.open_calls = None
    if kind in _OUTPUT_TYPES:
        call_id = str(item.get("call_id"))
        name = rollout.calls.pop(call_id, None)
        if name is None:
            report.skip(ORPHAN_TOOL_RESULT)
            return
        text, failed = _output(item.get("output"))
        rollout.messages.append(new_message("tool", text, (), call_id, name, failed, epoch(stamp), None))
        return
    if kind != "message":
        return  # web searches and other items the model ran on the server: no call kindling can pair
    role = item.get("role")
    text = content_text(item.get("content"))
    if role == "assistant":
        if text or rollout.reasoning:
            rollout.messages.append(
                new_message("assistant", text or None, (), None, None, None, epoch(stamp), _take(rollout))
            )
        return
    if role in ("developer", "system"):
        if text:
            rollout.messages.append(new_message("system", text, (), None, None, None, epoch(stamp), None))
        return
    if role != "user" or not text or not text.strip():
        return
    if text.lstrip().startswith(_NOTE_PREFIXES):
        if rollout.cwd is None:
            # The older layout says where the agent worked only here (no session_meta, no turn_context).
            found = _CWD.search(text)
            if found is not None:
                rollout.cwd = found.group(1)
        report.skip(AGENT_NOTE)
        return
    rollout.messages.append(new_message("user", text, (), None, None, None, epoch(stamp), None))


def _take(rollout: _Rollout) -> str | None:
    text = "\n".join(rollout.reasoning) or None
    rollout.reasoning = []
    return text


def _call(item: dict[str, Any], order: int, report: ReadReport) -> ToolCall | None:
    kind = item.get("type")
    call_id = str(item.get("call_id") or item.get("id") or f"codex:{order}")
    if kind == "local_shell_call":
        action = item.get("action")
        shell: dict[str, Any] = {
            key: value
            for key, value in (action.items() if isinstance(action, dict) else ())
            if key in ("command", "workdir", "timeout_ms") and value is not None
        }
        return new_tool_call(call_id, "local_shell", shell, None, "assistant")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        report.skip(TOOL_CALL_WITHOUT_NAME)
        return None
    if kind == "custom_tool_call":
        raw = item.get("input")
        return new_tool_call(call_id, name, {}, raw if isinstance(raw, str) else None, "assistant")
    arguments, raw_text = parse_arguments(item.get("arguments"))
    return new_tool_call(call_id, name, arguments, raw_text, "assistant")


def _output(value: Any) -> tuple[str | None, bool | None]:
    """The text of a call's output and whether it failed (an exit code says; None when nothing does)."""
    if isinstance(value, dict):
        text = value.get("content")
        return (text if isinstance(text, str) else None), None
    if not isinstance(value, str):
        return content_text(value), None
    if value[:1] == "{":
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value, None
        if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
            metadata = parsed.get("metadata")
            code = metadata.get("exit_code") if isinstance(metadata, dict) else None
            failed = None if not isinstance(code, int) or isinstance(code, bool) else code != 0
            return parsed["output"], failed
    if value.startswith(_CODEX_FAILURES):
        return value, True
    return value, None

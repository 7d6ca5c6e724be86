"""SWE-agent trajectories: one ``.traj`` JSON document a run.

A trajectory holds ``history`` (the conversation as the model saw it: ``role``, ``content``,
``message_type``, and for function calling ``tool_calls`` / ``tool_call_ids``), ``trajectory`` (one
step per action: ``thought``, ``action``, ``observation``) and ``info`` (``exit_status``,
``submission``, costs).

What is read: the history, without its demonstrations (``is_demo``, counted ``agent_note``). An
assistant turn's ``tool_calls`` are its calls and each ``tool`` message answers one; without
function calling, an assistant turn's ``action`` is one ``bash`` call (``{"command": action}``: SWE-agent
runs every action in its shell) and the observation that follows answers it. A file with no
history is read from its steps the same way. The run's ``info.exit_status`` is the session's end
reason and ``metadata["submitted"]`` says whether it submitted a patch; the model comes from
``replay_config`` where the file keeps one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from kindling.sessions.convert import content_text, parse_calls_at
from kindling.sessions.files import read_document
from kindling.sessions.model import Message, ReadReport, Session, ToolCall, new_message, new_tool_call
from kindling.sessions.skips import AGENT_NOTE, MALFORMED_MESSAGE, MALFORMED_RECORD, ORPHAN_TOOL_RESULT

SWE_AGENT = "swe-agent"
#: The tool name of an action SWE-agent ran in its shell.
SHELL_TOOL = "bash"


def is_swe_agent_trajectory(document: Any) -> bool:
    """Whether a JSON document is a SWE-agent trajectory."""
    if not isinstance(document, dict):
        return False
    history = document.get("history")
    if isinstance(history, list) and history and isinstance(history[0], dict):
        first = history[0]
        return "role" in first and ("agent" in first or "message_type" in first)
    steps = document.get("trajectory")
    return (
        isinstance(steps, list)
        and bool(steps)
        and isinstance(steps[0], dict)
        and "action" in steps[0]
        and "observation" in steps[0]
    )


def read_swe_agent(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream the session of one SWE-agent ``.traj`` file.

    Raises SourceError when the file cannot be opened.
    """
    document = read_document(path, report)  # raises SourceError when the file cannot be read
    if document is None:
        return iter(())
    return swe_agent_sessions(path, document, report)


def swe_agent_sessions(path: Path, document: Any, report: ReadReport) -> Iterator[Session]:
    """The session of a ``.traj`` file whose content ``document`` is already parsed."""
    if not is_swe_agent_trajectory(document):
        report.skip(MALFORMED_RECORD)
        return iter(())
    return iter([_session(path, document, report)])


def _session(path: Path, document: dict[str, Any], report: ReadReport) -> Session:
    session_id = path.name.removesuffix(".traj")
    history = document.get("history")
    if isinstance(history, list) and history:
        messages = _from_history(history, session_id, report)
    else:
        messages = _from_steps(document.get("trajectory") or [], session_id, report)
    found = document.get("info")
    info: dict[str, Any] = found if isinstance(found, dict) else {}
    status = info.get("exit_status")
    metadata: dict[str, Any] = {"submitted": bool(info.get("submission"))} if info else {}
    return Session(
        session_id,
        SWE_AGENT,
        messages,
        end_reason=status if isinstance(status, str) else None,
        model=_model(document.get("replay_config")),
        metadata=metadata,
    )


def _from_history(history: list[Any], session_id: str, report: ReadReport) -> tuple[Message, ...]:
    out: list[Message] = []
    append = out.append
    pending: dict[str, str] = {}  # call id -> tool name
    shell_call: ToolCall | None = None  # an action waiting for its observation (no function calling)
    for index, entry in enumerate(history):
        if not isinstance(entry, dict):
            report.skip(MALFORMED_MESSAGE)
            continue
        if entry.get("is_demo"):
            report.skip(AGENT_NOTE)  # a demonstration the prompt carried, not this run
            continue
        role = entry.get("role")
        text = content_text(entry.get("content"))
        if role == "system":
            append(new_message("system", text, (), None, None, None, None, None))
        elif role == "assistant":
            calls = parse_calls_at(entry.get("tool_calls"), report, session_id, index)
            action = entry.get("action")
            if not calls and isinstance(action, str) and action.strip():
                shell_call = new_tool_call(
                    f"{session_id}:{index}", SHELL_TOOL, {"command": action.strip()}, None, "assistant"
                )
                calls = (shell_call,)
            for call in calls:
                pending[call.id] = call.name
            append(new_message("assistant", text or None, calls, None, None, None, None, None))
        elif role == "tool":
            ids = entry.get("tool_call_ids") or [entry.get("tool_call_id")]
            call_id = str(ids[0]) if ids and ids[0] is not None else None
            name = pending.pop(call_id, None) if call_id is not None else None
            if name is None:
                report.skip(ORPHAN_TOOL_RESULT)
                continue
            append(new_message("tool", text, (), call_id, name, None, None, None))
        elif role == "user":
            if shell_call is not None and entry.get("message_type") == "observation":
                pending.pop(shell_call.id, None)
                append(new_message("tool", text, (), shell_call.id, shell_call.name, None, None, None))
            else:
                append(new_message("user", text, (), None, None, None, None, None))
            shell_call = None
        else:
            report.skip(MALFORMED_MESSAGE)
    return tuple(out)


def _from_steps(steps: list[Any], session_id: str, report: ReadReport) -> tuple[Message, ...]:
    out: list[Message] = []
    for index, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("action"), str):
            report.skip(MALFORMED_MESSAGE)
            continue
        call = new_tool_call(
            f"{session_id}:{index}", SHELL_TOOL, {"command": step["action"].strip()}, None, "assistant"
        )
        thought = content_text(step.get("thought")) or None
        out.append(new_message("assistant", thought, (call,), None, None, None, None, None))
        out.append(
            new_message(
                "tool", content_text(step.get("observation")), (), call.id, call.name, None, None, None
            )
        )
    return tuple(out)


def _model(config: Any) -> str | None:
    if isinstance(config, str):
        try:
            config = orjson.loads(config)
        except orjson.JSONDecodeError:
            return None
    agent = config.get("agent") if isinstance(config, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    if isinstance(model, dict):
        for key in ("name", "model_name"):
            if isinstance(model.get(key), str):
                return str(model[key])
    return None

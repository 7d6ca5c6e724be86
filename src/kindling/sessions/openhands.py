"""OpenHands sessions: a saved trajectory (a JSON list of events) or a session's event stream.

Every event is an *action* (``"action"``: what the user or the agent did) or an *observation*
(``"observation"``: what came back, with ``cause`` naming the action's ``id``). A trajectory file
holds the list; the event stream of a session (``~/.openhands/sessions/<id>/events/<n>.json``) holds
one event a file, read in the order of their numbers.

What is read: the user's ``message`` actions are requests and the agent's are its replies; an
action with ``tool_call_metadata`` is a tool call (the function name and the arguments the model
sent; consecutive calls from one model response are one assistant turn, its ``thought`` the text);
the observation whose ``cause`` is that action is its result. An ``error`` observation, a
``user_rejected`` one, or a command whose ``exit_code`` is not zero marks the call failed; an exit
code of zero marks it worked. Actions and observations of the agent's own machinery
(``system``, ``recall``, ``change_agent_state``, ``agent_state_changed``) are not messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kindling.errors import SourceError
from kindling.sessions.convert import content_text, parse_arguments
from kindling.sessions.files import epoch, read_document
from kindling.sessions.folders import EVENT_FILE
from kindling.sessions.model import Message, ReadReport, Role, Session, ToolCall, new_message, new_tool_call
from kindling.sessions.skips import MALFORMED_RECORD, NOT_AN_OBJECT, ORPHAN_TOOL_RESULT, UNREADABLE_FILE

OPENHANDS = "openhands"

_FAILED_OBSERVATIONS = frozenset({"error", "user_rejected"})


def is_openhands_event(obj: Any) -> bool:
    """Whether a JSON value is one OpenHands event (an action or an observation)."""
    return (
        isinstance(obj, dict)
        and ("action" in obj or "observation" in obj)
        and "source" in obj
        and ("id" in obj or "timestamp" in obj)
    )


def read_openhands(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream the session of an OpenHands trajectory file, or of an ``events/`` directory.

    Raises SourceError when the source cannot be opened.
    """
    if path.is_dir():
        return iter(
            [
                _session(
                    path.parent.name if path.name == "events" else path.name, _events(path, report), report
                )
            ]
        )
    document = read_document(path, report)  # raises SourceError when the file cannot be read
    if document is None:
        return iter(())
    return openhands_sessions(path, document, report)


def openhands_sessions(path: Path, document: Any, report: ReadReport) -> Iterator[Session]:
    """The session of an OpenHands trajectory file whose content ``document`` is already parsed."""
    if isinstance(document, dict) and isinstance(document.get("trajectory"), list):
        document = document["trajectory"]
    if not isinstance(document, list):
        report.skip(MALFORMED_RECORD)
        return iter(())
    return iter([_session(path.stem, iter(document), report)])


def _events(directory: Path, report: ReadReport) -> Iterator[Any]:
    numbered = sorted(
        (int(match.group(1)), child)
        for child in directory.iterdir()
        if (match := EVENT_FILE.match(child.name)) is not None
    )
    for _number, child in numbered:
        try:
            event = read_document(child, report)
        except SourceError:
            report.skip(UNREADABLE_FILE)
            continue
        if event is not None:
            yield event


def _session(session_id: str, events: Iterator[Any], report: ReadReport) -> Session:
    messages: list[Message] = []
    calls: dict[Any, ToolCall] = {}  # action id -> its call
    stamps: list[Any] = []  # every event's time as written: parsed for the messages, the start and the end
    model: str | None = None
    last_response: Any = None
    for event in events:
        if not isinstance(event, dict):
            report.skip(NOT_AN_OBJECT)
            continue
        stamp = event.get("timestamp")
        if stamp is not None:
            stamps.append(stamp)
        metadata = event.get("tool_call_metadata")
        if "action" in event:
            kind = event.get("action")
            args = _dict(event.get("args"))
            if isinstance(metadata, dict):
                response = _dict(metadata.get("model_response"))
                if model is None and isinstance(response.get("model"), str):
                    model = response["model"]
                call = _call(event, metadata, response, args)
                calls[event.get("id")] = call
                thought = args.get("thought") if isinstance(args.get("thought"), str) else None
                response_id = response.get("id")
                last = messages[-1] if messages else None
                if (
                    response_id is not None
                    and response_id == last_response
                    and last
                    and last.role == "assistant"
                ):
                    messages[-1] = new_message(
                        "assistant",
                        last.content,
                        (*last.tool_calls, call),
                        None,
                        None,
                        None,
                        last.timestamp,
                        None,
                    )
                else:
                    messages.append(
                        new_message(
                            "assistant", thought or None, (call,), None, None, None, epoch(stamp), None
                        )
                    )
                last_response = response_id
                continue
            last_response = None
            if kind == "message":
                text = content_text(args.get("content")) or content_text(event.get("message"))
                if text and text.strip():
                    role: Role = "user" if event.get("source") == "user" else "assistant"
                    messages.append(new_message(role, text, (), None, None, None, epoch(stamp), None))
            continue
        if "observation" in event:
            last_response = None
            cause = event.get("cause")
            answered = calls.pop(cause, None) if cause is not None else None
            if answered is None:
                if isinstance(metadata, dict):
                    report.skip(ORPHAN_TOOL_RESULT)  # a tool's result whose action is not in the file
                continue
            messages.append(
                new_message(
                    "tool",
                    content_text(event.get("content")),
                    (),
                    answered.id,
                    answered.name,
                    _failed(event),
                    epoch(stamp),
                    None,
                )
            )
            continue
        report.skip(MALFORMED_RECORD)
    started = next((moment for moment in map(epoch, stamps) if moment is not None), None)
    ended = next((moment for moment in map(epoch, reversed(stamps)) if moment is not None), None)
    return Session(session_id, OPENHANDS, tuple(messages), started, ended, None, model)


def _call(
    event: dict[str, Any], metadata: dict[str, Any], response: dict[str, Any], args: dict[str, Any]
) -> ToolCall:
    call_id = str(metadata.get("tool_call_id") or f"openhands:{event.get('id')}")
    name = str(metadata.get("function_name") or event.get("action") or "unknown")
    # The arguments as the model sent them, from the response that made the call.
    for choice in response.get("choices") or ():
        message = _dict(choice.get("message") if isinstance(choice, dict) else None)
        for sent in message.get("tool_calls") or ():
            if isinstance(sent, dict) and sent.get("id") == metadata.get("tool_call_id"):
                function = _dict(sent.get("function"))
                arguments, raw = parse_arguments(function.get("arguments"))
                return new_tool_call(call_id, name, arguments, raw, "assistant")
    kept = {key: value for key, value in args.items() if key not in ("thought", "security_risk")}
    return new_tool_call(call_id, name, kept, None, "assistant")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _failed(event: dict[str, Any]) -> bool | None:
    if event.get("observation") in _FAILED_OBSERVATIONS:
        return True
    extras = _dict(event.get("extras"))
    code = _dict(extras.get("metadata")).get("exit_code")
    if code is None:
        code = extras.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return code != 0
    return None

"""The agent-facing ``warm_session`` tool: build, list, load, delete and inject warm-up templates.

``warm_session(args)`` never raises: it returns JSON the model reads, ``{"success": true, ...}`` with
the data, or ``{"success": false, "error": "..."}``. Templates live in the default store
(``$KINDLING_TEMPLATE_STORE`` or ``$KINDLING_HOME/templates``); sessions are read from
``$HERMES_HOME/state.db`` unless ``sources`` name other session files (database URLs are refused:
the model does not choose which hosts kindling connects to). A server that fixes its sources (the
MCP server) passes them in; a call may then read only those.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kindling.errors import KindlingError

if TYPE_CHECKING:
    from kindling.templates.store import TemplateStore

__all__ = ["WARM_SESSION_SCHEMA", "warm_session"]

ACTIONS = ("build", "list", "load", "delete", "inject")
PREVIEW_CHARS = 80

WARM_SESSION_SCHEMA: dict[str, Any] = {
    "name": "warm_session",
    "description": (
        "Manage warm-up templates mined from past sessions, so a new session starts with examples of "
        "tool calls that worked. Actions: build (mine past sessions into a named template), list, "
        "load (the warm conversation for a task, with a short preview), delete, inject (insert the "
        "warm messages into a conversation after its system messages)."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS), "description": "What to do."},
            "name": {
                "type": "string",
                "description": "Template name (letters, digits, '-', '_', '.'). For load/inject, omit to "
                "choose automatically from the task.",
            },
            "description": {"type": "string", "description": "build: what the template is for."},
            "min_messages": {
                "type": "integer",
                "description": "build: skip sessions shorter than this (default 20).",
            },
            "max_sessions": {"type": "integer", "description": "build: mine at most this many sessions."},
            "source_filter": {
                "type": "string",
                "description": "build: only sessions whose source matches this glob (e.g. cli, telegram).",
            },
            "tags": {"type": "array", "items": {"type": "string"}, "description": "build: tags."},
            "task_type": {
                "type": "string",
                "enum": ["code", "file", "research", "terminal", "mixed"],
                "description": "build: the template's task type (default: detected from the calls).",
            },
            "sources": {
                "type": "array",
                "items": {"type": "string"},
                "description": "build: session files (default: the Hermes state.db); not database URLs.",
            },
            "task": {"type": "string", "description": "load/inject: the new session's task, in words."},
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "load/inject: the agent's tool names; no other tool is shown (default: any).",
            },
            "budget": {"type": "integer", "description": "load/inject: token budget (default 2000)."},
            "lessons": {
                "type": "boolean",
                "description": "load/inject: also show the template's lessons, past failures of the tools "
                "shown and what worked next (default true).",
            },
            "style": {
                "type": "string",
                "enum": ["triples", "closed"],
                "description": "load/inject: closed adds a one-line reply after each tool result.",
            },
            "messages": {
                "type": "array",
                "items": {"type": "object"},
                "description": "inject: the conversation (OpenAI format) to warm.",
            },
        },
        "required": ["action"],
    },
}


class _BadArgument(Exception):
    pass


def _str(args: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = args.get(key)
    if value is None or value == "":
        if required:
            raise _BadArgument(f"{key} is required for action {args.get('action')!r}.")
        return None
    if not isinstance(value, str):
        raise _BadArgument(f"{key} must be a string.")
    return value


def _required(args: dict[str, Any], key: str) -> str:
    value = _str(args, key, required=True)
    assert value is not None  # _str raised otherwise
    return value


def _int(args: dict[str, Any], key: str, default: int | None) -> int | None:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _BadArgument(f"{key} must be a whole number of 0 or more.")
    return value


def _bool(args: dict[str, Any], key: str, default: bool) -> bool:
    value = args.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _BadArgument(f"{key} must be true or false.")
    return value


def _str_list(args: dict[str, Any], key: str) -> list[str]:
    value = args.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _BadArgument(f"{key} must be a list of strings.")
    return value


def _preview(messages: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    for message in messages:
        if message.get("tool_calls"):
            for call in message["tool_calls"]:
                lines.append(f"- {call['function']['name']}({call['function']['arguments'][:PREVIEW_CHARS]})")
        elif message.get("role") == "user":
            lines.append(f"> {str(message.get('content') or '')[:PREVIEW_CHARS]}")
    return "\n".join(lines)


def _where(source: Any) -> str:
    """A source as a comparable place: a URL as written, a path resolved."""
    text = str(source)
    if "://" in text:
        return text
    from pathlib import Path

    return str(Path(text).expanduser().resolve())


def _build(args: dict[str, Any], allowed: list[str] | None = None) -> dict[str, Any]:
    from kindling.config import hermes_state_db
    from kindling.templates.build import build_template_with_report

    name = _required(args, "name")
    filters: dict[str, Any] = {"min_messages": _int(args, "min_messages", 20)}
    max_sessions = _int(args, "max_sessions", None)
    if max_sessions is not None:
        filters["max_sessions"] = max_sessions
    source_filter = _str(args, "source_filter")
    if source_filter:
        filters["source_filter"] = source_filter
    sources: list[Any] = _str_list(args, "sources") or list(allowed or ()) or [hermes_state_db()]
    if any("://" in source for source in sources if isinstance(source, str)) and allowed is None:
        # A model (perhaps steered by text it read) must not make kindling connect to a database
        # host of its choosing with the operator's credentials; people can, with `kindling build`.
        raise _BadArgument("sources must be session files on this machine, not database URLs.")
    if allowed is not None:
        # The server decides what may be read (an MCP client could otherwise name any file here,
        # such as every user's proxy recordings): the sources it was started with, or some of them.
        permitted = {_where(source) for source in allowed}
        foreign = [source for source in sources if _where(source) not in permitted]
        if foreign:
            raise _BadArgument(
                f"sources are fixed by the server (its --source options); {foreign[0]!r} is not one of them."
            )
    result = build_template_with_report(
        name,
        sources,
        description=_str(args, "description") or None,
        task_type=_str(args, "task_type"),
        tags=_str_list(args, "tags") if args.get("tags") is not None else None,
        **filters,
    )
    verb = "Nothing changed in" if result.unchanged else "Built"
    return {"message": f"{verb} template {name!r} v{result.template.version}.", **result.as_dict()}


def _visible() -> TemplateStore:
    """The templates an agent here may use: the default tenant's, those without a tenant, and the
    shared ones; never another tenant's (the proxy builds ``proxy-TENANT`` into the same store)."""
    from kindling.templates.store import DEFAULT_TENANT, TenantTemplates, open_store

    return TenantTemplates(open_store(), DEFAULT_TENANT)


def _list(args: dict[str, Any]) -> dict[str, Any]:
    store = _visible()
    templates = [t.summary() for t in store.list()]
    return {"templates": templates, "count": len(templates), "problems": _problems(store)}


def _problems(store: TemplateStore) -> list[dict[str, str]]:
    return [{"location": p.location, "reason": p.reason} for p in store.problems]


def _load(args: dict[str, Any]) -> dict[str, Any]:
    from kindling.warmup.warm import warm

    store = _visible()
    result = warm(
        _str(args, "name"),
        _str(args, "task") or "",
        store=store,
        budget=_int(args, "budget", 2000) or 0,
        style=_str(args, "style") or "triples",
        tools=_str_list(args, "tools") if args.get("tools") is not None else None,
        lessons=_bool(args, "lessons", True),
    )
    data = result.as_dict()
    data["preview"] = _preview(result.messages)
    data["problems"] = _problems(store)  # templates the automatic choice had to skip
    return data


def _delete(args: dict[str, Any]) -> dict[str, Any]:
    from kindling.templates.store import open_store

    name = _required(args, "name")
    _visible().get(name)  # another tenant's template is not there for an agent to delete
    open_store().delete(name)
    return {"message": f"Deleted template {name!r}."}


def _inject(args: dict[str, Any]) -> dict[str, Any]:
    from kindling.warmup.warm import inject_warm

    messages = args.get("messages")
    if not isinstance(messages, list):
        raise _BadArgument("messages must be the conversation: a list of OpenAI-format messages.")
    store = _visible()
    merged, result = inject_warm(
        messages,
        _str(args, "name"),
        task=_str(args, "task"),
        store=store,
        budget=_int(args, "budget", 2000) or 0,
        style=_str(args, "style") or "triples",
        tools=_str_list(args, "tools") if args.get("tools") is not None else None,
        lessons=_bool(args, "lessons", True),
    )
    return {
        "template": result.template.name,
        "why": result.as_dict()["why"],
        "messages": merged,
        "injected": len(result.messages),
        "estimated_tokens": result.estimated_tokens,
        "preview": _preview(result.messages),
        "problems": _problems(store),
    }


_HANDLERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "build": _build,
    "list": _list,
    "load": _load,
    "delete": _delete,
    "inject": _inject,
}


def warm_session(args: dict[str, Any], *, sources: Sequence[str] | None = None) -> str:
    """Handle a ``warm_session`` call; return its JSON result. Never raises.

    ``sources``, when given, are the only sources ``build`` may read (the MCP server's): by
    default, and any a call names must be among them. Success: ``{"success": true, "action": ...,
    ...data}``; failure: ``{"success": false, "error": ...}``.
    """
    if not isinstance(args, dict):
        return json.dumps({"success": False, "error": "Arguments must be a JSON object."})
    action = args.get("action")
    handler = _HANDLERS.get(action) if isinstance(action, str) else None
    if handler is None:
        return json.dumps(
            {"success": False, "error": f"action must be one of {', '.join(ACTIONS)}, not {action!r}."}
        )
    try:
        data = _build(args, list(sources)) if handler is _build and sources is not None else handler(args)
    except (_BadArgument, KindlingError) as exc:
        return json.dumps({"success": False, "action": action, "error": str(exc)})
    return json.dumps({"success": True, "action": action, **data}, default=str)

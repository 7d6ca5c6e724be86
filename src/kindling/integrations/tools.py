"""Every agent-facing kindling tool in one place: a JSON schema and a handler for each.

A handler takes the parsed argument object and returns JSON text the model reads; none of them
raises. Register them with any agent that speaks the OpenAI tool format, or with kindling's own
loop through :func:`kindling_tools`::

    from kindling.agent import ToolRegistry
    from kindling.integrations.tools import kindling_tools

    registry = ToolRegistry.of(kindling_tools())
"""

from __future__ import annotations

from typing import Any

from kindling.agent.registry import Handler, Tool
from kindling.integrations.confirm_tool import REQUEST_CONFIRMATION_SCHEMA, request_confirmation
from kindling.integrations.warm_tool import WARM_SESSION_SCHEMA, warm_session

__all__ = [
    "REQUEST_CONFIRMATION_SCHEMA",
    "TOOLSET",
    "TOOL_HANDLERS",
    "TOOL_SCHEMAS",
    "WARM_SESSION_SCHEMA",
    "kindling_tools",
    "request_confirmation",
    "warm_session",
]

TOOLSET = "kindling"

TOOL_SCHEMAS: tuple[dict[str, Any], ...] = (WARM_SESSION_SCHEMA, REQUEST_CONFIRMATION_SCHEMA)

TOOL_HANDLERS: dict[str, Handler] = {
    WARM_SESSION_SCHEMA["name"]: warm_session,
    REQUEST_CONFIRMATION_SCHEMA["name"]: request_confirmation,
}


def kindling_tools() -> list[Tool]:
    """Return kindling's agent-facing tools as registry entries in the ``kindling`` toolset."""
    return [
        Tool(name=schema["name"], toolset=TOOLSET, schema=schema, handler=TOOL_HANDLERS[schema["name"]])
        for schema in TOOL_SCHEMAS
    ]

"""Tools an agent run may call: a name, a toolset, a JSON schema and a handler, behind a whitelist.

A handler takes the parsed argument object and returns a JSON string, the tool result the model
reads. The registry is the one place a call is dispatched, so the rules live here:

- a call to a tool outside the whitelist is answered with a clear denial and never executed;
- a call to a tool nobody registered is answered with an error naming the tools that exist;
- arguments that are not a JSON object are refused before the handler runs;
- a handler that raises becomes ``{"success": false, "error": ...}`` (logged, never raised).

While a handler runs, :func:`current_call` tells it which call it is answering (tool name and
``tool_call_id``), so a handler can record provenance without a wider signature.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kindling.errors import KindlingError

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], str]
DispatchStatus = Literal["ok", "error", "denied", "unknown", "bad_arguments"]

# Tools that can change the machine or leak data. They are denied like any other call outside a
# whitelist; naming them lets the denial say *why*, which stops a model from retrying in a loop.
DANGEROUS_TOOLS: frozenset[str] = frozenset(
    {
        "terminal",
        "shell",
        "bash",
        "execute_code",
        "run_command",
        "process",
        "write_file",
        "patch",
        "delete_file",
        "send_message",
        "browser_navigate",
        "delegate_task",
        "cronjob",
    }
)


@dataclass(frozen=True)
class Tool:
    """One callable tool.

    ``schema`` is the OpenAI function schema (``name``, ``description``, ``parameters``);
    ``handler(args) -> str`` returns the JSON text the model reads as the result.
    """

    name: str
    toolset: str
    schema: Mapping[str, Any]
    handler: Handler

    def openai_schema(self) -> dict[str, Any]:
        """Return the tool as an entry of the chat-completions ``tools`` list."""
        function = dict(self.schema)
        function.setdefault("name", self.name)
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class CallContext:
    """The call a handler is answering right now."""

    tool_name: str
    tool_call_id: str | None


@dataclass(frozen=True)
class Dispatch:
    """One dispatched call, as the registry saw it: what was asked and what happened."""

    name: str
    tool_call_id: str | None
    status: DispatchStatus


_current_call: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar(
    "kindling_current_call", default=None
)


def current_call() -> CallContext | None:
    """Return the call the running handler answers, or None outside a dispatch."""
    return _current_call.get()


@contextlib.contextmanager
def _calling(context: CallContext) -> Iterator[None]:
    token = _current_call.set(context)
    try:
        yield
    finally:
        _current_call.reset(token)


def result_json(data: Mapping[str, Any]) -> str:
    """Serialize a tool result the way every kindling tool answers (UTF-8 kept readable)."""
    return json.dumps(data, ensure_ascii=False, default=str)


def error_result(message: str, **extra: Any) -> str:
    """Return the JSON text ``{"success": false, "error": message, ...}``."""
    return result_json({"success": False, "error": message, **extra})


@dataclass
class ToolRegistry:
    """Registered tools plus an optional whitelist of toolsets and tool names.

    With no whitelist every registered tool may run. With one, a tool runs only when its toolset
    or its name is listed; every other call is denied. ``log`` records every dispatch in order.
    """

    tools: dict[str, Tool] = field(default_factory=dict)
    allowed_toolsets: frozenset[str] | None = None
    allowed_names: frozenset[str] | None = None
    log: list[Dispatch] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        tools: Iterable[Tool] = (),
        *,
        toolsets: Iterable[str] | None = None,
        names: Iterable[str] | None = None,
    ) -> ToolRegistry:
        """Build a registry holding ``tools``, whitelisted to ``toolsets``/``names`` when given."""
        registry = cls(
            allowed_toolsets=frozenset(toolsets) if toolsets is not None else None,
            allowed_names=frozenset(names) if names is not None else None,
        )
        for tool in tools:
            registry.register(tool)
        return registry

    def register(self, tool: Tool) -> Tool:
        """Add ``tool`` (replacing one of the same name) and return it.

        Raises KindlingError when the name is empty or the handler is not callable.
        """
        if not tool.name or not tool.name.strip():
            raise KindlingError("A tool needs a non-empty name.")
        if not callable(tool.handler):
            raise KindlingError(f"Tool {tool.name!r} has no callable handler.")
        with self._lock:
            self.tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        """Return the tool called ``name``, or None."""
        return self.tools.get(name)

    def names(self) -> list[str]:
        """Return the registered tool names, sorted."""
        return sorted(self.tools)

    @property
    def whitelisted(self) -> bool:
        """True when a whitelist restricts which tools may run."""
        return self.allowed_toolsets is not None or self.allowed_names is not None

    def is_allowed(self, name: str) -> bool:
        """True when a call to ``name`` may run: registered and inside the whitelist."""
        tool = self.tools.get(name)
        if tool is None:
            return False
        if not self.whitelisted:
            return True
        return (self.allowed_toolsets is not None and tool.toolset in self.allowed_toolsets) or (
            self.allowed_names is not None and tool.name in self.allowed_names
        )

    def restricted(self, *, toolsets: Iterable[str] = (), names: Iterable[str] = ()) -> ToolRegistry:
        """Return a new registry with the same tools whose whitelist is ``toolsets`` + ``names``.

        The tools and their schemas are kept, so a request can still advertise them (a provider's
        prompt cache keys on the tool list); only dispatch is restricted. The log starts empty.
        """
        copy = ToolRegistry(allowed_toolsets=frozenset(toolsets), allowed_names=frozenset(names))
        copy.tools = dict(self.tools)
        return copy

    def openai_tools(self, *, only_allowed: bool = False) -> list[dict[str, Any]]:
        """Return the ``tools`` list for a chat-completions request, in registration order."""
        return [t.openai_schema() for t in self.tools.values() if not only_allowed or self.is_allowed(t.name)]

    def _allowed_description(self) -> str:
        parts = sorted(self.allowed_toolsets or ()) + sorted(self.allowed_names or ())
        return ", ".join(parts) if parts else "none"

    def _record(self, name: str, call_id: str | None, status: DispatchStatus) -> None:
        with self._lock:
            self.log.append(Dispatch(name, call_id, status))

    def denial(self, name: str) -> str:
        """Return the JSON denial a model reads when it calls ``name`` outside the whitelist."""
        why = (
            "it can change the machine, so it is auto-denied here"
            if name in DANGEROUS_TOOLS
            else "it is outside this run's whitelist"
        )
        return error_result(
            f"Tool '{name}' was denied and not executed: {why}. "
            f"Only these tools may run: {self._allowed_description()}.",
            denied=True,
        )

    def dispatch(
        self, name: str, arguments: str | Mapping[str, Any] | None, *, call_id: str | None = None
    ) -> str:
        """Run one call and return the JSON result text for the model. Never raises.

        ``arguments`` is the raw JSON text the model sent or an already-parsed object.
        """
        tool = self.tools.get(name)
        if self.whitelisted and not self.is_allowed(name):
            logger.warning("Denied a call to %r (tool_call_id=%s): outside the whitelist.", name, call_id)
            self._record(name, call_id, "denied")
            return self.denial(name)
        if tool is None:
            self._record(name, call_id, "unknown")
            return error_result(
                f"Unknown tool '{name}'. Available tools: {', '.join(self.names()) or 'none'}."
            )
        parsed = _parse_arguments(arguments)
        if isinstance(parsed, str):
            self._record(name, call_id, "bad_arguments")
            return error_result(f"Tool '{name}' was not run: {parsed}")
        try:
            with _calling(CallContext(tool_name=name, tool_call_id=call_id)):
                result = tool.handler(parsed)
        except Exception as exc:  # a tool's bug must reach the model and the log, never the caller
            logger.exception("Tool %r raised while answering tool_call_id=%s.", name, call_id)
            self._record(name, call_id, "error")
            return error_result(f"Tool '{name}' failed: {type(exc).__name__}: {exc}")
        if not isinstance(result, str):
            # Handlers should return JSON text; accept a mapping rather than fail the whole run.
            result = result_json(result) if isinstance(result, Mapping) else str(result)
        self._record(name, call_id, "ok")
        return result


def _parse_arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any] | str:
    """Return the argument object, or a sentence saying why the arguments are unusable."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    text = arguments.strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"its arguments are not valid JSON ({exc.msg} at position {exc.pos})."
    if not isinstance(value, dict):
        return f"its arguments must be a JSON object, not {type(value).__name__}."
    return value

"""Kindling as a Hermes Agent plugin: warm each new session, ask a human before dangerous commands.

Hermes finds this module through the ``hermes_agent.plugins`` entry point (name ``kindling``) and,
once ``plugins.enabled`` in ``$HERMES_HOME/config.yaml`` lists ``kindling`` (``kindling hermes
install`` adds it), calls :func:`register` with its plugin context. Three parts, each switchable
(see :mod:`kindling.integrations.hermes_settings`):

- **Warm start** (``llm_request`` middleware): on a session's first API call, the warm-up for the
  first user message, limited to the tools in the request, goes right after the system messages
  (chat completions) or first in ``messages`` as Messages API turns (Hermes's
  ``anthropic_messages`` mode, a template's system addendum then last in ``system``).
  It is computed once per session and the identical bytes are inserted on every later call, so
  the prompt prefix stays byte-stable for the provider's cache. It only changes what is sent:
  Hermes stores the real messages, never the warm ones. A failure logs one line and the turn goes
  on unwarmed.
- **Tools**: ``warm_session`` and ``request_confirmation`` in a ``kindling`` toolset.
- **Approvals** (``pre_tool_call`` hook): see :mod:`kindling.integrations.hermes_approval`.

Newer Hermes releases are used where they offer more: ``ctx.get_config`` for the settings,
``plugins.hook_callback_timeout`` to keep the approval wait inside Hermes's own hook limit, and
``ctx.register_approval_transport`` so Hermes's own approval prompts can be answered through the
daemon. Each is feature-detected, so the plugin loads on 0.19.0 and later alike.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kindling.errors import KindlingError, NotFoundError
from kindling.integrations.hermes_approval import ApprovalGate
from kindling.integrations.hermes_settings import PluginSettings

__all__ = ["SessionWarmer", "load_settings", "register"]

logger = logging.getLogger("kindling.hermes")

TOOLSET = "kindling"
# Warm messages are OpenAI chat messages, converted to Messages API turns for Hermes's Anthropic
# mode; its Bedrock and Responses modes carry other shapes ("input" items) and are left as they
# are. "" is an older Hermes.
CHAT_API_MODES = frozenset({"chat_completions", ""})
ANTHROPIC_API_MODE = "anthropic_messages"
APPROVAL_TRANSPORT = "kindling"
# Hermes's own hook limit (newer releases) must outlast the approval check, which may take the
# approval timeout plus kindling.confirm.client.DEADLINE_MARGIN (5 s); keep 2 s more spare.
_HOOK_MARGIN_SECONDS = 7.0


def load_settings(ctx: Any = None) -> PluginSettings:
    """Return the plugin's settings: ``ctx.get_config()`` when Hermes offers it, else config.yaml.

    ``KINDLING_*`` variables fill what the configuration leaves unset. Raises ConfigError.
    """
    from kindling.hermes_config import load_hermes_config, plugin_settings

    config: Mapping[str, Any] | None = None
    get_config = getattr(ctx, "get_config", None)
    if callable(get_config):
        try:
            provided = get_config()
        except Exception as exc:
            logger.warning("kindling: ctx.get_config() failed (%s); reading config.yaml instead.", exc)
        else:
            if isinstance(provided, Mapping):
                inner = provided.get("settings")
                config = inner if isinstance(inner, Mapping) else provided
    if config is None:
        config = plugin_settings()
    settings = PluginSettings.load(config)
    hook_limit = (load_hermes_config().get("plugins") or {}).get("hook_callback_timeout")
    if isinstance(hook_limit, int | float) and not isinstance(hook_limit, bool) and hook_limit > 0:
        bound = max(1.0, float(hook_limit) - _HOOK_MARGIN_SECONDS)
        if settings.approval_timeout > bound:
            logger.warning(
                "kindling: approval_timeout %gs is past Hermes's hook limit (%gs); waiting %gs instead.",
                settings.approval_timeout,
                hook_limit,
                bound,
            )
            settings = PluginSettings(**{**settings.__dict__, "approval_timeout": bound})
    return settings


class SessionWarmer:
    """The ``llm_request`` middleware: one warm-up per session, the same bytes on every call."""

    def __init__(self, settings: PluginSettings, *, max_sessions: int = 512) -> None:
        self.settings = settings
        self.max_sessions = max_sessions
        self._cache: OrderedDict[str, str] = OrderedDict()  # session id -> warm messages as JSON text
        self._skipped: set[str] = set()  # reasons already logged once
        self._lock = threading.Lock()

    def _skip_once(self, what: str) -> None:
        with self._lock:
            if what in self._skipped:
                return
            self._skipped.add(what)
        logger.warning("kindling: no warm-up for %s.", what)

    def forget(self, session_id: str = "", **_: Any) -> None:
        """Drop a session's cached warm-up (Hermes reset or finalized the session)."""
        with self._lock:
            self._cache.pop(session_id, None)

    def __call__(self, request: Any = None, session_id: str = "", api_mode: str = "", **_: Any) -> Any:
        """Hermes calls this before every API call; return ``{"request": ...}`` or None to leave it."""
        anthropic = api_mode == ANTHROPIC_API_MODE
        if not anthropic and (api_mode or "") not in CHAT_API_MODES:
            self._skip_once(
                f"Hermes's {api_mode!r} API mode (chat completions and Anthropic messages are warmed)"
            )
            return None
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return None
        if not session_id:
            # Without a session there is nothing to keep the warm-up identical across calls.
            self._skip_once("requests without a session id")
            return None
        # A session whose provider falls back to another mode is warmed again in that one's shape.
        key = f"{session_id}\x00{api_mode if anthropic else 'chat'}"
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
        if cached is None:
            cached = self._compute(request, anthropic=anthropic)
            with self._lock:
                cached = self._cache.setdefault(key, cached)  # a racing first call keeps the first answer
                while len(self._cache) > self.max_sessions:
                    self._cache.popitem(last=False)
        if cached == "[]":
            return None
        messages = request["messages"]
        warmed = dict(request)
        if anthropic:
            from kindling.warmup.convert import with_system_text

            warm = json.loads(cached)
            warmed["messages"] = warm["messages"] + messages
            if warm["system"]:
                warmed["system"] = with_system_text(request.get("system"), warm["system"])
            return {"request": warmed}
        head = _leading_system_count(messages)
        warmed["messages"] = messages[:head] + json.loads(cached) + messages[head:]
        return {"request": warmed}

    def _compute(self, request: dict[str, Any], *, anthropic: bool = False) -> str:
        """Return the warm messages for this request as JSON text ("[]" when there are none):
        chat messages, or for Anthropic ``{"system": ..., "messages": [...]}`` ending with an
        assistant turn, so the request's first (user) turn follows in alternation."""
        from kindling.warmup.convert import anthropic_prefix
        from kindling.warmup.warm import find_task

        task = find_task(request["messages"])
        tools = _tool_names(request.get("tools"))
        if anthropic and not tools:
            # The Messages API refuses tool_use blocks in a request that defines no tools.
            return "[]"
        try:
            messages = self.warm_messages(task, tools)
            if anthropic and messages:
                converted = anthropic_prefix(messages)
                if converted is None:
                    return "[]"
                return json.dumps(converted, ensure_ascii=False, separators=(",", ":"))
        except KindlingError as exc:
            logger.warning("kindling: no warm-up for this session: %s", exc)
            return "[]"
        except Exception as exc:  # the turn must go on: one line, never a crash in Hermes's loop
            logger.warning(
                "kindling: warm-up failed (%s: %s); the session goes on unwarmed.", type(exc).__name__, exc
            )
            return "[]"
        return json.dumps(messages, ensure_ascii=False, separators=(",", ":"))

    def warm_messages(self, task: str, tools: set[str] | None) -> list[dict[str, Any]]:
        """Return the warm messages for ``task``, showing only calls of ``tools`` (None: any tool).

        Through ``warm()``, as every other way in: without a template named in the settings, the
        best of the default tenant's own and shared templates. Empty when no example fits.
        Raises NotFoundError when the named template is missing, KindlingError for other problems.
        """
        from kindling.templates.store import DEFAULT_TENANT, TenantTemplates, open_store
        from kindling.warmup.warm import warm

        if not task.strip():
            return []
        store = open_store()
        name = self.settings.template if self.settings.template not in ("", "auto") else None
        try:
            result = warm(
                name,
                task,
                store=store if name else TenantTemplates(store, DEFAULT_TENANT),
                budget=self.settings.budget,
                style=self.settings.style,
                record_use=False,
                tools=tools,
            )
        except NotFoundError:
            if name:
                raise
            return []  # no template (with an example of these tools) yet: nothing to warm with
        if not result.tools:
            return []
        store.record_use(result.template.name)
        return result.messages


def _tool_names(tools: Any) -> set[str] | None:
    if not isinstance(tools, list):
        return None
    names: set[str] = set()
    for tool in tools:
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
            if isinstance(name, str):
                names.add(name)
    return names


def _leading_system_count(messages: list[Any]) -> int:
    count = 0
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "developer"):
            break
        count += 1
    return count


class ApprovalHook:
    """The ``pre_tool_call`` hook around an :class:`ApprovalGate`."""

    def __init__(self, gate: ApprovalGate, *, max_sessions: int = 512) -> None:
        self.gate = gate
        self.max_sessions = max_sessions
        self._platforms: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def session_started(self, session_id: str = "", platform: str = "", **_: Any) -> None:
        """``on_session_start``: remember the session's platform (cli, telegram, ...) for requests."""
        if not session_id or not platform:
            return
        with self._lock:
            self._platforms[session_id] = platform
            while len(self._platforms) > self.max_sessions:
                self._platforms.popitem(last=False)

    def platform_of(self, session_id: str) -> str:
        """Return the platform Hermes reported at the session's start, else its session variable."""
        with self._lock:
            known = self._platforms.get(session_id)
        return known or os.environ.get("HERMES_SESSION_PLATFORM", "")

    def __call__(
        self, tool_name: str = "", args: Any = None, session_id: str = "", **_: Any
    ) -> dict[str, str] | None:
        """Return None to let the call run, or Hermes's block directive."""
        arguments = args if isinstance(args, dict) else {}
        platform = self.platform_of(session_id)
        verdict = self.gate.check(tool_name, arguments, session_id=session_id, platform=platform)
        if verdict.status not in ("not_gated", "approved", "auto_approved"):
            logger.warning("kindling: %s call %s (%s).", tool_name, verdict.status, verdict.request_id or "-")
        return verdict.as_hook_result()

    def present(self, *args: Any, **kwargs: Any) -> str:
        """An approval transport for newer Hermes: answer its own approval prompt through the daemon.

        Returns Hermes's choice words: ``once`` when a human approved, ``deny`` otherwise.
        """
        command = kwargs.get("command") or (args[0] if args and isinstance(args[0], str) else "")
        session = str(kwargs.get("session_key") or kwargs.get("session_id") or "")
        description = str(kwargs.get("description") or "dangerous command")
        verdict = self.gate._ask(
            "terminal",
            f"Hermes asks to run `{command}` ({description}).",
            {"tool": "terminal", "command": command, "session_id": session, "why": description},
            session,
        )
        return "once" if verdict.allowed else "deny"


def _tool_handler(handler: Any, settings: PluginSettings) -> Any:
    def handle(args: Any = None, **_: Any) -> str:
        return str(handler(args if isinstance(args, dict) else {}, settings))

    return handle


def _warm_session(args: dict[str, Any], settings: PluginSettings) -> str:
    from kindling.integrations.warm_tool import warm_session

    return warm_session(args)


def _request_confirmation(args: dict[str, Any], settings: PluginSettings) -> str:
    from kindling.integrations.confirm_tool import request_confirmation

    return request_confirmation(args, url=settings.confirm_url, token=settings.confirm_token)


def register(ctx: Any) -> None:
    """Hermes's entry point: register the parts the settings turn on.

    A broken configuration is logged in one line and nothing is registered, so Hermes still starts.
    """
    try:
        settings = load_settings(ctx)
    except KindlingError as exc:
        logger.warning("kindling: plugin not loaded: %s", exc)
        return
    if settings.warm:
        warmer = SessionWarmer(settings)
        ctx.register_middleware("llm_request", warmer)
        ctx.register_hook("on_session_reset", warmer.forget)
        ctx.register_hook("on_session_finalize", warmer.forget)
    if settings.tools:
        from kindling.integrations.tools import REQUEST_CONFIRMATION_SCHEMA, WARM_SESSION_SCHEMA

        for schema, handler in (
            (WARM_SESSION_SCHEMA, _warm_session),
            (REQUEST_CONFIRMATION_SCHEMA, _request_confirmation),
        ):
            ctx.register_tool(schema["name"], TOOLSET, schema, _tool_handler(handler, settings))
    if settings.approvals:
        gate = ApprovalGate(
            settings.confirm_url,
            settings.confirm_token,
            timeout=settings.approval_timeout,
            fail_closed=settings.fail_closed,
            terminal_tools=settings.terminal_tools,
            high_risk_tools=settings.high_risk_tools,
        )
        hook = ApprovalHook(gate)
        ctx.register_hook("on_session_start", hook.session_started)
        ctx.register_hook("pre_tool_call", hook)
        register_transport = getattr(ctx, "register_approval_transport", None)
        if callable(register_transport):
            try:
                register_transport(APPROVAL_TRANSPORT, hook.present)
            except Exception as exc:  # a newer signature than this plugin knows: the hook still guards
                logger.warning("kindling: could not register the approval transport: %s", exc)


def install(config: str | None = None) -> dict[str, Any]:
    """Enable the plugin in Hermes's config.yaml; return ``{"config", "changed"}``.

    Keeps the rest of the file (comments, order). Raises ConfigError when the file has a shape
    that cannot be edited safely.
    """
    from kindling.hermes_config import config_path, enable_plugin

    path = config or str(config_path())
    return {"config": path, "changed": enable_plugin(path)}


def daemon_status(url: str, token: str, *, timeout: float = 3.0) -> dict[str, Any]:
    """Return whether the confirmation daemon at ``url`` answers, and whether ``token`` is accepted."""
    import httpx

    result: dict[str, Any] = {"url": url, "answers": False, "token": "not set" if not token else "unchecked"}
    try:
        with httpx.Client(base_url=url.rstrip("/"), timeout=timeout) as http:
            health = http.get("/health")
            result["answers"] = health.status_code == 200
            result["health"] = (
                health.json()
                if health.headers.get("content-type", "").startswith("application/json")
                else health.text[:200]
            )
            if token:
                # Listing one's own requests needs a valid token of any role, and changes nothing.
                probe = http.get(
                    "/confirm", params={"limit": 1}, headers={"Authorization": f"Bearer {token}"}
                )
                result["token"] = "accepted" if probe.status_code == 200 else f"refused ({probe.status_code})"
    except (httpx.HTTPError, ValueError) as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    return result


def status(*, check_daemon: bool = True) -> dict[str, Any]:
    """Return what Hermes will load: the entry point, config.yaml's plugin lists, the settings, the
    templates the warm start can use and whether the daemon answers.

    Raises ConfigError when config.yaml or the plugin's settings are broken.
    """
    import importlib.metadata
    import importlib.util

    from kindling.hermes_config import config_path, plugin_state

    state = plugin_state()
    entry_points = [
        ep.value
        for ep in importlib.metadata.entry_points(group="hermes_agent.plugins")
        if ep.name == "kindling"
    ]
    settings = load_settings()
    data: dict[str, Any] = {
        "config": str(config_path()),
        "config_exists": config_path().is_file(),
        "enabled": state.enabled,
        "disabled": state.disabled,
        "active": state.active,
        "entry_point": entry_points[0] if entry_points else None,
        "hermes_importable": importlib.util.find_spec("hermes_cli") is not None,
        "parts": {"warm": settings.warm, "tools": settings.tools, "approvals": settings.approvals},
        "settings": settings.as_dict(),
    }
    if settings.warm:
        from kindling.templates.store import open_store

        store = open_store()
        templates = store.list()
        data["templates"] = {
            "store": str(store.location),
            "count": len(templates),
            "with_examples": sum(1 for t in templates if t.examples),
            "problems": [p.reason for p in store.problems],
        }
    if check_daemon and settings.approvals:
        data["daemon"] = daemon_status(settings.confirm_url, settings.confirm_token)
    return data


def write_prefill(path: str | Path, messages: list[dict[str, Any]]) -> Path:
    """Write ``messages`` as a Hermes prefill file (a JSON array), atomically; return the path.

    For Hermes releases without request middleware: ``prefill_messages_file`` in config.yaml (or
    Hermes's own prefill variable) names it, and Hermes sends it with every session of the process.
    Raises StoreError when the file cannot be written.
    """
    from kindling.fileio import write_atomic

    target = Path(path).expanduser()
    write_atomic(target, json.dumps(messages, ensure_ascii=False, indent=2) + "\n")
    return target

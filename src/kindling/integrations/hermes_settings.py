"""The Hermes plugin's settings: ``plugins.entries.kindling.settings`` in Hermes's config.yaml, else ``KINDLING_*``.

Every setting has one declaration here: its key in config.yaml, its environment variable and its
default. A value in config.yaml wins; the environment fills what config.yaml leaves unset.

=====================  ===================================  =========================================
config key             environment variable                 meaning (default)
=====================  ===================================  =========================================
``warm``               ``KINDLING_HERMES_WARM``             warm each new session (on)
``template``           ``KINDLING_HERMES_TEMPLATE``         template name, or ``auto`` (auto)
``budget``             ``KINDLING_HERMES_BUDGET``           warm-up token budget (2000)
``style``              ``KINDLING_HERMES_STYLE``            ``triples`` or ``closed`` (triples)
``lessons``            ``KINDLING_HERMES_LESSONS``          show the template's lessons after the
                                                            examples (on)
``tools``              ``KINDLING_HERMES_TOOLS``            register the ``kindling`` toolset (on)
``approvals``          ``KINDLING_HERMES_APPROVALS``        ask the daemon before dangerous calls (on)
``confirm_url``        ``KINDLING_CONFIRM_URL``             the daemon (http://127.0.0.1:6000, or
                                                            KINDLING_CONFIRM_HOST/_PORT as the
                                                            daemon and ``confirm pending`` read them)
``confirm_token``      ``KINDLING_CONFIRM_TOKEN``           the agent token for the daemon (none)
``approval_timeout``   ``KINDLING_HERMES_APPROVAL_TIMEOUT`` seconds to wait for a human (300)
``fail_closed``        ``KINDLING_HERMES_FAIL_CLOSED``      block when the daemon cannot be asked (on)
``high_risk_tools``    ``KINDLING_HERMES_HIGH_RISK_TOOLS``  tools that always need a human (none)
``terminal_tools``     ``KINDLING_HERMES_TERMINAL_TOOLS``   tools whose ``command`` is a shell command
                                                            (terminal)
=====================  ===================================  =========================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from kindling.errors import ConfigError

__all__ = ["ENV_NAMES", "PluginSettings"]

ENV_NAMES: dict[str, str] = {
    "warm": "KINDLING_HERMES_WARM",
    "template": "KINDLING_HERMES_TEMPLATE",
    "budget": "KINDLING_HERMES_BUDGET",
    "style": "KINDLING_HERMES_STYLE",
    "lessons": "KINDLING_HERMES_LESSONS",
    "tools": "KINDLING_HERMES_TOOLS",
    "approvals": "KINDLING_HERMES_APPROVALS",
    "confirm_url": "KINDLING_CONFIRM_URL",
    "confirm_token": "KINDLING_CONFIRM_TOKEN",
    "approval_timeout": "KINDLING_HERMES_APPROVAL_TIMEOUT",
    "fail_closed": "KINDLING_HERMES_FAIL_CLOSED",
    "high_risk_tools": "KINDLING_HERMES_HIGH_RISK_TOOLS",
    "terminal_tools": "KINDLING_HERMES_TERMINAL_TOOLS",
}
# The same defaults as kindling.warmup.select.DEFAULT_BUDGET and kindling.confirm.client.DEFAULT_URL
# (a test holds them equal): importing those packages here would add ~0.3 s to every Hermes start.
DEFAULT_BUDGET = 2000
DEFAULT_URL = "http://127.0.0.1:6000"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class PluginSettings:
    """What the plugin does inside Hermes; see the module docstring for each field."""

    warm: bool = True
    template: str = "auto"
    budget: int = DEFAULT_BUDGET
    style: str = "triples"
    lessons: bool = True
    tools: bool = True
    approvals: bool = True
    confirm_url: str = DEFAULT_URL
    confirm_token: str = ""
    approval_timeout: float = 300.0
    fail_closed: bool = True
    high_risk_tools: tuple[str, ...] = ()
    terminal_tools: tuple[str, ...] = ("terminal",)

    @classmethod
    def load(
        cls, config: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> PluginSettings:
        """Return the settings from ``config`` (the plugin's settings mapping), then ``env``.

        Raises ConfigError naming the key (or variable) whose value has the wrong type.
        """
        config = config or {}
        env = os.environ if env is None else env
        unknown = sorted(set(config) - set(ENV_NAMES))
        if unknown:
            raise ConfigError(
                f"Unknown kindling plugin setting(s) {', '.join(unknown)}; known: {', '.join(ENV_NAMES)}."
            )
        values: dict[str, Any] = {}
        for item in fields(cls):
            name = item.name
            default = item.default
            if name in config and config[name] is not None:
                values[name] = _coerce(config[name], default, f"plugins.entries.kindling.settings.{name}")
            elif env.get(ENV_NAMES[name], "").strip():
                values[name] = _coerce(env[ENV_NAMES[name]], default, ENV_NAMES[name])
        if "confirm_url" not in values:
            values["confirm_url"] = _daemon_url(env)
        settings = cls(**values)
        if settings.budget < 0:
            raise ConfigError(f"The warm-up budget must be 0 or more, not {settings.budget}.")
        if settings.approval_timeout <= 0:
            raise ConfigError(
                f"approval_timeout must be more than 0 seconds, not {settings.approval_timeout:g}."
            )
        if settings.style not in ("triples", "closed"):
            raise ConfigError(f"style must be triples or closed, not {settings.style!r}.")
        return settings

    def as_dict(self) -> dict[str, Any]:
        """Return the settings as JSON-ready data, with the token shown only as set or not."""
        data = {item.name: getattr(self, item.name) for item in fields(self)}
        data["confirm_token"] = "(set)" if self.confirm_token else ""
        data["high_risk_tools"] = list(self.high_risk_tools)
        data["terminal_tools"] = list(self.terminal_tools)
        return data


def _daemon_url(env: Mapping[str, str]) -> str:
    """The daemon's address from KINDLING_CONFIRM_HOST and KINDLING_CONFIRM_PORT, the variables the
    daemon listens on and ``kindling confirm pending`` reads (defaults: DEFAULT_URL's)."""
    host = env.get("KINDLING_CONFIRM_HOST", "").strip()
    port = env.get("KINDLING_CONFIRM_PORT", "").strip()
    if not host and not port:
        return DEFAULT_URL
    if port and not (port.isascii() and port.isdigit() and int(port) <= 65535):
        raise ConfigError(f"KINDLING_CONFIRM_PORT={port!r} is not a port number.")
    return f"http://{host or '127.0.0.1'}:{port or 6000}"


def _coerce(value: Any, default: Any, where: str) -> Any:
    """Return ``value`` as the type of ``default``; raise ConfigError naming ``where`` when it is not."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ConfigError(f"{where}={value!r} is not a boolean; use true or false.")
    if isinstance(default, int | float) and not isinstance(default, bool):
        if isinstance(value, bool):
            raise ConfigError(f"{where}={value!r} is not a number.")
        try:
            return type(default)(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}={value!r} is not a number.") from None
    if isinstance(default, tuple):
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{where} must be a list of tool names.")
        return tuple(i.strip() for i in items if i.strip())
    if not isinstance(value, str):
        raise ConfigError(f"{where}={value!r} must be text.")
    return value.strip()

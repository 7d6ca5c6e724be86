"""Settings of the confirmation daemon, read from ``KINDLING_CONFIRM_*`` environment variables.

Every value has a default that works out of the box (SQLite at ``$KINDLING_HOME/confirm.db``,
loopback on port 6000). Tests and embedders build a ``ConfirmSettings`` directly instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kindling.config import env_int, env_str, kindling_home
from kindling.errors import ConfigError

HIGH_RISK_ACTIONS: frozenset[str] = frozenset(
    {
        "deploy_production",
        "delete_data",
        "transfer_funds",
        "modify_permissions",
        "shutdown_service",
        "wipe_database",
        "exec_remote",
        "publish_package",
        "rotate_keys",
        "migrate_database",
    }
)


def default_db() -> Path:
    """Return the default daemon database, ``$KINDLING_HOME/confirm.db``."""
    return kindling_home() / "confirm.db"


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not a number.") from None


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={value!r} is not a yes or a no (1/0, true/false, on/off).")


def _env_list(name: str) -> tuple[str, ...] | None:
    value = os.environ.get(name)
    if value is None:
        return None
    # Commas and whitespace both separate: apprise URLs never contain either unescaped.
    return tuple(part for part in value.replace(",", " ").split() if part)


@dataclass(frozen=True)
class ConfirmSettings:
    """Everything the daemon can be told; ``from_env`` fills it from ``KINDLING_CONFIRM_*``."""

    db: str = ""
    host: str = "127.0.0.1"
    port: int = 6000
    public_url: str = ""
    default_timeout: int = 300
    min_timeout: int = 30
    max_timeout: int = 3600
    rate_limit: int = 10
    rate_window: int = 3600
    # Per token across all actions, so one agent cannot flood the queue with made-up action names.
    token_rate_limit: int = 100
    # Long polls held open at once, per token and in all; past either a wait is refused with 429.
    max_waits_per_token: int = 16
    max_waits: int = 512
    max_body_bytes: int = 1_000_000
    max_wait: int = 60
    high_risk: frozenset[str] = HIGH_RISK_ACTIONS
    notify_urls: tuple[str, ...] = ()
    notify_max_attempts: int = 5
    notify_retry_seconds: float = 5.0
    sweep_interval: float = 1.0
    outbox_interval: float = 1.0
    # How often a long poll re-reads the database, for decisions made by another daemon; decisions
    # made by this one wake it at once.
    poll_interval: float = 1.0
    # How long a request's card must have been on the approvers' page before a click on it counts,
    # so a card that has just appeared (or moved) cannot catch a click meant for another.
    ui_min_view_seconds: float = 1.0
    # Prometheus metrics at /metrics; off, the daemon neither counts nor answers them.
    metrics: bool = True
    # A token good only for reading /metrics (an approver's or admin's token reads them too).
    metrics_token: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def database(self) -> str:
        """The database path or URL in use (the default SQLite file when ``db`` is empty)."""
        return self.db or str(default_db())

    @property
    def base_url(self) -> str:
        """The URL people and agents reach the daemon at, used in approve/deny links."""
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    def clamp_timeout(self, requested: int | float | None) -> int:
        """Return ``requested`` clamped to ``min_timeout..max_timeout`` (``default_timeout`` if None)."""
        if requested is None:
            return self.default_timeout
        return int(max(self.min_timeout, min(self.max_timeout, int(requested))))

    def with_(self, **changes: Any) -> ConfirmSettings:
        """Return a copy with ``changes`` applied."""
        return replace(self, **changes)

    @classmethod
    def from_env(cls, **overrides: Any) -> ConfirmSettings:
        """Build settings from ``KINDLING_CONFIRM_*`` variables; ``overrides`` that are not None win.

        Raises ConfigError when a variable holds a value of the wrong kind.
        """
        high_risk = _env_list("KINDLING_CONFIRM_HIGH_RISK")
        values: dict[str, Any] = {
            "db": env_str("KINDLING_CONFIRM_DB", ""),
            "host": env_str("KINDLING_CONFIRM_HOST", "127.0.0.1"),
            "port": env_int("KINDLING_CONFIRM_PORT", 6000),
            "public_url": env_str("KINDLING_CONFIRM_PUBLIC_URL", ""),
            "default_timeout": env_int("KINDLING_CONFIRM_DEFAULT_TIMEOUT", 300),
            "min_timeout": env_int("KINDLING_CONFIRM_MIN_TIMEOUT", 30),
            "max_timeout": env_int("KINDLING_CONFIRM_MAX_TIMEOUT", 3600),
            "rate_limit": env_int("KINDLING_CONFIRM_RATE_LIMIT", 10),
            "rate_window": env_int("KINDLING_CONFIRM_RATE_WINDOW", 3600),
            "token_rate_limit": env_int("KINDLING_CONFIRM_TOKEN_RATE_LIMIT", 100),
            "max_waits_per_token": env_int("KINDLING_CONFIRM_MAX_WAITS_PER_TOKEN", 16),
            "max_waits": env_int("KINDLING_CONFIRM_MAX_WAITS", 512),
            "notify_urls": _env_list("KINDLING_CONFIRM_NOTIFY_URLS") or (),
            "notify_max_attempts": env_int("KINDLING_CONFIRM_NOTIFY_MAX_ATTEMPTS", 5),
            "notify_retry_seconds": _env_float("KINDLING_CONFIRM_NOTIFY_RETRY_SECONDS", 5.0),
            "sweep_interval": _env_float("KINDLING_CONFIRM_SWEEP_INTERVAL", 1.0),
            "outbox_interval": _env_float("KINDLING_CONFIRM_OUTBOX_INTERVAL", 1.0),
            "metrics": _env_bool("KINDLING_CONFIRM_METRICS", True),
            "metrics_token": env_str("KINDLING_CONFIRM_METRICS_TOKEN", ""),
        }
        if high_risk is not None:
            values["high_risk"] = frozenset(high_risk)
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        """Raise ConfigError when the numbers cannot work together."""
        if not 1 <= self.min_timeout <= self.default_timeout <= self.max_timeout:
            raise ConfigError(
                "Confirmation timeouts must satisfy 1 <= min <= default <= max "
                f"(got {self.min_timeout}, {self.default_timeout}, {self.max_timeout})."
            )
        if self.rate_limit < 1 or self.rate_window < 1 or self.token_rate_limit < 1:
            raise ConfigError(
                "KINDLING_CONFIRM_RATE_LIMIT, _TOKEN_RATE_LIMIT and _RATE_WINDOW must be at least 1."
            )
        if self.max_waits_per_token < 1 or self.max_waits < 1:
            raise ConfigError("KINDLING_CONFIRM_MAX_WAITS and _MAX_WAITS_PER_TOKEN must be at least 1.")
        if self.metrics_token and len(self.metrics_token) < 16:
            raise ConfigError("KINDLING_CONFIRM_METRICS_TOKEN must be at least 16 characters long.")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"Port {self.port} is out of range.")

"""Where kindling keeps its state, and the settings that move it.

Every environment variable kindling reads starts with ``KINDLING_``, except ``HERMES_HOME``,
which is Hermes Agent's own and is honoured so kindling finds the same files Hermes uses.
Values are read on every call, so a change to the environment takes effect at once.
"""

from __future__ import annotations

import os
from pathlib import Path

from kindling.errors import ConfigError

DEFAULT_KINDLING_HOME = "~/.kindling"
DEFAULT_HERMES_HOME = "~/.hermes"
# kindling mcp's defaults, here so the CLI can show them without importing the MCP SDK (~0.2 s).
MCP_TOKEN_ENV = "KINDLING_MCP_TOKEN"
MCP_DEFAULT_PORT = 8765


def kindling_home() -> Path:
    """Return kindling's own state directory: ``$KINDLING_HOME`` or ``~/.kindling``."""
    return Path(os.environ.get("KINDLING_HOME") or DEFAULT_KINDLING_HOME).expanduser()


def hermes_home() -> Path:
    """Return Hermes Agent's home: ``$KINDLING_HERMES_HOME``, ``$HERMES_HOME`` or ``~/.hermes``."""
    value = os.environ.get("KINDLING_HERMES_HOME") or os.environ.get("HERMES_HOME") or DEFAULT_HERMES_HOME
    return Path(value).expanduser()


def hermes_state_db() -> Path:
    """Return the path of Hermes Agent's session database, ``$HERMES_HOME/state.db``."""
    return hermes_home() / "state.db"


def templates_dir() -> Path:
    """Return the default template directory, ``$KINDLING_HOME/templates``."""
    return kindling_home() / "templates"


def raise_errors() -> bool:
    """True when ``KINDLING_RAISE_ERRORS`` asks the CLI to re-raise instead of printing one line."""
    return env_flag("KINDLING_RAISE_ERRORS")


def env_flag(name: str, default: bool = False) -> bool:
    """Read a boolean environment variable (1/true/yes/on or 0/false/no/off)."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name}={value!r} is not a boolean; use 1 or 0.")


def env_int(name: str, default: int) -> int:
    """Read an integer environment variable, with a clear error when it is not a number."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not a whole number.") from None


def env_str(name: str, default: str) -> str:
    """Read a string environment variable, falling back to ``default`` when unset or empty."""
    value = os.environ.get(name)
    return value if value else default

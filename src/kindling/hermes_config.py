"""Hermes Agent's ``$HERMES_HOME/config.yaml``: the settings kindling honours, and enabling the plugin.

Reading is plain and read-only (a missing file means Hermes's defaults). Writing, done only by
``kindling hermes install``, goes through ruamel.yaml's round-trip mode so the person's comments,
key order and quoting survive, and the file is replaced atomically.

The settings read here, with Hermes's defaults:

- ``memory.memory_char_limit`` (2200) and ``memory.user_char_limit`` (1375): the size limits of
  ``MEMORY.md`` and ``USER.md``;
- ``memory.write_approval`` and ``skills.write_approval`` (false): when true, writes are staged under
  ``$HERMES_HOME/pending/<memory|skills>/`` for the person to approve in Hermes;
- ``plugins.enabled`` / ``plugins.disabled`` and ``plugins.entries.kindling.settings`` (the plugin's).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kindling.config import hermes_home
from kindling.errors import ConfigError
from kindling.fileio import write_atomic

__all__ = [
    "PLUGIN_NAME",
    "MemorySettings",
    "PluginState",
    "config_path",
    "enable_plugin",
    "load_hermes_config",
    "memory_settings",
    "plugin_settings",
    "plugin_state",
    "write_approval",
]

PLUGIN_NAME = "kindling"
MEMORY_CHAR_LIMIT = 2200
USER_CHAR_LIMIT = 1375
_TRUE_WORDS = frozenset({"on", "true", "yes", "1", "approve", "enabled"})


def config_path() -> Path:
    """Return Hermes's configuration file, ``$HERMES_HOME/config.yaml``."""
    return hermes_home() / "config.yaml"


def load_hermes_config(path: str | Path | None = None) -> dict[str, Any]:
    """Return config.yaml as a mapping (empty when the file does not exist).

    Raises ConfigError when the file cannot be read, is not YAML, or is not a mapping.
    """
    target = Path(path) if path is not None else config_path()
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read {target}: {exc}.") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{target} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{target} must hold a YAML mapping (key: value lines) at the top.")
    return data


def _section(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = config.get(key)
    return value if isinstance(value, Mapping) else {}


def _flag(value: Any) -> bool:
    # Hermes reads these gates leniently: real booleans, or the usual words; anything else is off.
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_WORDS
    return False


def _limit(section: Mapping[str, Any], key: str, default: int) -> int:
    value = section.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"memory.{key} in {config_path()} must be a whole number, not {value!r}.")
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"memory.{key} in {config_path()} must be a whole number, not {value!r}.") from None
    if number < 0:
        raise ConfigError(f"memory.{key} in {config_path()} must be 0 or more, not {number}.")
    return number


@dataclass(frozen=True)
class MemorySettings:
    """The memory limits and write gate Hermes applies to ``MEMORY.md`` and ``USER.md``."""

    memory_char_limit: int = MEMORY_CHAR_LIMIT
    user_char_limit: int = USER_CHAR_LIMIT
    write_approval: bool = False


def memory_settings(config: Mapping[str, Any] | None = None) -> MemorySettings:
    """Return the ``memory`` settings of config.yaml (Hermes's defaults where unset).

    Raises ConfigError when the file is broken or a limit is not a whole number.
    """
    section = _section(load_hermes_config() if config is None else config, "memory")
    return MemorySettings(
        memory_char_limit=_limit(section, "memory_char_limit", MEMORY_CHAR_LIMIT),
        user_char_limit=_limit(section, "user_char_limit", USER_CHAR_LIMIT),
        write_approval=_flag(section.get("write_approval")),
    )


def write_approval(subsystem: str, config: Mapping[str, Any] | None = None) -> bool:
    """Return whether ``<subsystem>.write_approval`` (``memory`` or ``skills``) is on."""
    return _flag(
        _section(load_hermes_config() if config is None else config, subsystem).get("write_approval")
    )


def plugin_settings(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Return ``plugins.entries.kindling.settings`` (empty when unset)."""
    plugins = _section(load_hermes_config() if config is None else config, "plugins")
    entry = _section(_section(plugins, "entries"), PLUGIN_NAME)
    settings = entry.get("settings")
    return dict(settings) if isinstance(settings, Mapping) else {}


@dataclass(frozen=True)
class PluginState:
    """Whether config.yaml enables (and does not disable) the kindling plugin."""

    enabled: bool
    disabled: bool
    enabled_plugins: tuple[str, ...]

    @property
    def active(self) -> bool:
        """True when Hermes will load the plugin (enabled and not on the deny-list)."""
        return self.enabled and not self.disabled


def plugin_state(config: Mapping[str, Any] | None = None) -> PluginState:
    """Return whether the kindling plugin is enabled in config.yaml."""
    plugins = _section(load_hermes_config() if config is None else config, "plugins")
    enabled = plugins.get("enabled")
    disabled = plugins.get("disabled")
    names = tuple(str(n) for n in enabled) if isinstance(enabled, list) else ()
    return PluginState(
        enabled=PLUGIN_NAME in names,
        disabled=isinstance(disabled, list) and PLUGIN_NAME in disabled,
        enabled_plugins=names,
    )


def enable_plugin(path: str | Path | None = None) -> bool:
    """Add ``kindling`` to ``plugins.enabled`` (and drop it from ``plugins.disabled``).

    Everything else in the file, comments and order included, is kept; a missing file is created.
    The file is replaced atomically (no lock file is left beside Hermes's config).
    Returns True when the file changed. Raises ConfigError when the file is not a YAML mapping or
    ``plugins``/``plugins.enabled`` has a shape Hermes would not read.
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.error import YAMLError

    target = Path(path) if path is not None else config_path()
    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    try:
        text = target.read_text(encoding="utf-8") if target.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read {target}: {exc}.") from None
    try:
        document = rt.load(text) if text.strip() else None
    except YAMLError as exc:
        raise ConfigError(f"{target} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if document is None:
        document = CommentedMap()
    if not isinstance(document, dict):
        raise ConfigError(f"{target} must hold a YAML mapping at the top; not changing it.")
    plugins = document.get("plugins")
    if plugins is None:
        plugins = document["plugins"] = CommentedMap()
    if not isinstance(plugins, dict):
        raise ConfigError(f"'plugins' in {target} is not a mapping; not changing it.")
    enabled = plugins.get("enabled")
    if enabled is None:
        enabled = plugins["enabled"] = CommentedSeq()
    if not isinstance(enabled, list):
        raise ConfigError(f"'plugins.enabled' in {target} is not a list; not changing it.")
    changed = False
    if PLUGIN_NAME not in enabled:
        enabled.append(PLUGIN_NAME)
        changed = True
    disabled = plugins.get("disabled")
    if isinstance(disabled, list) and PLUGIN_NAME in disabled:
        while PLUGIN_NAME in disabled:
            disabled.remove(PLUGIN_NAME)
        changed = True
    if not changed:
        return False
    buffer = io.StringIO()
    rt.dump(document, buffer)
    write_atomic(
        target, buffer.getvalue(), mode=0o600 if not target.exists() else target.stat().st_mode & 0o777
    )
    return True

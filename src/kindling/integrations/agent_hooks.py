"""Hooks for Claude Code and Codex CLI: warm each new session, ask a human before dangerous Bash.

Both agents run a command on lifecycle events, hand it the event as JSON on stdin and read a JSON
answer on stdout (Claude Code: the hooks reference, docs.claude.com/en/docs/claude-code/hooks;
Codex: developers.openai.com/codex/hooks, behind ``[features] codex_hooks = true``). kindling
answers two of them:

- ``SessionStart`` (``{"session_id", "transcript_path", "cwd", "hook_event_name", "source"}``):
  ``{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": <warm-up>}}``,
  the past examples of the best template as text the agent reads before the first turn;
- ``PreToolUse`` for ``Bash`` (``{..., "tool_name": "Bash", "tool_input": {"command", ...}}``): a
  command ``detect_dangerous`` flags is submitted to the confirmation daemon (through
  ``ApprovalGate``) and waited on; a denial, a timeout or a daemon that cannot be asked answers
  ``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
  "permissionDecisionReason": ...}}`` (fail closed), an approval ``"allow"``. Any other call gets
  ``{}``: the agent's own permission rules decide.

Settings come from the environment: ``KINDLING_CONFIRM_URL``, ``KINDLING_CONFIRM_TOKEN`` (an agent
token), ``KINDLING_HOOK_APPROVAL_TIMEOUT`` (seconds to wait, default 120), ``KINDLING_HOOK_TEMPLATE``
(a template name, default the best one) and ``KINDLING_HOOK_BUDGET`` (warm-up tokens, default 1500).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from kindling.errors import ConfigError, KindlingError

__all__ = [
    "AGENTS",
    "EVENTS",
    "hook_settings_path",
    "hooks_config",
    "install_hooks",
    "pre_tool_use",
    "run_hook",
    "session_start",
]

CLAUDE_CODE = "claude-code"
CODEX = "codex"
#: The agents kindling installs hooks into.
AGENTS = (CLAUDE_CODE, CODEX)
#: The events kindling answers, by the name ``kindling hooks run`` takes.
EVENTS = {"session-start": "SessionStart", "pre-tool-use": "PreToolUse"}
# A session begins (startup) or starts over (clear); a resumed one already has its context.
_SESSION_MATCHER = "startup|clear"
_SHELL_TOOL = "Bash"
DEFAULT_APPROVAL_TIMEOUT = 120.0
DEFAULT_HOOK_BUDGET = 1500
_RESULT_CHARS = 300
_MARK = "-m kindling hooks run"


def session_start(payload: dict[str, Any]) -> dict[str, Any]:
    """Return the SessionStart answer: the warm-up as ``additionalContext``, or ``{}`` when there is none.

    Never raises: a missing template or store problem leaves the session unwarmed.
    """
    from kindling.templates.store import open_store
    from kindling.warmup.warm import warm

    template = os.environ.get("KINDLING_HOOK_TEMPLATE") or None
    budget = _env_number("KINDLING_HOOK_BUDGET", DEFAULT_HOOK_BUDGET)
    try:
        result = warm(
            None if template in (None, "auto") else template, "", store=open_store(), budget=int(budget)
        )
    except KindlingError:
        return {}
    text = warm_text(result.messages, result.template.name, result.template.version)
    if not text:
        return {}
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}


def warm_text(messages: list[dict[str, Any]], name: str, version: int) -> str:
    """Return warm-up messages as text an agent reads as context: requests, calls and what came back."""
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "user" and message.get("content"):
            lines.append(str(message["content"]))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines.append(f"  → {function.get('name')}({function.get('arguments')})")
        if role == "tool":
            content = str(message.get("content") or "")
            shown = content if len(content) <= _RESULT_CHARS else content[:_RESULT_CHARS] + "…"
            lines.append(f"  ← {shown}")
    if not lines:
        return ""
    header = f"kindling: examples of tool calls that worked in earlier sessions (template {name} v{version})."
    return "\n".join([header, *lines])


def pre_tool_use(payload: dict[str, Any], agent: str) -> dict[str, Any]:
    """Return the PreToolUse answer for one call: ``{}`` (no opinion), allow, or deny (fail closed).

    A dangerous Bash command waits for a human through the confirmation daemon. Never raises.
    """
    from kindling.integrations.hermes_approval import ApprovalGate

    tool = payload.get("tool_name")
    arguments = payload.get("tool_input")
    if tool != _SHELL_TOOL or not isinstance(arguments, dict):
        return {}
    gate = ApprovalGate(
        os.environ.get("KINDLING_CONFIRM_URL") or "http://127.0.0.1:6000",
        os.environ.get("KINDLING_CONFIRM_TOKEN") or "",
        timeout=_env_number("KINDLING_HOOK_APPROVAL_TIMEOUT", DEFAULT_APPROVAL_TIMEOUT),
        fail_closed=True,
        terminal_tools=(_SHELL_TOOL,),
        agent=agent,
    )
    cwd = payload.get("cwd")
    details = (
        {**arguments, "workdir": cwd} if isinstance(cwd, str) and "workdir" not in arguments else arguments
    )
    verdict = gate.check(
        _SHELL_TOOL, details, session_id=str(payload.get("session_id") or ""), platform=agent
    )
    if verdict.status == "not_gated":
        return {}
    return _decision(
        "allow" if verdict.allowed else "deny", verdict.message or f"approved ({verdict.status})"
    )


def _decision(decision: str, reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


def run_hook(event: str, agent: str, stdin: str) -> tuple[dict[str, Any], int]:
    """Answer one hook call: return ``(answer, exit code)`` for the event's JSON on ``stdin``.

    Input that is not a JSON object is refused: for PreToolUse with a deny and exit code 2 (which
    both agents read as "block"), so a broken call never lets a command through.
    Raises ConfigError for an unknown event or agent.
    """
    if event not in EVENTS:
        raise ConfigError(f"Unknown hook event {event!r}; choose one of: {', '.join(EVENTS)}.")
    if agent not in AGENTS:
        raise ConfigError(f"Unknown agent {agent!r}; choose one of: {', '.join(AGENTS)}.")
    try:
        payload = json.loads(stdin)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        if event == "pre-tool-use":
            return _decision("deny", "BLOCKED by kindling: the hook input was not a JSON object."), 2
        return {}, 0
    if event == "session-start":
        return session_start(payload), 0
    try:
        return pre_tool_use(payload, agent), 0
    except Exception as exc:  # fail closed: whatever went wrong, the command does not run
        return _decision("deny", f"BLOCKED by kindling: the approval check failed ({exc})."), 2


def _env_number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name) or default)
    except ValueError:
        return default


# ---------------------------------------------------------------------------------- install


def hook_settings_path(agent: str) -> Path:
    """Where ``agent`` reads its user-level hooks: ``~/.claude/settings.json`` or ``~/.codex/hooks.json``.

    ``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME`` move them. Raises ConfigError for an unknown agent.
    """
    if agent == CLAUDE_CODE:
        return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "settings.json"
    if agent == CODEX:
        return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "hooks.json"
    raise ConfigError(f"Unknown agent {agent!r}; choose one of: {', '.join(AGENTS)}.")


def hooks_config(agent: str, *, command: str | None = None) -> dict[str, Any]:
    """Return the ``hooks`` object kindling adds for ``agent`` (the same shape in both agents' files).

    ``command`` is how the agent starts kindling (default: this Python, ``-m kindling``).
    """
    base = command or f"{shlex.quote(sys.executable)} -m kindling"
    timeout = int(_env_number("KINDLING_HOOK_APPROVAL_TIMEOUT", DEFAULT_APPROVAL_TIMEOUT)) + 30
    return {
        "SessionStart": [
            {
                "matcher": _SESSION_MATCHER,
                "hooks": [
                    {
                        "type": "command",
                        "command": f"{base} hooks run session-start --agent {agent}",
                        "timeout": 30,
                    }
                ],
            }
        ],
        "PreToolUse": [
            {
                "matcher": _SHELL_TOOL,
                # Longer than the wait for a human: an agent that kills a hook on timeout runs the call.
                "hooks": [
                    {
                        "type": "command",
                        "command": f"{base} hooks run pre-tool-use --agent {agent}",
                        "timeout": timeout,
                    }
                ],
            }
        ],
    }


def install_hooks(
    agent: str, path: str | Path | None = None, *, command: str | None = None
) -> dict[str, Any]:
    """Add kindling's hooks to ``agent``'s settings file (written atomically; other settings kept).

    Installing again replaces kindling's own entries, so it is safe to repeat. Returns
    ``{"agent", "path", "changed", "notes"}``. Raises ConfigError when the file is not a JSON object.
    """
    from kindling.fileio import file_lock, write_atomic

    target = Path(path).expanduser() if path is not None else hook_settings_path(agent)
    wanted = hooks_config(agent, command=command)
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.with_name(target.name + ".lock")):
        current: dict[str, Any] = {}
        if target.exists():
            try:
                loaded = json.loads(target.read_text(encoding="utf-8") or "{}")
            except ValueError as exc:
                raise ConfigError(f"Cannot add hooks to {target}: it is not valid JSON ({exc}).") from None
            if not isinstance(loaded, dict):
                raise ConfigError(f"Cannot add hooks to {target}: it is not a JSON object.")
            current = loaded
        found = current.get("hooks")
        merged: dict[str, Any] = dict(found) if isinstance(found, dict) else {}
        for event, groups in wanted.items():
            kept = [group for group in merged.get(event) or [] if not _is_ours(group)]
            merged[event] = kept + groups
        updated = {**current, "hooks": merged}
        changed = updated != current
        if changed:
            write_atomic(target, json.dumps(updated, indent=2) + "\n")
    return {"agent": agent, "path": str(target), "changed": changed, "notes": _notes(agent, target)}


def _is_ours(group: Any) -> bool:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(hooks, list) and any(
        isinstance(hook, dict) and _MARK in str(hook.get("command", "")) for hook in hooks
    )


def _notes(agent: str, target: Path) -> list[str]:
    notes: list[str] = []
    if agent == CODEX:
        config = target.with_name("config.toml")
        text = config.read_text(encoding="utf-8") if config.exists() else ""
        if "codex_hooks = true" not in text.replace("codex_hooks=true", "codex_hooks = true"):
            notes.append(f"Codex runs hooks only with [features] codex_hooks = true in {config}.")
    if not os.environ.get("KINDLING_CONFIRM_TOKEN"):
        notes.append(
            "Set KINDLING_CONFIRM_TOKEN (an agent token: kindling confirm token create --role agent --name NAME) "
            "where the agent runs; until then every dangerous Bash command is blocked."
        )
    return notes

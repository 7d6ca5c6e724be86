"""Claude Code / Codex hooks: the documented input and output shapes, a real daemon on loopback.

The hook input below is the shape the agents' hooks references document (Claude Code:
docs.claude.com/en/docs/claude-code/hooks; Codex: developers.openai.com/codex/hooks): common fields
``session_id``, ``transcript_path``, ``cwd``, ``permission_mode``, ``hook_event_name``; SessionStart
adds ``source``, PreToolUse ``tool_name``, ``tool_input`` and ``tool_use_id``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kindling.cli.main import app
from kindling.confirm.client import ConfirmClient
from kindling.confirm.store import ConfirmationStore
from test_confirm_support import Tokens, daemon_settings, make_tokens, running

FIXTURES = Path(__file__).parent / "fixtures"
runner = CliRunner()


def _event(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": "abc123",
        "transcript_path": "/home/me/.claude/projects/-home-me-app/abc123.jsonl",
        "cwd": "/home/me/app",
        "permission_mode": "default",
        "hook_event_name": name,
        **extra,
    }


def _bash(command: str) -> dict[str, Any]:
    return _event(
        "PreToolUse",
        tool_name="Bash",
        tool_input={"command": command, "description": "run it", "timeout": 120000},
        tool_use_id="toolu_01ABC123",
    )


def _run(event: str, payload: Any, env: dict[str, str] | None = None, agent: str = "claude-code") -> Any:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return runner.invoke(app, ["hooks", "run", event, "--agent", agent], input=text, env=env)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Tokens]]:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, daemon_settings(db))
    tokens = make_tokens(store)
    with running(store.settings, store) as server:
        yield server.base_url, tokens
    store.close()


def _decide(base: str, token: str, verdict: str) -> threading.Thread:
    def human() -> None:
        with ConfirmClient(base, token) as approver:
            for _ in range(200):
                pending = approver._call("GET", "/confirm", params={"status": "pending"}).json()["requests"]
                if pending:
                    request = pending[0]
                    decide = approver.approve if verdict == "approve" else approver.deny
                    decide(request["id"], reason="checked", digest=request["digest"])
                    return
                time.sleep(0.05)

    thread = threading.Thread(target=human, daemon=True)
    thread.start()
    return thread


# ------------------------------------------------------------------------------- PreToolUse


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_safe_command_gets_no_opinion(agent: str) -> None:
    result = _run("pre-tool-use", _bash("ls -la"), agent=agent)
    assert result.exit_code == 0 and json.loads(result.stdout) == {}
    other = _run(
        "pre-tool-use", {**_bash("x"), "tool_name": "Read", "tool_input": {"file_path": "/etc/hosts"}}
    )
    assert json.loads(other.stdout) == {}


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_a_dangerous_command_waits_for_a_human(daemon: tuple[str, Tokens], verdict: str) -> None:
    base, tokens = daemon
    human = _decide(base, tokens.approver, verdict)
    env = {
        "KINDLING_CONFIRM_URL": base,
        "KINDLING_CONFIRM_TOKEN": tokens.agent,
        "KINDLING_HOOK_APPROVAL_TIMEOUT": "20",
    }
    result = _run("pre-tool-use", _bash("rm -rf build/"), env)
    human.join(10)
    answer = json.loads(result.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "PreToolUse"
    assert answer["permissionDecision"] == ("allow" if verdict == "approve" else "deny")
    if verdict == "deny":
        assert (
            "denied" in answer["permissionDecisionReason"] and "checked" in answer["permissionDecisionReason"]
        )
    with ConfirmClient(base, tokens.approver) as client:
        (request,) = client.list_requests()
    assert request["details"]["command"] == "rm -rf build/" and request["details"]["cwd"] == "/home/me/app"
    assert request["details"]["platform"] == "claude-code" and request["session_key"] == "abc123"
    # Named for the agent that asks, and marked high-risk so no whitelist rule can approve it.
    assert request["action"] == "claude-code.Bash" and request["description"].startswith("Claude Code wants")
    assert request["details"]["risk"] == "high"


def test_nobody_deciding_in_time_denies(daemon: tuple[str, Tokens]) -> None:
    base, tokens = daemon
    env = {
        "KINDLING_CONFIRM_URL": base,
        "KINDLING_CONFIRM_TOKEN": tokens.agent,
        "KINDLING_HOOK_APPROVAL_TIMEOUT": "1",
    }
    answer = json.loads(_run("pre-tool-use", _bash("git push --force origin main"), env).stdout)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "within 1s" in answer["hookSpecificOutput"]["permissionDecisionReason"]


def test_it_fails_closed(tmp_path: Path) -> None:
    # No daemon listening, no token, broken input: the dangerous command never gets through.
    unreachable = {"KINDLING_CONFIRM_URL": "http://127.0.0.1:9", "KINDLING_CONFIRM_TOKEN": "kc_agent_x"}
    answer = json.loads(_run("pre-tool-use", _bash("sudo rm -rf /var/lib"), unreachable).stdout)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    no_token = json.loads(_run("pre-tool-use", _bash("sudo reboot"), {"KINDLING_CONFIRM_TOKEN": ""}).stdout)
    assert no_token["hookSpecificOutput"]["permissionDecision"] == "deny"
    # The agent reads exit code 2 as "block" whatever the output.
    broken = subprocess.run(
        [sys.executable, "-m", "kindling", "hooks", "run", "pre-tool-use"],
        input="not json",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert broken.returncode == 2 and "BLOCKED" in broken.stderr
    assert json.loads(broken.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


# ----------------------------------------------------------------------------- SessionStart


def test_session_start_adds_the_warm_up_as_context(isolated_homes: Path) -> None:
    built = runner.invoke(app, ["build", "claude", str(FIXTURES / "claude-code"), "--min-messages", "2"])
    assert built.exit_code == 0, built.output
    result = _run("session-start", _event("SessionStart", source="startup"))
    assert result.exit_code == 0
    answer = json.loads(result.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "SessionStart"
    context = answer["additionalContext"]
    assert context.startswith("kindling: examples of tool calls") and "template claude v1" in context
    assert "→ " in context and "← " in context


def test_session_start_without_templates_adds_nothing(isolated_homes: Path) -> None:
    result = _run("session-start", _event("SessionStart", source="startup"))
    assert result.exit_code == 0 and json.loads(result.stdout) == {}


# ---------------------------------------------------------------------------------- install


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_install_adds_the_hooks_keeps_the_rest_and_repeats_safely(agent: str, tmp_path: Path) -> None:
    settings = tmp_path / ("settings.json" if agent == "claude-code" else "hooks.json")
    mine = {"matcher": "Write", "hooks": [{"type": "command", "command": "prettier --write"}]}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"PreToolUse": [mine]}}))
    first = runner.invoke(app, ["hooks", "install", agent, "--settings", str(settings), "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["changed"] is True
    data = json.loads(settings.read_text())
    assert data["model"] == "opus"
    assert data["hooks"]["PreToolUse"][0] == mine
    (ours,) = [g for g in data["hooks"]["PreToolUse"] if g["matcher"] == "Bash"]
    command = ours["hooks"][0]["command"]
    assert (
        command.endswith(f"hooks run pre-tool-use --agent {agent}") and ours["hooks"][0]["type"] == "command"
    )
    assert ours["hooks"][0]["timeout"] > 120  # longer than the wait for a human
    assert data["hooks"]["SessionStart"][0]["matcher"] == "startup|clear"
    again = runner.invoke(app, ["hooks", "install", agent, "--settings", str(settings), "--json"])
    assert json.loads(again.output)["changed"] is False
    assert json.loads(settings.read_text()) == data
    # The installed command really answers in the documented shape.
    done = subprocess.run(
        command, shell=True, input=json.dumps(_bash("ls")), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and json.loads(done.stdout) == {}


def test_install_refuses_a_broken_settings_file(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("{not json")
    result = runner.invoke(app, ["hooks", "install", "claude-code", "--settings", str(settings)])
    assert result.exit_code != 0 and "not valid JSON" in result.output
    assert settings.read_text() == "{not json"

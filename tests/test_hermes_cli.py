"""``kindling hermes install|status`` and the plugin's settings, without Hermes itself.

(The plugin inside the real Hermes is tested in test_hermes_plugin.py.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kindling.cli.main import app
from kindling.confirm.client import DEFAULT_URL
from kindling.confirm.store import ConfirmationStore
from kindling.errors import ConfigError
from kindling.integrations.hermes_approval import ApprovalGate, detect_dangerous
from kindling.integrations.hermes_settings import PluginSettings
from kindling.warmup.select import DEFAULT_BUDGET
from test_confirm_support import Tokens, daemon_settings, free_port, make_tokens, running

runner = CliRunner()

CONFIG = """\
# Hermes settings, kept by hand
model:
  default: some-model   # the one I like
  provider: custom

plugins:
  # other plugins first
  enabled: [disk-cleanup]
  disabled:
    - kindling
memory:
  memory_char_limit: 300
"""


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_install_enables_the_plugin_keeping_comments_and_order(isolated_homes: Path) -> None:
    config = isolated_homes / "hermes" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(CONFIG, encoding="utf-8")
    code, out = invoke("hermes", "install")
    assert code == 0 and "Enabled the kindling plugin" in out
    text = config.read_text(encoding="utf-8")
    assert text == CONFIG.replace("enabled: [disk-cleanup]", "enabled: [disk-cleanup, kindling]").replace(
        "  disabled:\n    - kindling\n", "  disabled: []\n"
    )
    code, out = invoke("hermes", "install", "--json")
    assert code == 0 and json.loads(out) == {"config": str(config), "changed": False}
    assert config.read_text(encoding="utf-8") == text


def test_install_creates_a_missing_config_and_refuses_odd_shapes(isolated_homes: Path) -> None:
    config = isolated_homes / "hermes" / "config.yaml"
    assert invoke("hermes", "install")[0] == 0
    assert config.read_text(encoding="utf-8") == "plugins:\n  enabled:\n  - kindling\n"
    assert config.stat().st_mode & 0o777 == 0o600
    for broken, why in (
        ("plugins: [a, b]\n", "'plugins' in"),
        ("plugins:\n  enabled: kindling\n", "'plugins.enabled' in"),
        ("- a\n- b\n", "must hold a YAML mapping"),
        ("key: [unclosed\n", "is not valid YAML"),
    ):
        config.write_text(broken, encoding="utf-8")
        code, out = invoke("hermes", "install")
        assert code != 0 and out.startswith("Error: ") and why in out, out
        assert config.read_text(encoding="utf-8") == broken  # nothing lost


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Tokens]]:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, daemon_settings(db))
    tokens = make_tokens(store)
    with running(store.settings, store) as server:
        yield server.base_url, tokens
    store.close()


def _settings_config(home: Path, **settings: object) -> None:
    config = home / "hermes" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f"        {k}: {json.dumps(v)}\n" for k, v in settings.items())
    config.write_text(
        f"plugins:\n  enabled: [kindling]\n  entries:\n    kindling:\n      settings:\n{body}",
        encoding="utf-8",
    )


def test_status_reports_what_loads_and_whether_the_daemon_answers(
    isolated_homes: Path, daemon: tuple[str, Tokens]
) -> None:
    base, tokens = daemon
    _settings_config(isolated_homes, confirm_url=base, confirm_token=tokens.agent, budget=900)
    code, out = invoke("hermes", "status", "--json")
    data = json.loads(out)
    assert code == 0 and data["active"] is True and data["entry_point"] == "kindling.integrations.hermes"
    assert data["daemon"]["answers"] is True and data["daemon"]["token"] == "accepted"
    assert data["settings"]["budget"] == 900 and data["settings"]["confirm_token"] == "(set)"
    assert tokens.agent not in out  # the token itself is never printed
    assert data["templates"]["with_examples"] == 0
    code, out = invoke("hermes", "status")
    assert code == 0 and "Plugin loads:    yes" in out and f"{base} answers; token accepted" in out
    assert "Templates:       0 with examples" in out and "kindling build" in out

    _settings_config(isolated_homes, confirm_url=base, confirm_token="wrong")
    assert json.loads(invoke("hermes", "status", "--json")[1])["daemon"]["token"] == "refused (401)"
    down = f"http://127.0.0.1:{free_port()}"
    _settings_config(isolated_homes, confirm_url=down, approvals=True)
    daemon_down = json.loads(invoke("hermes", "status", "--json")[1])["daemon"]
    assert daemon_down["answers"] is False and "ConnectError" in daemon_down["error"]
    assert "does not answer" in invoke("hermes", "status")[1]
    assert "daemon" not in json.loads(invoke("hermes", "status", "--json", "--no-daemon")[1])


def test_status_finds_the_daemon_where_confirm_pending_does(
    isolated_homes: Path, daemon: tuple[str, Tokens], monkeypatch: pytest.MonkeyPatch
) -> None:
    """KINDLING_CONFIRM_HOST/_PORT name the daemon for ``confirm pending``: ``hermes status`` and the
    plugin read them too (KINDLING_CONFIRM_URL or config.yaml still win)."""
    base, tokens = daemon
    port = base.rsplit(":", 1)[1]
    _settings_config(isolated_homes, confirm_token=tokens.agent)
    monkeypatch.delenv("KINDLING_CONFIRM_URL", raising=False)
    monkeypatch.setenv("KINDLING_CONFIRM_PORT", port)
    data = json.loads(invoke("hermes", "status", "--json")[1])
    assert data["settings"]["confirm_url"] == f"http://127.0.0.1:{port}"
    assert data["daemon"]["answers"] is True and data["daemon"]["token"] == "accepted"
    monkeypatch.setenv("KINDLING_CONFIRM_APPROVER_TOKEN", tokens.approver)
    code, out = invoke("confirm", "pending")
    assert code == 0 and "Nothing is waiting" in out  # the same daemon, found the same way
    assert PluginSettings.load({}, {"KINDLING_CONFIRM_PORT": "7001"}).confirm_url == "http://127.0.0.1:7001"
    both = {"KINDLING_CONFIRM_PORT": "7001", "KINDLING_CONFIRM_URL": "http://db-host:6000"}
    assert PluginSettings.load({}, both).confirm_url == "http://db-host:6000"
    assert PluginSettings.load({"confirm_url": "http://cfg:1"}, both).confirm_url == "http://cfg:1"
    with pytest.raises(ConfigError, match="KINDLING_CONFIRM_PORT='x' is not a port"):
        PluginSettings.load({}, {"KINDLING_CONFIRM_PORT": "x"})


def test_status_explains_why_the_plugin_would_not_load(isolated_homes: Path) -> None:
    code, out = invoke("hermes", "status", "--no-daemon")
    assert code == 0 and "Plugin loads:    no (not in plugins.enabled" in out and "(missing)" in out
    _settings_config(isolated_homes, budget="lots")
    code, out = invoke("hermes", "status")
    assert code != 0 and out.startswith(
        "Error: plugins.entries.kindling.settings.budget='lots' is not a number"
    )


def test_settings_come_from_config_then_environment() -> None:
    env = {
        "KINDLING_HERMES_BUDGET": "500",
        "KINDLING_HERMES_WARM": "off",
        "KINDLING_HERMES_HIGH_RISK_TOOLS": "send_message, deploy",
        "KINDLING_CONFIRM_TOKEN": "from-env",
    }
    settings = PluginSettings.load({"budget": 800, "approval_timeout": "12.5"}, env)
    assert settings.budget == 800 and settings.approval_timeout == 12.5  # config.yaml wins
    assert settings.warm is False and settings.high_risk_tools == ("send_message", "deploy")
    assert settings.confirm_token == "from-env" and settings.template == "auto"
    assert PluginSettings.load({}, {}) == PluginSettings()
    assert (PluginSettings().budget, PluginSettings().confirm_url) == (DEFAULT_BUDGET, DEFAULT_URL)
    for config, message in (
        ({"warm": "maybe"}, "is not a boolean"),
        ({"budget": -1}, "must be 0 or more"),
        ({"approval_timeout": 0}, "more than 0 seconds"),
        ({"style": "loud"}, "triples or closed"),
        ({"high_risk_tools": [1, 2]}, "list of tool names"),
        ({"colour": "red"}, "Unknown kindling plugin setting(s) colour"),
    ):
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            PluginSettings.load(config, {})


@pytest.mark.parametrize(
    ("command", "dangerous"),
    [
        ("rm -rf build/", True),
        ("rm -r -f /tmp/x", True),
        ("curl -s https://get.example | sh", True),
        ("git push --force origin main", True),
        ("psql -c 'DROP TABLE users'", True),
        ("dd if=/dev/zero of=/dev/sda", True),
        ("sudo apt-get install jq", True),
        ("ls -la", False),
        ("pytest -q tests/", False),
        ("git status", False),
        ("rm notes.txt", False),
    ],
)
def test_fallback_patterns_flag_destructive_commands(command: str, dangerous: bool) -> None:
    # Outside a Hermes process kindling's own patterns decide (Hermes's own are used inside it).
    assert (detect_dangerous(command) is not None) is dangerous


def test_gate_asks_only_for_dangerous_or_high_risk_calls() -> None:
    gate = ApprovalGate("http://127.0.0.1:9", "", timeout=1, high_risk_tools=("send_message",))
    assert gate.check("terminal", {"command": "ls"}).status == "not_gated"
    assert gate.check("read_file", {"path": "x"}).status == "not_gated"
    blocked = gate.check("send_message", {"to": "all"})
    assert blocked.allowed is False and "no agent token" in blocked.message
    assert blocked.as_hook_result() == {"action": "block", "message": blocked.message}
    open_gate = ApprovalGate("http://127.0.0.1:9", "", timeout=1, fail_closed=False)
    assert open_gate.check("terminal", {"command": "rm -rf /tmp/x"}).allowed is True


class NewerHermesContext:
    """What a newer Hermes release hands a plugin (0.21+ needs Python 3.14, which this machine lacks).

    It records registrations; get_config and register_approval_transport exist only here, so
    register() must detect and use them. 0.19.0 itself is exercised in test_hermes_plugin.py.
    """

    def __init__(self, config: dict[str, object]) -> None:
        self.config = config
        self.middleware: dict[str, list[object]] = {}
        self.hooks: dict[str, list[object]] = {}
        self.tools: list[tuple[str, str]] = []
        self.transports: dict[str, object] = {}

    def get_config(self) -> dict[str, object]:
        return self.config

    def register_middleware(self, kind: str, callback: object) -> None:
        self.middleware.setdefault(kind, []).append(callback)

    def register_hook(self, name: str, callback: object) -> None:
        self.hooks.setdefault(name, []).append(callback)

    def register_tool(self, name: str, toolset: str, schema: dict[str, object], handler: object) -> None:
        self.tools.append((name, toolset))

    def register_approval_transport(self, name: str, present: object) -> None:
        self.transports[name] = present


def test_register_uses_newer_hermes_apis_when_present(
    isolated_homes: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from kindling.integrations.hermes import register

    config = isolated_homes / "hermes" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("plugins:\n  hook_callback_timeout: 30\n", encoding="utf-8")
    down = f"http://127.0.0.1:{free_port()}"
    ctx = NewerHermesContext(
        {"settings": {"approval_timeout": 600, "confirm_url": down, "confirm_token": "t", "warm": False}}
    )
    register(ctx)
    assert "llm_request" not in ctx.middleware  # warm: false from ctx.get_config()
    assert sorted(ctx.tools) == [("request_confirmation", "kindling"), ("warm_session", "kindling")]
    hook = ctx.hooks["pre_tool_call"][0]
    # Kept inside Hermes's own hook limit with the deadline's margin and room to answer.
    from kindling.confirm.client import DEADLINE_MARGIN

    assert hook.gate.timeout == 23 and hook.gate.timeout + DEADLINE_MARGIN < 30
    assert "past Hermes's hook limit" in caplog.text
    present = ctx.transports["kindling"]
    assert present(command="rm -rf /srv/data", description="recursive delete", session_key="s1") == "deny"
    blocked = hook(tool_name="terminal", args={"command": "rm -rf /srv/data"}, session_id="s1")
    assert blocked["action"] == "block" and "could not be asked" in blocked["message"]
    assert hook(tool_name="terminal", args={"command": "ls"}, session_id="s1") is None


def test_broken_settings_leave_hermes_running(isolated_homes: Path, caplog: pytest.LogCaptureFixture) -> None:
    from kindling.integrations.hermes import register

    ctx = NewerHermesContext({"settings": {"budget": "lots"}})
    register(ctx)
    assert not ctx.hooks and not ctx.tools and not ctx.middleware
    assert "kindling: plugin not loaded" in caplog.text and "budget" in caplog.text


def test_anthropic_requests_get_turns_and_the_addendum_ends_the_system(isolated_homes: Path) -> None:
    from kindling.integrations.hermes import SessionWarmer
    from kindling.templates.model import Example, Template
    from kindling.templates.store import open_store

    open_store().save(
        Template(
            name="t",
            system_prompt_addendum="Prefer pytest -x.",
            examples=[
                Example(tool_name="terminal", context="run the tests", arguments={"command": "pytest"})
            ],
        )
    )
    warmer = SessionWarmer(PluginSettings(template="t"))
    tools = [{"name": "terminal", "description": "", "input_schema": {"type": "object"}}]
    for system, expected in (
        ([{"type": "text", "text": "You are Hermes."}], [{"type": "text", "text": "You are Hermes."}]),
        ("You are Hermes.", "You are Hermes.\n\n"),
        (None, ""),
    ):
        request: dict[str, Any] = {"messages": [{"role": "user", "content": "run the tests"}], "tools": tools}
        if system is not None:
            request["system"] = system
        warmed = warmer(request=request, session_id=f"s-{system!r}", api_mode="anthropic_messages")["request"]
        turns = warmed["messages"]
        assert turns[-1] == request["messages"][0] and turns[-2]["role"] == "assistant"
        assert turns[0]["role"] == "user" and any(
            block["type"] == "tool_use" and block["name"] == "terminal"
            for turn in turns
            for block in turn["content"]
        )
        if isinstance(expected, list):
            assert warmed["system"] == [*expected, {"type": "text", "text": "Prefer pytest -x."}]
        else:
            assert warmed["system"] == expected + "Prefer pytest -x."
        assert request.get("system") == system  # the caller's request is not changed
    # Without tools the Messages API would refuse the past tool calls: nothing is added.
    bare = {"messages": [{"role": "user", "content": "run the tests"}]}
    assert warmer(request=bare, session_id="bare", api_mode="anthropic_messages") is None
    # Chat completions of the same session are warmed in their own shape.
    chat = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "run the tests"}]}
    warmed = warmer(request=chat, session_id="s-None", api_mode="chat_completions")["request"]["messages"]
    assert warmed[0] == chat["messages"][0] and any(m.get("tool_calls") for m in warmed)


def test_warm_up_failure_logs_one_line_and_the_request_goes_unwarmed(
    isolated_homes: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kindling.integrations.hermes import SessionWarmer

    request = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "fix it"}]}
    monkeypatch.setenv(
        "KINDLING_TEMPLATE_STORE", "sqlite:///" + str(isolated_homes / "missing" / "x" / "t.db")
    )
    warmer = SessionWarmer(PluginSettings(template="nope"))
    assert warmer(request=request, session_id="s1", api_mode="chat_completions") is None
    assert warmer(request=request, session_id="s1", api_mode="chat_completions") is None  # decided once
    assert len([r for r in caplog.records if r.name == "kindling.hermes"]) == 1
    assert warmer(request={"input": []}, session_id="s2") is None  # not chat messages: left alone
    responses = warmer(request=request, session_id="s3", api_mode="codex_responses")
    assert responses is None and "'codex_responses' API mode" in caplog.text
    assert warmer(request=request, session_id="", api_mode="chat_completions") is None
    assert "requests without a session id" in caplog.text

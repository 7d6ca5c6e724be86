"""The kindling plugin inside the real Hermes Agent 0.19.0, end to end.

Each test runs Hermes's own agent loop as a subprocess (``hermes -z PROMPT``, its one-shot,
non-interactive mode) from the venv ``make hermes-env`` builds, with the plugin enabled in
``$HERMES_HOME/config.yaml``, against the fake OpenAI-compatible server on loopback, and where
approvals are involved a real confirmation daemon on loopback with a "human" deciding through its
API while the hook waits. One-shot mode auto-approves Hermes's own dangerous-command prompt, so
the plugin's hook is the only guard: exactly the headless case it exists for.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_openai import FakeOpenAI, text, tool_call
from hermes_env import hermes_env, hermes_venv
from kindling.confirm.client import ConfirmClient
from kindling.confirm.store import ConfirmationStore
from kindling.templates.model import Example, Template
from kindling.templates.store import open_store
from test_confirm_support import Tokens, daemon_settings, free_port, make_tokens, running

MARKER = "kindling-example-result"
TASK = "Run the unit tests for the parser"


def write_config(home: Path, fake: FakeOpenAI, api_mode: str = "", **settings: Any) -> None:
    """Hermes's config.yaml: the fake model server (in ``api_mode`` when given), the plugin
    enabled with ``settings``."""
    home.mkdir(parents=True, exist_ok=True)
    anthropic = api_mode == "anthropic_messages"
    lines = [
        "model:",
        "  default: fake-model",
        "  provider: custom",
        # Anthropic's SDK adds /v1/messages to the base URL itself.
        f"  base_url: {fake.root_url if anthropic else fake.base_url}",
        "  api_key: sk-test",
        *([f"  api_mode: {api_mode}"] if api_mode else []),
        "plugins:",
        "  enabled: [kindling]",
        "  entries:",
        "    kindling:",
        "      settings:",
        *(f"        {key}: {json.dumps(value)}" for key, value in settings.items()),
    ]
    (home / "config.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_hermes(home: Path, kindling_home: Path, prompt: str, toolsets: str, timeout: float = 120) -> str:
    """Run one Hermes turn in one-shot mode; return its final answer (the test fails on a crash)."""
    venv = hermes_venv()
    work = home.parent / "work"
    work.mkdir(exist_ok=True)
    done = subprocess.run(
        [str(venv / "bin" / "hermes"), "-z", prompt, "-t", toolsets],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(work),
        env=hermes_env(home, KINDLING_HOME=str(kindling_home)),
    )
    assert done.returncode == 0, (
        f"hermes -z failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}"
    )
    return done.stdout


def save_template() -> Template:
    """A template with a terminal example (a tool Hermes has) and a web one (a tool it is not given)."""
    template = Template(
        name="hermes-e2e",
        description="parser work",
        examples=[
            Example(
                tool_name="terminal",
                context="Run the unit tests for the parser module",
                arguments={"command": "pytest tests/test_parser.py -q"},
                result=f"12 passed ({MARKER})",
            ),
            Example(
                tool_name="web_search",
                context="Search the web for the parser unit tests",
                arguments={"query": "parser unit tests"},
                result=f"results ({MARKER})",
            ),
        ],
    )
    return open_store().save(template)


def state_rows(home: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(home / "state.db") as db:
        return [
            (role, content) for role, content in db.execute("SELECT role, content FROM messages ORDER BY id")
        ]


def tool_results(request: dict[str, Any], prompt: str) -> list[str]:
    """The results of the real tool calls: tool messages after the person's prompt (not warm ones)."""
    messages = request["messages"]
    start = next(i for i, m in enumerate(messages) if m["role"] == "user" and m["content"] == prompt)
    return [m["content"] for m in messages[start:] if m["role"] == "tool"]


@pytest.fixture
def homes(isolated_homes: Path) -> tuple[Path, Path]:
    return isolated_homes / "hermes", isolated_homes / "kindling"


def test_warm_start_keeps_its_bytes_and_the_guard_blocks_when_the_daemon_is_down(
    fake_openai: FakeOpenAI, homes: tuple[Path, Path]
) -> None:
    # One Hermes run checks both the warm start and the guard with no daemon to ask (each Hermes
    # start costs seconds; the two behaviours are independent of each other).
    home, kindling_home = homes
    save_template()
    down = f"http://127.0.0.1:{free_port()}"
    write_config(home, fake_openai, confirm_url=down, confirm_token="agent-token", approval_timeout=3)
    victim = home.parent / "victim"
    victim.mkdir(parents=True)
    fake_openai.script = [
        tool_call("warm_session", {"action": "list"}),
        tool_call("terminal", {"command": "echo checked"}),
        tool_call("terminal", {"command": f"rm -rf {victim}"}),
        text("All tests pass."),
    ]
    assert run_hermes(home, kindling_home, TASK, "terminal,kindling").strip() == "All tests pass."

    requests = fake_openai.chat_requests()
    assert len(requests) == 4
    first = requests[0]["messages"]
    assert first[0]["role"] == "system" and "Hermes" in first[0]["content"]
    real_user = next(i for i, m in enumerate(first) if m["role"] == "user" and m["content"] == TASK)
    warm = first[1:real_user]
    # Right after the system prompt: kindling's past examples, limited to the tools Hermes offered.
    assert warm and MARKER in json.dumps(warm)
    called = [c["function"]["name"] for m in warm for c in m.get("tool_calls") or ()]
    assert called == ["terminal"] and "web_search" not in json.dumps(warm)
    # Every later request of the session carries the identical warm bytes in the same place.
    for later in requests[1:]:
        messages = later["messages"]
        assert messages[0] == first[0]
        assert json.dumps(messages[1:real_user]) == json.dumps(warm)
        assert messages[real_user]["content"] == TASK
    # The model could call the kindling toolset: warm_session answered with the template list.
    listed = json.loads(tool_results(requests[1], TASK)[0])
    assert listed["success"] is True and [t["name"] for t in listed["templates"]] == ["hermes-e2e"]
    # The daemon is down: a harmless command ran, the dangerous one was blocked, not run unasked.
    results = tool_results(requests[-1], TASK)
    assert len(results) == 3 and "checked" in results[1]
    assert "BLOCKED by kindling" in results[2] and "could not be asked" in results[2]
    assert victim.exists()
    # Hermes stored only the real conversation: no warm message reached state.db.
    rows = state_rows(home)
    assert [role for role, _ in rows] == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]
    assert not any(MARKER in (content or "") for _, content in rows)
    assert rows[0][1] == TASK


def turn_text(turn: dict[str, Any]) -> str:
    """The text of an Anthropic turn (a string, or its text blocks)."""
    content = turn["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")


def test_anthropic_mode_is_warmed_with_the_same_turns_on_every_call(
    fake_openai: FakeOpenAI, homes: tuple[Path, Path]
) -> None:
    # Hermes talking to Claude (its anthropic_messages mode) sends Messages API requests: the
    # warm-up goes first in "messages" as alternating user/assistant turns, tool calls as
    # tool_use blocks answered by tool_result blocks, and the same bytes on every call.
    home, kindling_home = homes
    save_template()
    write_config(home, fake_openai, api_mode="anthropic_messages")
    fake_openai.script = [tool_call("terminal", {"command": "echo checked"}), text("All tests pass.")]
    assert run_hermes(home, kindling_home, TASK, "terminal").strip() == "All tests pass."

    requests = fake_openai.message_requests()
    assert len(requests) == 2 and not fake_openai.chat_requests()
    first = requests[0]["messages"]
    real = next(i for i, turn in enumerate(first) if turn["role"] == "user" and turn_text(turn) == TASK)
    warm = first[:real]
    assert warm and warm[0]["role"] == "user" and warm[-1]["role"] == "assistant"
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(first))
    assert MARKER in json.dumps(warm) and "web_search" not in json.dumps(warm)
    uses = [b for turn in warm for b in turn["content"] if b["type"] == "tool_use"]
    answered = [b["tool_use_id"] for turn in warm for b in turn["content"] if b["type"] == "tool_result"]
    assert [b["name"] for b in uses] == ["terminal"] and answered == [b["id"] for b in uses]
    assert "Hermes" in json.dumps(requests[0]["system"])
    # The second call (after the real tool call) carries the identical warm turns and system.
    later = requests[1]
    assert json.dumps(later["messages"][:real]) == json.dumps(warm)
    assert later["system"] == requests[0]["system"]
    results = [b for turn in later["messages"][real:] for b in turn["content"] if isinstance(b, dict)]
    assert any(b.get("type") == "tool_result" and "checked" in json.dumps(b) for b in results)
    # Hermes stored only the real conversation.
    rows = state_rows(home)
    assert rows[0][1] == TASK and not any(MARKER in (content or "") for _, content in rows)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Tokens, ConfirmationStore]]:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, daemon_settings(db))
    tokens = make_tokens(store)
    with running(store.settings, store) as server:
        yield server.base_url, tokens, store
    store.close()


def human(base: str, token: str, verdicts: list[tuple[str, str]]) -> threading.Thread:
    """An approver who decides each new pending request in turn, then stops deciding."""

    def decide() -> None:
        decided: set[str] = set()
        with ConfirmClient(base, token) as approver:
            deadline = time.monotonic() + 90
            while verdicts and time.monotonic() < deadline:
                pending = approver._call("GET", "/confirm", params={"status": "pending"}).json()["requests"]
                for request in sorted(pending, key=lambda r: r["created_at"]):
                    if request["id"] in decided or not verdicts:
                        continue
                    verdict, reason = verdicts.pop(0)
                    decide_with = approver.approve if verdict == "approve" else approver.deny
                    decide_with(request["id"], reason=reason, digest=request["digest"])
                    decided.add(request["id"])
                time.sleep(0.05)

    thread = threading.Thread(target=decide, daemon=True)
    thread.start()
    return thread


def test_dangerous_commands_wait_for_the_daemon_and_warm_off_changes_nothing(
    fake_openai: FakeOpenAI, homes: tuple[Path, Path], daemon: tuple[str, Tokens, ConfirmationStore]
) -> None:
    home, kindling_home = homes
    base, tokens, store = daemon
    save_template()  # present, but the warm start is turned off for this run
    write_config(
        home, fake_openai, warm=False, confirm_url=base, confirm_token=tokens.agent, approval_timeout=3
    )
    victims = [home.parent / f"victim{i}" for i in range(3)]
    for victim in victims:
        (victim / "sub").mkdir(parents=True)
    fake_openai.script = [
        tool_call("request_confirmation", {"action": "deploy_production", "description": "Deploy v2"}),
        tool_call("terminal", {"command": f"rm -rf {victims[0]}"}),
        tool_call("terminal", {"command": f"rm -rf {victims[1]}"}),
        tool_call("terminal", {"command": f"rm -rf {victims[2]}"}),
        tool_call("terminal", {"command": "echo harmless"}),
        text("Finished."),
    ]
    approver = human(
        base, tokens.approver, [("approve", "ship it"), ("deny", "not on a Friday"), ("approve", "fine")]
    )
    prompt = "Clean up the old build folders"
    run_hermes(home, kindling_home, prompt, "terminal,kindling")
    approver.join(5)

    requests = fake_openai.chat_requests()
    results = tool_results(requests[-1], prompt)
    assert len(results) == 5
    confirmed = json.loads(results[0])
    assert (
        confirmed["success"] is True and confirmed["approved"] is True
    )  # the kindling tool, called by the model
    assert "denied" in results[1] and "not on a Friday" in results[1] and "alice" in results[1]
    assert victims[0].exists()  # denied: the folder survived
    assert not victims[1].exists()  # approved: the command ran
    assert "BLOCKED by kindling" in results[3] and victims[2].exists()  # nobody answered in time
    assert "harmless" in results[4]  # not dangerous: never asked

    submitted = [r for r in store.list_requests(limit=10)]
    by_action = sorted(submitted, key=lambda r: r.created_at)
    assert [r.action for r in by_action] == [
        "deploy_production",
        "hermes.terminal",
        "hermes.terminal",
        "hermes.terminal",
    ]
    assert [r.status for r in by_action] == ["approved", "denied", "approved", "expired"]
    shown = by_action[1]
    assert shown.details["command"] == f"rm -rf {victims[0]}" and shown.details["cwd"] == str(
        home.parent / "work"
    )
    assert shown.details["session_id"] and shown.details["platform"] == "cli"
    events = {(e.request_id, e.event) for e in store.audit_events(limit=100)}
    for request, final in zip(by_action, ["approved", "denied", "approved", "expired"], strict=True):
        assert (request.id, "submitted") in events and (request.id, final) in events
    # warm: false leaves every request as Hermes built it.
    assert [m["role"] for m in requests[0]["messages"]] == ["system", "user"]
    assert not any(MARKER in json.dumps(r["messages"]) for r in requests)

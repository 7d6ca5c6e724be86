"""Approvals fail closed, within one deadline, on every surface that asks the daemon.

A fake daemon on loopback (tests/odd_daemon.py) answers in each way a careless client reads as
"approved": an HTML page, a JSON list, ``pending`` without an id, another request's id approved, a
redirect with an approving body, an unknown status, an answer 30 s late and one trickled a byte at
a time. The Python client, the agent-facing tool run by kindling's agent loop, the MCP tool through
the official MCP SDK client, and the Hermes plugin's hook inside real Hermes Agent 0.19.0's plugin
manager must each refuse them all with a clear message, by the request's timeout plus
``DEADLINE_MARGIN`` seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from fake_openai import FakeOpenAI, text, tool_call
from hermes_env import run_in_hermes
from kindling.agent import Runtime, ToolRegistry, run
from kindling.confirm.client import DEADLINE_MARGIN, ConfirmClient
from kindling.errors import ConfirmError
from kindling.integrations.mcp import McpSettings, create_server
from kindling.integrations.tools import kindling_tools
from odd_daemon import MODES, ODD_ANSWERS, OddDaemon

# What each refusal says (a clear sentence naming what was wrong with the answer).
EXPECTED = {
    "html": "is not JSON (text/html)",
    "list": "is not a JSON object (a list)",
    "no_id": "carries no request id",
    "other_id": "answered about request 'cr_SOMEONE_ELSE' when asked about 'cr_mine'",
    "redirect": "answered with a redirect (302",
    "unknown_status": "unknown status 'approvedish'",
    "slow": "did not answer in time",
    "trickle": "did not answer in time",
}
LATE = ("slow", "trickle")
TIMEOUT = 1  # the request's timeout: a late answer is given up on by TIMEOUT + DEADLINE_MARGIN


@pytest.fixture(scope="module")
def odd() -> Iterator[OddDaemon]:
    with OddDaemon() as daemon:
        yield daemon


FAST = [mode for mode in MODES if mode not in LATE]


def client_refusal(odd: OddDaemon, mode: str) -> tuple[ConfirmError, float]:
    """The ConfirmError ``request_confirmation`` raises against ``mode``, and how long it took."""
    started = time.monotonic()
    with ConfirmClient(odd.url(mode), "agent-token") as client, pytest.raises(ConfirmError) as caught:
        client.request_confirmation("deploy_production", "Deploy v2", timeout_seconds=TIMEOUT)
    return caught.value, time.monotonic() - started


def agent_answer(fake_openai: FakeOpenAI) -> tuple[dict[str, Any], dict[str, Any], float]:
    """kindling's agent loop asking through the request_confirmation tool (KINDLING_CONFIRM_URL set by
    the caller): the tool's answer, the tool message the model then read, and how long it took."""
    fake_openai.script = [
        tool_call(
            "request_confirmation",
            {"action": "deploy_production", "description": "Deploy v2", "timeout_seconds": TIMEOUT},
        ),
        text("I will not deploy."),
    ]
    started = time.monotonic()
    result = run(
        [{"role": "user", "content": "Deploy v2 to production"}],
        runtime=Runtime(model="fake-model", base_url=fake_openai.base_url, max_retries=0),
        tools=ToolRegistry.of(kindling_tools()),
    )
    elapsed = time.monotonic() - started
    assert result.ok, result.error
    return json.loads(result.messages[2]["content"]), fake_openai.chat_requests()[1]["messages"][-1], elapsed


def mcp_result(odd: OddDaemon, mode: str) -> tuple[Any, float]:
    """The MCP tool's result through the official SDK client against ``mode``, and how long it took."""
    settings = McpSettings(confirm_url=odd.url(mode), confirm_token="agent-token", progress_interval=0.5)

    async def main() -> Any:
        async with Client(create_server(settings), read_timeout_seconds=30) as client:
            return await client.call_tool(
                "request_confirmation",
                {"action": "deploy_production", "description": "Deploy v2", "timeout_seconds": TIMEOUT},
            )

    started = time.monotonic()
    result = anyio.run(main)
    return result, time.monotonic() - started


def check_agent(mode: str, answer: dict[str, Any], sent: dict[str, Any]) -> None:
    assert answer["success"] is False and answer["approved"] is False
    assert EXPECTED[mode] in answer["error"]
    assert answer["message"] == "Do not perform 'deploy_production': it was not approved."
    # The model read the refusal as the result of its call.
    assert sent["role"] == "tool" and json.loads(sent["content"]) == answer


def check_mcp(mode: str, result: Any) -> None:
    assert result.is_error
    message = result.content[0].text
    assert message.startswith("Not approved: do not perform 'deploy_production'. "), message
    assert EXPECTED[mode] in message and "\n" not in message


@pytest.mark.parametrize("mode", FAST)
def test_the_client_refuses_every_odd_answer(odd: OddDaemon, mode: str) -> None:
    error, elapsed = client_refusal(odd, mode)
    assert EXPECTED[mode] in str(error) and elapsed < TIMEOUT + DEADLINE_MARGIN
    assert error.status_code is not None and error.status_code < 400  # an answer came, not trusted


def test_a_call_with_a_deadline_ends_there_however_the_answer_trickles(odd: OddDaemon) -> None:
    # The deadline holds on the socket: a byte every 0.2 s never trips a per-read timeout.
    with ConfirmClient(odd.url("trickle"), "agent-token", timeout=30) as client:
        started = time.monotonic()
        with pytest.raises(ConfirmError, match="did not answer in time"):
            client.submit("deploy_production", "Deploy v2", deadline=started + 1.0)
        assert time.monotonic() - started < 2.0
        with pytest.raises(ConfirmError, match="did not answer in time"):
            client.get("cr_mine", wait=0.5, deadline=time.monotonic() + 1.0)


@pytest.mark.parametrize("mode", [m for m in ODD_ANSWERS if m not in LATE])
def test_the_agent_loop_is_never_approved_by_an_odd_answer(
    odd: OddDaemon, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv("KINDLING_CONFIRM_URL", odd.url(mode))
    monkeypatch.setenv("KINDLING_CONFIRM_TOKEN", "agent-token")
    answer, sent, _elapsed = agent_answer(fake_openai)
    check_agent(mode, answer, sent)


@pytest.mark.parametrize("mode", [m for m in ODD_ANSWERS if m not in LATE])
def test_the_mcp_tool_is_never_approved_by_an_odd_answer(odd: OddDaemon, mode: str) -> None:
    result, _elapsed = mcp_result(odd, mode)
    check_mcp(mode, result)


def test_a_late_daemon_is_given_up_on_by_the_deadline_everywhere(
    odd: OddDaemon, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A daemon that answers 30 s late, or a byte at a time: the client, the agent loop and the MCP
    # tool each give up by the request's timeout plus the margin (run side by side: each waits).
    monkeypatch.setenv("KINDLING_CONFIRM_URL", odd.url("slow"))
    monkeypatch.setenv("KINDLING_CONFIRM_TOKEN", "agent-token")
    with ThreadPoolExecutor(4) as pool:
        late = {mode: pool.submit(client_refusal, odd, mode) for mode in LATE}
        agent = pool.submit(agent_answer, fake_openai)
        mcp = pool.submit(mcp_result, odd, "slow")
        bound = TIMEOUT + DEADLINE_MARGIN
        for mode, future in late.items():
            error, elapsed = future.result()
            assert EXPECTED[mode] in str(error) and error.status_code is None  # no answer came
            assert bound - 0.5 <= elapsed < bound + 1.0, (mode, elapsed)  # waited as long as it said
        answer, sent, elapsed = agent.result()
        check_agent("slow", answer, sent)
        assert elapsed < bound + 2.0
        result, elapsed = mcp.result()
        check_mcp("slow", result)
        assert elapsed < bound + 2.0


HERMES_CHECKS = """
import json, time
from hermes_cli.plugins import discover_plugins, resolve_pre_tool_block
discover_plugins()
seen = {}
for mode in MODES:
    started = time.monotonic()
    # The fake daemon answers each session's request in the mode named by the session id.
    message = resolve_pre_tool_block("terminal", {"command": "rm -rf /srv/data"}, session_id=mode)
    seen[mode] = [message, time.monotonic() - started]
seen["harmless"] = [resolve_pre_tool_block("terminal", {"command": "ls -la"}, session_id="html"), 0]
print(json.dumps(seen))
"""


def test_the_hermes_hook_blocks_every_odd_answer_inside_hermes(odd: OddDaemon, isolated_homes: Path) -> None:
    home = isolated_homes / "hermes"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        "plugins:\n  enabled: [kindling]\n  entries:\n    kindling:\n      settings:\n"
        f"        confirm_url: {odd.url()}\n        confirm_token: agent-token\n"
        "        approval_timeout: 3\n        warm: false\n",
        encoding="utf-8",
    )
    odd.seen.clear()
    seen = run_in_hermes(
        f"MODES = {list(ODD_ANSWERS)!r}\n" + HERMES_CHECKS, home, KINDLING_HOME=str(isolated_homes / "k")
    )
    problems = {}  # every mode checked, so a failure lists each answer that got through
    for mode in ODD_ANSWERS:
        message, elapsed = seen[mode]
        if message is None:
            problems[mode] = "Hermes would run the command"
        elif not message.startswith("BLOCKED by kindling: ") or EXPECTED[mode] not in message:
            problems[mode] = message
        elif elapsed >= 3 + DEADLINE_MARGIN + 0.5:
            # One deadline: the approval timeout (3 s) plus the margin, whatever the daemon does.
            problems[mode] = f"blocked after {elapsed:.1f}s"
    assert problems == {}
    assert seen["harmless"][0] is None  # not dangerous: never asked
    asked = [body["session_key"] for method, _path, body in odd.seen if method == "POST" and body]
    assert asked == list(ODD_ANSWERS)

"""The proxy warms by itself: what it records is mined into each tenant's template in the background,
and a later conversation's first request reaches the upstream warmed, with no manual step. The
official openai client in front, the fake OpenAI server behind."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from typer.testing import CliRunner

from fake_openai import FakeOpenAI, text, tool_call
from kindling.cli.main import app
from kindling.proxy.builder import KeyedExecutor
from proxy_support import TOOLS, running_proxy, status

SYSTEM = {"role": "system", "content": "You are a careful coding agent."}


def _until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Poll ``check`` until it returns something true (the builder works on its own thread)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _chat(client: openai.OpenAI, fake: FakeOpenAI, task: str, path: str) -> None:
    """A short chat: the model reads a file, then answers."""
    fake.script = [tool_call("read_file", {"path": path}, f"call_{path}"), text(f"{path} looks fine.")]
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": task}]
    reply = client.chat.completions.create(model="fake-model", messages=messages, tools=TOOLS)
    messages += [
        reply.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": f"call_{path}", "content": f"contents of {path}"},
    ]
    client.chat.completions.create(model="fake-model", messages=messages, tools=TOOLS)


def test_recorded_conversations_warm_a_later_one_with_no_manual_step(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    db, templates = tmp_path / "proxy.db", tmp_path / "templates"
    with running_proxy(
        fake_openai.base_url, db, templates=str(templates), build_every=2, build_gap=0
    ) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0)
        template = status(proxy.base_url)["template"]
        assert template["summary"] == "no template yet (0 of 2 conversations recorded)"
        _chat(client, fake_openai, "Read the parser module to find the tokenizer bug", "src/parser.py")
        assert status(proxy.base_url)["template"]["summary"].startswith(
            "no template yet (1 of 2 conversations"
        )
        _chat(client, fake_openai, "Read the lexer module and check its tokens", "src/lexer.py")
        built = _until(lambda: status(proxy.base_url)["template"]["version"], "the first background build")
        assert built == 1
        shown = status(proxy.base_url)["template"]
        assert shown["summary"].startswith("template proxy-default v1 from 2 conversations"), shown

        # A new conversation: its first request reaches the upstream warmed from that template.
        fake_openai.requests.clear()
        fake_openai.script = [text("On it.")]
        task = {"role": "user", "content": "Read the parser module and fix the tokenizer"}
        client.chat.completions.create(model="fake-model", messages=[SYSTEM, task], tools=TOOLS)
        sent = fake_openai.chat_requests()[0]["messages"]
        assert sent[0] == SYSTEM and sent[-1] == task and len(sent) > 2
        assert "src/parser.py" in json.dumps(sent[1:-1])
        shown = status(proxy.base_url)["template"]
        assert shown["warmed"] == 1 and shown["warmed_from"] == {"proxy-default": 1}
        assert shown["summary"].endswith("warmed 1 of 3 new conversations (proxy-default 1)"), shown
        cli = CliRunner().invoke(app, ["proxy", "status", "--url", proxy.base_url])
        assert cli.exit_code == 0, cli.output
        assert "template proxy-default v1 from 2 conversations" in cli.output
        assert "warmed 1 of 3 new conversations" in cli.output
    # The documented recipe works on short chats too.
    built_by_hand = CliRunner().invoke(app, ["build", "main", str(db), "--json", "-s", str(tmp_path / "t2")])
    assert built_by_hand.exit_code == 0, built_by_hand.output
    assert json.loads(built_by_hand.stdout)["template"]["tools"] == ["read_file"]


def test_a_build_with_nothing_to_keep_says_so_and_the_next_one_succeeds(
    fake_openai: FakeOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db, templates = tmp_path / "proxy.db", tmp_path / "templates"
    with running_proxy(
        fake_openai.base_url, db, templates=str(templates), build_every=1, build_gap=0
    ) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0)
        fake_openai.script = [text("Hello.")]
        client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "hi"}])
        failed = _until(lambda: status(proxy.base_url)["template"]["error"], "the failed build")
        assert "No examples to keep" in failed
        assert (
            "no template yet (1 conversations recorded: No examples"
            in status(proxy.base_url)["template"]["summary"]
        )
        assert any("not built" in r.getMessage() for r in caplog.records)
        _chat(client, fake_openai, "Read the parser module", "src/parser.py")
        _until(lambda: status(proxy.base_url)["template"]["version"], "the second build")
        assert status(proxy.base_url)["template"]["error"] is None


def test_keyed_executor_debounces_per_key_runs_once_more_and_survives_a_failure() -> None:
    import threading

    executor = KeyedExecutor("test-executor")
    gate, ran = threading.Event(), []

    def job(name: str) -> Callable[[], None]:
        def run() -> None:
            if name == "a1":
                gate.wait(10)
            if name == "boom":
                raise RuntimeError("boom")
            ran.append(name)

        return run

    executor.start()
    assert executor.submit("a", job("a1"))
    _until(lambda: executor.pending("a") and not executor._jobs, "a1 to start")
    assert executor.submit("a", job("a2"))  # a1 is running: a2 runs after it
    assert not executor.submit("a", job("a3"))  # a2 already waits: this one is not needed
    assert executor.submit("b", job("boom")) and executor.submit("c", job("c1"))
    gate.set()
    assert executor.idle(10)
    assert ran == ["a1", "c1", "a2"]  # a2 waited behind what was queued while a1 ran
    executor.stop()

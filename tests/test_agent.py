"""The tool-calling loop and the tool registry, against the real loopback fake OpenAI server."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import pytest

from fake_openai import FakeOpenAI, text, tool_call, tool_calls
from kindling.agent import Runtime, Tool, ToolRegistry, run
from kindling.agent.registry import current_call
from kindling.errors import KindlingError


def _runtime(server: FakeOpenAI, **overrides: Any) -> Runtime:
    settings: dict[str, Any] = {"timeout": 5.0, "max_retries": 2, "backoff": 0.01, "max_backoff": 0.05}
    settings.update(overrides)
    return Runtime(model="fake-model", base_url=server.base_url, api_key="sk-test", **settings)


def _schema(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"The {name} tool.",
        "parameters": {"type": "object", "properties": {}},
    }


def _registry(executed: list[tuple[str, dict[str, Any]]]) -> ToolRegistry:
    def remember(args: dict[str, Any]) -> str:
        executed.append(("memory", args))
        context = current_call()
        return json.dumps({"success": True, "call": context.tool_call_id if context else None})

    def terminal(args: dict[str, Any]) -> str:
        executed.append(("terminal", args))
        return json.dumps({"output": "ran"})

    def broken(args: dict[str, Any]) -> str:
        raise RuntimeError("disk on fire")

    return ToolRegistry.of(
        [
            Tool("memory", "memory", _schema("memory"), remember),
            Tool("terminal", "terminal", _schema("terminal"), terminal),
            Tool("broken", "memory", _schema("broken"), broken),
        ]
    )


def _tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "tool"]


def test_plain_answer_returns_final_text_and_usage(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [text("Hello there.")]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    result = run(messages, runtime=_runtime(fake_openai))
    assert result.ok and result.error is None
    assert result.final_text == "Hello there."
    assert result.usage.as_dict() == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "requests": 1,
    }
    assert result.messages[:2] == messages and len(messages) == 2  # input copied, not mutated
    body = fake_openai.chat_requests()[0]
    assert body["model"] == "fake-model"
    assert body["messages"] == messages
    assert "tools" not in body
    headers = {k.lower(): v for k, v in fake_openai.requests[0]["headers"].items()}
    assert headers["authorization"] == "Bearer sk-test"


def test_tool_call_is_executed_and_its_result_sent_back(fake_openai: FakeOpenAI) -> None:
    executed: list[tuple[str, dict[str, Any]]] = []
    fake_openai.script = [tool_call("memory", {"action": "add"}, "call_A"), text("Saved.")]
    result = run(
        [{"role": "user", "content": "remember"}], runtime=_runtime(fake_openai), tools=_registry(executed)
    )
    assert result.ok and result.final_text == "Saved." and result.iterations == 2
    assert executed == [("memory", {"action": "add"})]
    second = fake_openai.chat_requests()[1]["messages"]
    assert second[1]["tool_calls"][0]["id"] == "call_A"
    assert second[2] == {
        "role": "tool",
        "tool_call_id": "call_A",
        "content": '{"success": true, "call": "call_A"}',
    }
    assert [t["function"]["name"] for t in fake_openai.chat_requests()[0]["tools"]] == [
        "memory",
        "terminal",
        "broken",
    ]


def test_call_outside_whitelist_is_denied_and_never_executed(fake_openai: FakeOpenAI) -> None:
    executed: list[tuple[str, dict[str, Any]]] = []
    registry = _registry(executed).restricted(toolsets=["memory"])
    fake_openai.script = [
        tool_calls(("terminal", {"command": "rm -rf /"}, "call_T"), ("memory", {"action": "add"}, "call_M")),
        text("ok"),
    ]
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai), tools=registry)
    assert result.ok
    assert executed == [("memory", {"action": "add"})]
    denial = json.loads(_tool_messages(result.messages)[0]["content"])
    assert denial["success"] is False and denial["denied"] is True
    assert "'terminal' was denied and not executed" in denial["error"] and "auto-denied" in denial["error"]
    assert [(d.name, d.status) for d in registry.log] == [("terminal", "denied"), ("memory", "ok")]
    # Every schema is still advertised so the request prefix matches the parent's.
    assert len(fake_openai.chat_requests()[0]["tools"]) == 3


def test_only_allowed_tools_advertised_on_request(fake_openai: FakeOpenAI) -> None:
    registry = _registry([]).restricted(names=["memory"])
    run(
        [{"role": "user", "content": "x"}],
        runtime=_runtime(fake_openai),
        tools=registry,
        advertise_all_tools=False,
    )
    assert [t["function"]["name"] for t in fake_openai.chat_requests()[0]["tools"]] == ["memory"]


def test_raising_handler_and_bad_arguments_become_error_results(fake_openai: FakeOpenAI) -> None:
    executed: list[tuple[str, dict[str, Any]]] = []
    bad_args = {
        "message": {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "memory", "arguments": "{not json"}},
                {"id": "c2", "type": "function", "function": {"name": "memory", "arguments": "[1, 2]"}},
            ],
        },
        "finish_reason": "tool_calls",
    }
    fake_openai.script = [
        tool_call("broken", {}, "c0"),
        bad_args,
        tool_call("nonexistent", {}, "c3"),
        text("done"),
    ]
    registry = _registry(executed)
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai), tools=registry)
    assert result.ok and result.final_text == "done"
    assert executed == []
    errors = [json.loads(m["content"]) for m in _tool_messages(result.messages)]
    assert all(e["success"] is False for e in errors)
    assert errors[0]["error"] == "Tool 'broken' failed: RuntimeError: disk on fire"
    assert "not valid JSON" in errors[1]["error"]
    assert "must be a JSON object, not list" in errors[2]["error"]
    assert errors[3]["error"].startswith(
        "Unknown tool 'nonexistent'. Available tools: broken, memory, terminal"
    )
    assert [d.status for d in registry.log] == ["error", "bad_arguments", "bad_arguments", "unknown"]


def test_tool_call_without_registry_is_answered(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [tool_call("memory", {}, "c1"), text("fine")]
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai))
    assert result.ok
    assert "this run has no tools" in _tool_messages(result.messages)[0]["content"]


def test_5xx_and_429_are_retried_then_succeed(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [
        {"fault": "status", "status": 503},
        {"fault": "status", "status": 429},
        text("Recovered."),
    ]
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai))
    assert result.ok and result.final_text == "Recovered."
    assert len(fake_openai.chat_requests()) == 3


def test_persistent_500_gives_up_with_endpoint_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = {"fault": "status", "status": 500}
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai))
    assert not result.ok
    assert result.error == f"{fake_openai.base_url}: HTTP 500: scripted 500 (gave up after 2 retries)"
    assert len(fake_openai.chat_requests()) == 3


def test_client_errors_are_not_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [{"fault": "status", "status": 401}]
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai))
    assert result.error is not None and "HTTP 401" in result.error
    assert len(fake_openai.chat_requests()) == 1


def test_malformed_json_body_is_an_error_not_an_exception(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [{"fault": "malformed"}]
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai))
    assert result.error is not None and "not valid JSON" in result.error
    assert len(fake_openai.chat_requests()) == 1


def test_completion_without_choices_is_malformed(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [{"message": None, "finish_reason": "stop"}]
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai))
    assert result.error is not None and "malformed completion" in result.error


def test_timeout_is_reported(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [{"fault": "delay", "seconds": 1.5}, text("too late")]
    started = time.monotonic()
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai, timeout=0.3))
    assert time.monotonic() - started < 1.4
    assert result.error is not None and "timed out" in result.error


def test_unreachable_endpoint_is_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    runtime = Runtime(model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff=0.01)
    result = run([{"role": "user", "content": "x"}], runtime=runtime)
    assert result.error is not None
    assert "cannot connect" in result.error and "(gave up after 1 retries)" in result.error


def test_iteration_cap_stops_a_model_that_keeps_calling_tools(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = tool_call("memory", {"action": "add"})
    executed: list[tuple[str, dict[str, Any]]] = []
    result = run(
        [{"role": "user", "content": "x"}],
        runtime=_runtime(fake_openai),
        tools=_registry(executed),
        max_iterations=3,
    )
    assert result.error == "Stopped after 3 iterations: the model was still calling tools."
    assert len(fake_openai.chat_requests()) == 3 and len(executed) == 3


def test_cancel_before_start_and_during_backoff(fake_openai: FakeOpenAI) -> None:
    cancel = threading.Event()
    cancel.set()
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai), cancel=cancel)
    assert result.cancelled and result.error == "Run cancelled." and fake_openai.chat_requests() == []

    fake_openai.default = {"fault": "status", "status": 502}
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    result = run(
        [{"role": "user", "content": "x"}],
        runtime=_runtime(fake_openai, backoff=10.0, max_backoff=10.0),
        cancel=cancel,
    )
    assert result.cancelled and time.monotonic() - started < 5


def test_registry_rejects_tools_without_name_or_handler() -> None:
    registry = ToolRegistry()
    with pytest.raises(KindlingError, match="non-empty name"):
        registry.register(Tool(" ", "x", {}, lambda a: "{}"))
    with pytest.raises(KindlingError, match="no callable handler"):
        registry.register(Tool("t", "x", {}, None))  # type: ignore[arg-type]
    assert registry.names() == []


def test_zero_iterations_is_an_error_without_a_request(fake_openai: FakeOpenAI) -> None:
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai), max_iterations=0)
    assert result.error == "max_iterations must be at least 1." and fake_openai.chat_requests() == []


def test_unserialisable_message_is_an_error_result_not_a_raise(fake_openai: FakeOpenAI) -> None:
    result = run([{"role": "user", "content": object()}], runtime=_runtime(fake_openai))
    assert result.error is not None and "the request failed" in result.error
    assert fake_openai.chat_requests() == []


def test_calls_that_arrive_after_cancel_are_never_executed(fake_openai: FakeOpenAI) -> None:
    executed: list[tuple[str, dict[str, Any]]] = []
    cancel = threading.Event()
    # The answer is held until the run is cancelled, and the run is cancelled once the request
    # arrived (not after a fixed time, which a loaded machine can spend before sending it).
    fake_openai.script = [{"fault": "wait", "until": cancel}, tool_call("memory", {"action": "add"}, "late")]

    def cancel_once_asked() -> None:
        deadline = time.monotonic() + 10
        while not fake_openai.chat_requests() and time.monotonic() < deadline:
            time.sleep(0.01)
        cancel.set()

    threading.Thread(target=cancel_once_asked, daemon=True).start()
    result = run(
        [{"role": "user", "content": "x"}],
        runtime=_runtime(fake_openai),
        tools=_registry(executed),
        cancel=cancel,
    )
    assert result.cancelled and result.error == "Run cancelled."
    assert executed == []  # the answer came back after cancel: its calls were dropped
    assert [m["role"] for m in result.messages] == ["user"]  # no unanswered call left behind
    assert len(fake_openai.chat_requests()) == 1


def test_base_url_without_scheme_is_an_error_without_retries() -> None:
    runtime = Runtime(model="m", base_url="127.0.0.1:8000/v1", max_retries=3, backoff=5.0)
    started = time.monotonic()
    result = run([{"role": "user", "content": "x"}], runtime=runtime)
    assert result.error == "127.0.0.1:8000/v1: the base URL must start with http:// or https://."
    assert time.monotonic() - started < 1


def test_retry_after_is_honoured_on_429(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [
        {"fault": "status", "status": 429, "headers": {"retry-after": "0.4"}},
        {"fault": "status", "status": 503, "headers": {"retry-after-ms": "300"}},
        text("Recovered."),
    ]
    result = run([{"role": "user", "content": "x"}], runtime=_runtime(fake_openai))  # backoff 0.01 s
    assert result.ok and result.final_text == "Recovered."
    times = [r["time"] for r in fake_openai.requests if r["path"].endswith("/chat/completions")]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.4 and times[2] - times[1] >= 0.3  # the server's wait, not ours

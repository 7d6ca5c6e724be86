"""The canonical model: OpenAI-shaped dicts, the fast builders, the read report."""

from __future__ import annotations

import dataclasses

import pytest

from kindling.sessions import Message, ReadReport, Session, ToolCall
from kindling.sessions.model import build_message, build_tool_call


def test_as_dict_is_openai_shaped() -> None:
    parsed = ToolCall("c1", "terminal", {"command": "ls"})
    raw = ToolCall("c2", "terminal", {}, "ls -la; not json")
    user_side = ToolCall("u1", "toggle_airplane_mode", {}, None, "user")
    assert parsed.as_dict() == {
        "id": "c1",
        "type": "function",
        "function": {"name": "terminal", "arguments": '{"command":"ls"}'},
    }
    assert raw.as_dict()["function"]["arguments"] == "ls -la; not json"
    assert user_side.as_dict()["requestor"] == "user"
    session = Session(
        "s1",
        "cli",
        (
            Message("assistant", None, (parsed,)),
            Message("tool", "a.txt", (), "c1", "terminal", False, 1.5),
        ),
        reward=1.0,
    )
    data = session.as_dict()
    assert data["messages"] == [
        {"role": "assistant", "content": None, "tool_calls": [parsed.as_dict()]},
        {
            "role": "tool",
            "content": "a.txt",
            "tool_call_id": "c1",
            "name": "terminal",
            "error": False,
            "timestamp": 1.5,
        },
    ]
    assert (data["id"], data["reward"], data["metadata"]) == ("s1", 1.0, {})


def test_fast_builders_build_the_same_frozen_objects() -> None:
    call = build_tool_call("c", "memory", {"a": 1}, None, "assistant")
    assert call == ToolCall("c", "memory", {"a": 1})
    message = build_message("assistant", "hi", (call,), None, None, None, 2.0)
    assert message == Message("assistant", "hi", (call,), timestamp=2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]


def test_report_counts_and_merges() -> None:
    first, second = ReadReport(), ReadReport()
    first.add_session(
        Session(
            "s", "cli", (Message("assistant", None, (ToolCall("c", "t"),)), Message("tool", "x", (), "c"))
        )
    )
    first.skip("unknown_role")
    second.skip("unknown_role", 2)
    second.skip("invalid_utf8")
    first.merge(second)
    assert first.as_dict() == {
        "sessions": 1,
        "messages": 2,
        "tool_calls": 1,
        "tool_results": 1,
        "skipped": {"invalid_utf8": 1, "unknown_role": 3},
    }

"""The canonical model: OpenAI-shaped dicts, the fast builders, the read report."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import orjson
import pytest

from kindling.sessions import Message, ReadReport, Session, ToolCall, generate_sample_db, iter_sessions
from kindling.sessions.model import build_message, build_tool_call, new_session


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
    session = new_session("s", "codex", (message,), 1.0, 2.0, None, "m", "p", None, {"k": 1}, "/w")
    assert type(session) is Session
    assert session == Session("s", "codex", (message,), 1.0, 2.0, None, "m", "p", None, {"k": 1}, "/w")
    assert pickle.loads(pickle.dumps(session)) == session and session.message_count == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        session.model = "changed"  # type: ignore[misc]


def test_report_counts_and_merges() -> None:
    first, second = ReadReport(), ReadReport()
    first.add_session(
        Session(
            "s", "cli", (Message("assistant", None, (ToolCall("c", "t"),)), Message("tool", "x", (), "c"))
        )
    )
    first.skip("unknown_role")
    # A simulated user's call (tau2-bench) and its result are not the agent's.
    second.add_session(
        Session(
            "u",
            "tau2-bench",
            (
                Message("user", None, (ToolCall("u1", "toggle", requestor="user"),)),
                Message("tool", "OFF", (), "u1"),
            ),
        )
    )
    second.skip("unknown_role", 2)
    second.skip("invalid_utf8")
    first.merge(second)
    assert first.as_dict() == {
        "sessions": 2,
        "messages": 4,
        "tool_calls": 1,
        "tool_results": 1,
        "user_tool_calls": 1,
        "skipped": {"invalid_utf8": 1, "unknown_role": 3},
    }


def test_reader_objects_are_real_frozen_and_picklable(tmp_path: Path) -> None:

    path = generate_sample_db(tmp_path / "state.db", sessions=5, seed=1)
    sessions = list(iter_sessions(path))
    messages = [m for s in sessions for m in s.messages]
    calls = [c for m in messages for c in m.tool_calls]
    assert calls and all(type(m) is Message for m in messages) and all(type(c) is ToolCall for c in calls)
    assert pickle.loads(pickle.dumps(sessions)) == sessions
    with pytest.raises(dataclasses.FrozenInstanceError):
        calls[0].name = "changed"  # type: ignore[misc]


def test_argument_cache_is_bounded_and_shares_equal_texts() -> None:
    from kindling.sessions.convert import ARGUMENT_CACHE_ENTRIES, parse_tool_calls

    cache: dict[str, dict[str, object]] = {}
    report = ReadReport()
    seen = []
    for index in range(ARGUMENT_CACHE_ENTRIES + 10):
        text = orjson.dumps({"n": index}).decode()
        raw = orjson.dumps([{"id": f"c{index}", "function": {"name": "t", "arguments": text}}])
        (parsed,) = parse_tool_calls(raw, report, id_prefix="s", cache=cache)
        seen.append(parsed.arguments)
        assert len(cache) <= ARGUMENT_CACHE_ENTRIES
    assert seen == [{"n": index} for index in range(ARGUMENT_CACHE_ENTRIES + 10)]
    again = parse_tool_calls(
        '[{"id": "x", "function": {"name": "t", "arguments": "{\\"n\\": 1}"}},'
        ' {"id": "y", "function": {"name": "u", "arguments": "{\\"n\\": 1}"}}]',
        report,
        id_prefix="s",
        cache=cache,
    )
    assert again[0].arguments is again[1].arguments and again[0].arguments == {"n": 1}
    assert report.skipped == {}

"""The proxy with the official anthropic client in front and the fake server's Messages API behind it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from fake_openai import FakeOpenAI, text, tool_call
from kindling.mining.tasktype import opening_request
from kindling.proxy.anthropic import StreamedMessage, canonical_messages, canonical_turn, reply_of_message
from kindling.proxy.identity import PrefixHasher
from kindling.sessions import find_session, iter_sessions
from kindling.sessions.model import Message, Session
from kindling.warmup.warm import find_task
from proxy_support import running_proxy, save_template, status, wait_recorded

SYSTEM = "You are a careful coding agent."
TOOLS = [
    {
        "name": name,
        "description": f"The {name} tool.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    for name in ("read_file", "terminal")
]


def _client(proxy_base_url: str, api_key: str = "sk-ant-client", **headers: str) -> anthropic.Anthropic:
    # The SDK adds /v1/messages to its base URL, so it is given the proxy's root.
    return anthropic.Anthropic(
        base_url=proxy_base_url.removesuffix("/v1"),
        api_key=api_key,
        default_headers=headers or None,
        max_retries=0,
    )


def _turns(message: anthropic.types.Message) -> dict[str, Any]:
    """A reply as the client sends it back in its next request."""
    return {
        "role": "assistant",
        "content": [block.model_dump(exclude_none=True) for block in message.content],
    }


def _warm_turns(upstream: dict[str, Any], sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    turns = upstream["messages"]
    assert turns[len(turns) - len(sent) :] == sent, "the client's turns must follow the warm-up unchanged"
    return turns[: len(turns) - len(sent)]


def _conversation(client: anthropic.Anthropic, fake: FakeOpenAI, task: str, *, stream: bool) -> list[Any]:
    """Two requests: a read_file call, then its result (an error) and a text answer."""
    fake.script = [
        tool_call("read_file", {"path": "src/parser.py"}, "call_read_1"),
        text("The file is missing; nothing to fix."),
    ]
    sent: list[dict[str, Any]] = [{"role": "user", "content": task}]

    def ask() -> anthropic.types.Message:
        options: dict[str, Any] = {
            "model": "claude-fake",
            "max_tokens": 512,
            "system": SYSTEM,
            "messages": sent,
            "tools": TOOLS,
        }
        if stream:
            with client.messages.stream(**options) as events:
                return events.get_final_message()
        return client.messages.create(**options)

    first = ask()
    assert [block.type for block in first.content] == ["tool_use"]
    call = first.content[0]
    sent = [
        *sent,
        _turns(first),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": "No such file", "is_error": True}
            ],
        },
    ]
    second = ask()
    assert second.content[0].type == "text"
    return [*sent, _turns(second)]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_messages_are_recorded_once_and_warmed_with_the_same_turns(
    fake_openai: FakeOpenAI, tmp_path: Path, stream: bool
) -> None:
    save_template(tmp_path / "templates")
    db = tmp_path / "proxy.db"
    task = "Find the tokenizer bug in src/parser.py"
    with running_proxy(fake_openai.base_url, db, templates=str(tmp_path / "templates")) as proxy:
        conversation = _conversation(_client(proxy.base_url), fake_openai, task, stream=stream)
        wait_recorded(proxy.base_url)
        counts = status(proxy.base_url)
    assert (counts["conversations"], counts["warmed"], counts["continued"], counts["replies"]) == (1, 1, 1, 2)

    # Upstream, the warm-up goes before the client's turns, ends with the assistant's turn (so the
    # roles still alternate), shows only offered tools, and keeps the client's system first.
    first, second = fake_openai.message_requests()
    warm = _warm_turns(first, conversation[:1])
    assert warm and warm[0]["role"] == "user" and warm[-1]["role"] == "assistant"
    roles = [turn["role"] for turn in first["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))
    shown = {b["name"] for t in warm for b in t["content"] if b.get("type") == "tool_use"}
    assert shown and shown <= {tool["name"] for tool in TOOLS}
    assert first["system"].startswith(SYSTEM)
    # The second request carries the same warm-up turns, byte for byte, and the same system.
    assert _warm_turns(second, conversation[:3]) == warm
    raw_first, raw_second = (r["raw"] for r in fake_openai.requests if r["path"].endswith("/v1/messages"))
    block = json.dumps(warm, separators=(",", ":"), ensure_ascii=False).encode()[1:-1]
    assert block in raw_first and block in raw_second
    assert second["system"] == first["system"]

    # Recorded once, in kindling's shape: the system, the task, the call, its failed result, the answer.
    (session,) = list(iter_sessions(db))
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert session.messages[0].content == SYSTEM and session.messages[1].content == task
    (call,) = session.messages[2].tool_calls
    assert (call.name, call.arguments) == ("read_file", {"path": "src/parser.py"})
    result = session.messages[3]
    assert (result.tool_call_id, result.content, result.error) == (call.id, "No such file", True)
    assert session.messages[4].content == "The file is missing; nothing to fix."
    assert find_session(db, session.id) is not None


def test_a_request_without_tools_goes_as_sent_and_keys_stay_where_they_belong(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_template(tmp_path / "templates")
    body = {
        "model": "claude-fake",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Run the tests"}],
    }
    with running_proxy(
        fake_openai.base_url, tmp_path / "a.db", templates=str(tmp_path / "templates")
    ) as proxy:
        _client(proxy.base_url).messages.create(**body)  # type: ignore[call-overload]
        wait_recorded(proxy.base_url)
    request = fake_openai.requests[-1]
    # No tools: the Messages API refuses past tool calls then, so nothing is inserted.
    assert request["body"]["messages"] == body["messages"] and "system" not in request["body"]
    headers = {k.lower(): v for k, v in request["headers"].items()}
    # The client's own key goes upstream as it sent it (SDKs use x-api-key or a bearer token).
    assert "sk-ant-client" in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
    assert "anthropic-version" in headers

    # The proxy holds the upstream key: an Anthropic client may send the proxy's token as its key,
    # and the upstream gets the real key in x-api-key.
    monkeypatch.setenv("UPSTREAM_KEY", "sk-ant-upstream")
    with running_proxy(
        fake_openai.base_url, tmp_path / "b.db", token="proxy-secret", upstream_key_env="UPSTREAM_KEY"
    ) as proxy:
        with pytest.raises(anthropic.AuthenticationError):
            _client(proxy.base_url).messages.create(**body)  # type: ignore[call-overload]
        _client(proxy.base_url, api_key="proxy-secret").messages.create(**body)  # type: ignore[call-overload]
        headers = {k.lower(): v for k, v in fake_openai.requests[-1]["headers"].items()}
        assert headers["x-api-key"] == "sk-ant-upstream" and "authorization" not in headers
        # The token in x-api-key, as other Anthropic clients send their key, is accepted too.
        url = f"{proxy.base_url}/messages"
        sent = {"anthropic-version": "2023-06-01"}
        assert httpx.post(url, json=body, headers={**sent, "x-api-key": "wrong"}).status_code == 401
        assert httpx.post(url, json=body, headers={**sent, "x-api-key": "proxy-secret"}).status_code == 200
        headers = {k.lower(): v for k, v in fake_openai.requests[-1]["headers"].items()}
        assert headers["x-api-key"] == "sk-ant-upstream"


def test_turns_become_kindlings_messages() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    request = {
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is in"}, image]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Look first.", "signature": "sig"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.png"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "terminal", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "PNG"}],
                    },
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "denied", "is_error": True},
                    {"type": "text", "text": "and?"},
                ],
            },
            "not a turn",
        ],
    }
    messages = canonical_messages(request)
    assert messages is not None
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "user", "unknown"]
    assert messages[0]["content"] == "Be brief.\nUse tools."
    assert messages[1]["content"] == "What is in\n[image]"
    reply = messages[2]
    assert (reply["content"], reply["reasoning_content"]) == ("Let me look.", "Look first.")
    assert [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in reply["tool_calls"]
    ] == [
        ("toolu_1", "read_file", {"path": "a.png"}),
        ("toolu_2", "terminal", {}),
    ]
    assert messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "PNG"}
    assert messages[4] == {"role": "tool", "tool_call_id": "toolu_2", "content": "denied", "error": True}
    assert canonical_messages({"messages": "nope"}) is None
    # A reply and the same turn sent back later are the same message, so the prefix hashes match.
    response = {
        "type": "message",
        "role": "assistant",
        "model": "m",
        "stop_reason": "tool_use",
        **request["messages"][1],
    }
    found = reply_of_message(response)
    assert found is not None and found[1:] == ("m", "tool_use")
    sent_back = canonical_turn(json.loads(json.dumps(request["messages"][1], indent=2)))
    assert len(sent_back) == 1
    one, two = PrefixHasher(), PrefixHasher()
    one.feed(found[0])
    two.feed(sent_back[0])
    assert one.digest() == two.digest()


def test_streamed_message_follows_split_events_and_needs_its_stop() -> None:
    def event(kind: str, **data: Any) -> bytes:
        return f"event: {kind}\r\ndata: {json.dumps({'type': kind, **data})}\r\n\r\n".encode()

    stream = b"".join(
        [
            event("message_start", message={"model": "claude-fake", "content": []}),
            event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
            event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Reading "}),
            event("content_block_delta", index=0, delta={"type": "text_delta", "text": "it."}),
            event(
                "content_block_start",
                index=1,
                content_block={"type": "tool_use", "id": "t1", "name": "read_file", "input": {}},
            ),
            event("content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": '{"pa'}),
            event(
                "content_block_delta",
                index=1,
                delta={"type": "input_json_delta", "partial_json": 'th": "x"}'},
            ),
            event("message_delta", delta={"stop_reason": "tool_use"}),
        ]
    )
    reply = StreamedMessage()
    for at in range(0, len(stream), 7):  # events split anywhere, CRLF line endings
        reply.feed(stream[at : at + 7])
    assert not reply.done  # no message_stop yet: a cut-off stream records nothing
    reply.feed(event("message_stop"))
    assert reply.done and (reply.model, reply.finish_reason) == ("claude-fake", "tool_use")
    message = reply.message()
    assert message["content"] == "Reading it."
    assert [(c["id"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] == [
        ("t1", {"path": "x"})
    ]


def test_a_restarted_proxy_repeats_the_stored_turns(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    save_template(tmp_path / "templates")
    db = tmp_path / "proxy.db"
    templates = str(tmp_path / "templates")
    fake_openai.script = [tool_call("read_file", {"path": "src/parser.py"}, "call_1"), text("Done.")]
    sent: list[dict[str, Any]] = [{"role": "user", "content": "Read src/parser.py please"}]
    options: dict[str, Any] = {"model": "claude-fake", "max_tokens": 64, "system": SYSTEM, "tools": TOOLS}
    with running_proxy(fake_openai.base_url, db, templates=templates) as proxy:
        reply = _client(proxy.base_url).messages.create(messages=sent, **options)
    call = reply.content[0]
    assert call.type == "tool_use"
    sent += [
        _turns(reply),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "ok"}]},
    ]
    # A new proxy on the same store (a restart, or a second proxy) knows the conversation and its turns.
    with running_proxy(fake_openai.base_url, db, templates=templates) as proxy:
        _client(proxy.base_url).messages.create(messages=sent, **options)
        wait_recorded(proxy.base_url)
        assert status(proxy.base_url)["continued"] == 1
    first, second = fake_openai.message_requests()
    warm = _warm_turns(first, sent[:1])
    assert warm and _warm_turns(second, sent) == warm and second["system"] == first["system"]
    (session,) = list(iter_sessions(db))
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "tool", "assistant"]


def test_claude_codes_reminders_are_not_the_task() -> None:
    # Claude Code's first turn: reminders of its context, then what the user asked.
    reminder = "<system-reminder>\nCLAUDE.md: run tests with uv run pytest; be terse.\n</system-reminder>"
    request = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": reminder},
                    {"type": "text", "text": "Find the tokenizer bug in src/parser.py"},
                ],
            }
        ]
    }
    messages = canonical_messages(request)
    assert messages is not None and reminder in messages[0]["content"]  # recorded as sent
    assert find_task(messages) == "Find the tokenizer bug in src/parser.py"
    session = Session("cc", "proxy", (Message("user", messages[0]["content"]),))
    assert opening_request(session) == "Find the tokenizer bug in src/parser.py"
    only_notes = Session(
        "cc2", "proxy", (Message("user", reminder), Message("user", "Now fix the failing parser test"))
    )
    assert opening_request(only_notes) == "Now fix the failing parser test"

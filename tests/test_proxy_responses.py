"""The proxy with the official openai client's Responses API in front and the fake server behind it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter
from typer.testing import CliRunner

from fake_openai import FakeOpenAI, text, tool_call, tool_calls
from kindling.cli.main import app
from kindling.proxy import responses
from kindling.proxy.identity import PrefixHasher
from kindling.proxy.responses import StreamedResponse, canonical_messages, reply_of_response
from kindling.sessions import iter_sessions
from kindling.warmup.build import FRAME_END, FRAME_INTRO
from proxy_support import running_proxy, save_template, status, wait_recorded

INSTRUCTIONS = "You are a careful coding agent."
# Function tools are flat in the Responses API; a hosted tool has no name to warm with.
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": name,
        "description": f"The {name} tool.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        "strict": False,
    }
    for name in ("read_file", "terminal")
] + [{"type": "web_search"}]
OFFERED = {"read_file", "terminal"}


def _client(base_url: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=base_url, api_key="sk-client", default_headers=headers or None, max_retries=0
    )


def _completed(raw: bytes) -> dict[str, Any]:
    """The whole response a raw event stream ends with (read independently of the proxy)."""
    for line in raw.decode().splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            if event["type"] == "response.completed":
                return dict(event["response"])
    raise AssertionError("the stream has no response.completed event")


def _ask(client: openai.OpenAI, fake: FakeOpenAI, stream: bool, **options: Any) -> Any:
    """One responses.create call; the reply bytes the client got must be the upstream's."""
    options = {"model": "gpt-fake", **options}
    if not stream:
        raw = client.responses.with_raw_response.create(**options)
        assert raw.http_response.content == fake.responses[-1]
        return raw.parse()
    events = list(client.responses.create(stream=True, **options))
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    return events[-1].response


def _echo(response: Any) -> list[dict[str, Any]]:
    """A response's output items as a client sends them back in its next input."""
    return [item.model_dump(exclude_none=True) for item in response.output]


def _warm_items(upstream: dict[str, Any], sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items the proxy inserted: what the upstream got before the client's own input."""
    items = upstream["input"]
    assert items[len(items) - len(sent) :] == sent, "the client's items must follow the warm-up unchanged"
    return items[: len(items) - len(sent)]


def _check_warm_items(warm: list[dict[str, Any]]) -> None:
    """Framed as past examples, only offered tools, each call followed by its output (same call_id),
    each item of a shape the API's own types accept."""
    TypeAdapter(ResponseInputParam).validate_python(warm)
    assert warm[0]["type"] == "message" and warm[0]["role"] == "user"
    assert warm[0]["content"].startswith(FRAME_INTRO)
    assert warm[-1]["role"] == "assistant" and warm[-1]["content"].endswith(FRAME_END)
    calls = [item for item in warm if item["type"] == "function_call"]
    assert calls and {call["name"] for call in calls} <= OFFERED  # never web_search, never offered
    open_calls: set[str] = set()
    for item in warm:
        assert item["type"] in ("message", "function_call", "function_call_output")
        if item["type"] == "function_call":
            assert set(item) == {"type", "call_id", "name", "arguments"}
            json.loads(item["arguments"])
            open_calls.add(item["call_id"])
        elif item["type"] == "function_call_output":
            assert item["call_id"] in open_calls
            open_calls.remove(item["call_id"])
        else:
            assert not open_calls, "a call's output must come before the next message"
    assert not open_calls


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_whole_history_conversation_is_recorded_once_and_warmed_with_the_same_items(
    fake_openai: FakeOpenAI, tmp_path: Path, stream: bool
) -> None:
    # As Codex and the Agents SDK do by default: every request sends the whole history back.
    save_template(tmp_path / "templates")
    db = tmp_path / "proxy.db"
    task = "Find the tokenizer bug in src/parser.py"
    fake_openai.script = [
        {**tool_call("read_file", {"path": "src/parser.py"}, "call_read_1"), "reasoning": "Read it first."},
        tool_calls(
            ("terminal", {"cmd": "pytest -q"}, "call_run_1"), ("read_file", {"path": "a.py"}, "call_r2")
        ),
        text("The tokenizer skips the last token."),
    ]
    sent: list[dict[str, Any]] = [{"role": "user", "content": task}]
    with running_proxy(fake_openai.base_url, db, templates=str(tmp_path / "templates")) as proxy:
        client = _client(proxy.base_url)
        sizes = []
        for turn in range(3):
            reply = _ask(client, fake_openai, stream, instructions=INSTRUCTIONS, input=sent, tools=TOOLS)
            sizes.append(len(sent))
            sent = [*sent, *_echo(reply)]
            for item in reply.output:
                if item.type == "function_call":
                    output = "No such file" if turn == 0 else f"output of {item.call_id}"
                    sent.append({"type": "function_call_output", "call_id": item.call_id, "output": output})
        assert reply.output_text == "The tokenizer skips the last token."
        wait_recorded(proxy.base_url)
        counts = status(proxy.base_url)
    assert (counts["conversations"], counts["warmed"], counts["continued"], counts["replies"]) == (1, 1, 2, 3)

    # Upstream, the warm-up goes before the user's item, and every request carries the same bytes.
    requests = fake_openai.response_requests()
    warm = _warm_items(requests[0], sent[:1])
    _check_warm_items(warm)
    assert requests[0]["instructions"] == INSTRUCTIONS and requests[0]["tools"] == TOOLS
    for request, size in zip(requests[1:], sizes[1:], strict=True):
        assert _warm_items(request, sent[:size]) == warm
    raws = [r["raw"] for r in fake_openai.requests if r["path"].endswith("/v1/responses")]
    block = json.dumps(warm, separators=(",", ":"), ensure_ascii=False).encode()[1:-1]
    assert all(block in raw for raw in raws)

    # Recorded once, in kindling's shape: instructions, the task, each reply with its calls, each
    # call's output paired with it, the answer; the reasoning summary kept, the warm-up never.
    (session,) = list(iter_sessions(db))
    roles = [m.role for m in session.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
    assert session.messages[0].content == INSTRUCTIONS and session.messages[1].content == task
    first = session.messages[2]
    assert first.reasoning == "Read it first."
    ((call_id, name, arguments),) = [(c.id, c.name, c.arguments) for c in first.tool_calls]
    assert (call_id, name, arguments) == ("call_read_1", "read_file", {"path": "src/parser.py"})
    assert (session.messages[3].tool_call_id, session.messages[3].content) == ("call_read_1", "No such file")
    assert [c.id for c in session.messages[4].tool_calls] == ["call_run_1", "call_r2"]
    assert [m.tool_call_id for m in session.messages[5:7]] == ["call_run_1", "call_r2"]
    assert session.messages[7].content == "The tokenizer skips the last token."
    assert session.model == "gpt-fake" and session.metadata["warm"] == "on"

    # Mining reads it like a chat: three calls, each paired with its result.
    figures = CliRunner().invoke(app, ["stats", str(db), "--json"])
    assert figures.exit_code == 0, figures.output
    stats = json.loads(figures.stdout)
    assert (stats["sessions"], stats["tool_calls"], stats["results_paired"]) == (1, 3, 3)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_previous_response_id_chain_is_one_conversation(
    fake_openai: FakeOpenAI, tmp_path: Path, stream: bool
) -> None:
    save_template(tmp_path / "templates")
    db = tmp_path / "proxy.db"
    templates = str(tmp_path / "templates")
    fake_openai.script = [
        tool_call("read_file", {"path": "src/parser.py"}, "call_read_1"),
        text("Found it."),
        {"fault": "status", "status": 500},
        text("You are welcome."),
        text("Unrelated."),
        text("Still here."),
    ]
    options: dict[str, Any] = {"instructions": INSTRUCTIONS, "tools": TOOLS}
    with running_proxy(fake_openai.base_url, db, templates=templates) as proxy:
        client = _client(proxy.base_url)
        first = _ask(client, fake_openai, stream, input="Read src/parser.py please", **options)
        (call,) = [item for item in first.output if item.type == "function_call"]
        # Later turns send only their new items and the id of the response before.
        output = [{"type": "function_call_output", "call_id": call.call_id, "output": "def tokenize(): ..."}]
        second = _ask(client, fake_openai, stream, input=output, previous_response_id=first.id, **options)
        # A turn the upstream failed, sent again: recorded once, where it belongs.
        with pytest.raises(openai.InternalServerError):
            _ask(client, fake_openai, stream, input="thanks", previous_response_id=second.id, **options)
        third = _ask(client, fake_openai, stream, input="thanks", previous_response_id=second.id, **options)
        # A response the proxy never saw: a conversation of its own, never warmed, never an error.
        _ask(client, fake_openai, stream, input="go on", previous_response_id="resp_elsewhere", **options)
        wait_recorded(proxy.base_url)
        counts = status(proxy.base_url)
    assert (counts["conversations"], counts["warmed"], counts["continued"]) == (2, 1, 3)
    # A restarted proxy (or a second one on the store) still knows where the chain is.
    with running_proxy(fake_openai.base_url, db, templates=templates) as proxy:
        _ask(
            _client(proxy.base_url),
            fake_openai,
            stream,
            input="bye",
            previous_response_id=third.id,
            **options,
        )
        wait_recorded(proxy.base_url)
        assert status(proxy.base_url)["continued"] == 1

    requests = fake_openai.response_requests()
    _check_warm_items(
        _warm_items(
            requests[0], [{"type": "message", "role": "user", "content": "Read src/parser.py please"}]
        )
    )
    # The upstream keeps the warm-up with the first response: later turns go as the client sent them.
    sent_later = [r["raw"] for r in fake_openai.requests if r["path"].endswith("/v1/responses")][1:]
    assert [r["input"] for r in requests[1:]] == [output, "thanks", "thanks", "go on", "bye"]
    assert all(b"Past request" not in raw for raw in sent_later)
    assert requests[1]["previous_response_id"] == first.id

    sessions = {s.messages[1].content: s for s in iter_sessions(db)}
    chain = sessions["Read src/parser.py please"]
    assert [(m.role, m.content) for m in chain.messages if not m.tool_calls] == [
        ("system", INSTRUCTIONS),
        ("user", "Read src/parser.py please"),
        ("tool", "def tokenize(): ..."),
        ("assistant", "Found it."),
        ("user", "thanks"),
        ("assistant", "You are welcome."),
        ("user", "bye"),
        ("assistant", "Still here."),
    ]
    assert chain.messages[3].tool_call_id == chain.messages[2].tool_calls[0].id == "call_read_1"
    alone = sessions["go on"]
    assert [(m.role, m.content) for m in alone.messages] == [
        ("system", INSTRUCTIONS),
        ("user", "go on"),
        ("assistant", "Unrelated."),
    ]
    assert alone.metadata["warm"] == "off"


def test_a_conversation_object_is_one_recorded_conversation(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    fake_openai.script = [text("One."), text("Two.")]
    with running_proxy(fake_openai.base_url, db, templates=str(tmp_path / "none")) as proxy:
        client = _client(proxy.base_url)
        for words in ("first", "second"):
            client.responses.create(model="gpt-fake", input=words, conversation="conv_123", tools=TOOLS)
        wait_recorded(proxy.base_url)
    (session,) = list(iter_sessions(db))
    assert [m.content for m in session.messages] == ["first", "One.", "second", "Two."]


def test_kindlings_failures_forward_the_bytes_and_upstream_errors_pass_through(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    save_template(tmp_path / "templates")
    body = b'{"model": "gpt-fake",  "input": "Run the tests",\n "tools": ' + json.dumps(TOOLS).encode() + b"}"
    streamed = body[:-1] + b', "stream": true}'

    def broken(data: Any) -> Any:
        raise RuntimeError("conversion broke")

    fake_openai.script = [
        {"fault": "status", "status": 429, "headers": {"retry-after": "7"}},
        {"fault": "malformed"},
        text("Ran them."),
        text("Streamed."),
    ]
    with running_proxy(
        fake_openai.base_url, tmp_path / "a.db", templates=str(tmp_path / "templates")
    ) as proxy:
        url = f"{proxy.base_url}/responses"
        with pytest.raises(openai.RateLimitError) as limited:
            _client(proxy.base_url).responses.create(model="gpt-fake", input="hi")
        assert limited.value.response.headers["retry-after"] == "7"
        assert limited.value.response.content == b'{"error": {"message": "scripted 429"}}'
        json_body = {"content-type": "application/json"}
        answer = httpx.post(url, content=body, headers=json_body)
        assert (answer.status_code, answer.content) == (200, b"{this is not json")  # passed on, not recorded
        monkeypatch.setattr(responses, "canonical_messages", broken)
        answer = httpx.post(url, content=body, headers=json_body)
        assert answer.content == fake_openai.responses[-1]
        with httpx.stream("POST", url, content=streamed, headers=json_body) as events:
            assert b"".join(events.iter_raw()) == fake_openai.responses[-1]
        wait_recorded(proxy.base_url)
    # The warm-up failed with the conversion: the upstream got the client's very bytes, both times.
    assert [r["raw"] for r in fake_openai.requests[-2:]] == [body, streamed]
    assert any("conversion broke" in r.getMessage() for r in caplog.records)
    # The requests kindling read are recorded (with no reply where there was none to record).
    recorded = sorted([m.content for m in s.messages] for s in iter_sessions(tmp_path / "a.db"))
    assert recorded == [["Run the tests"], ["hi"]]


def test_items_become_kindlings_messages() -> None:
    request = {
        "instructions": "Be brief.",
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "Use tools."}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is in"},
                    {"type": "input_image", "image_url": "x"},
                ],
            },
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look."}]},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "c1",
                "name": "read_file",
                "arguments": '{"path": "a"}',
            },
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [{"type": "input_text", "text": "PNG"}],
            },
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "applied"},
            {"type": "item_reference", "id": "msg_0"},
            "and?",
            7,
        ],
    }
    messages = canonical_messages(request)
    assert messages is not None
    assert [m["role"] for m in messages] == [
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "unknown",
    ]
    assert messages[0]["content"] == "Be brief." and messages[1]["content"] == "Use tools."
    assert messages[2]["content"] == "What is in\n[image]"
    reply = messages[3]
    assert (reply["content"], reply["reasoning_content"]) == ("Let me look.", "Look.")
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in reply["tool_calls"]] == [
        ("c1", "read_file", '{"path": "a"}'),
        ("c2", "apply_patch", "*** Begin Patch"),
    ]
    assert messages[4] == {"role": "tool", "tool_call_id": "c1", "content": "PNG"}
    assert messages[5] == {"role": "tool", "tool_call_id": "c2", "content": "applied"}
    assert canonical_messages({"input": 3}) is None and canonical_messages({"prompt": {"id": "p"}}) is None
    assert responses.tool_names(TOOLS) == ["read_file", "terminal"]

    # A response and its output sent back later are the same message, so the prefix hashes match.
    output = request["input"][2:7]
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "m", "output": output}
    found = reply_of_response(response)
    assert found is not None and found[1:] == ("m", "tool_calls")
    echoed = canonical_messages({"input": json.loads(json.dumps(output, indent=2))})
    assert echoed is not None and len(echoed) == 1
    one, two = PrefixHasher(), PrefixHasher()
    one.feed(found[0])
    two.feed(echoed[0])
    assert one.digest() == two.digest()
    # A response that is not finished (background mode, failed) is no reply to record.
    assert reply_of_response({**response, "status": "queued"}) is None
    assert reply_of_response(
        {
            **response,
            "status": "incomplete",
            "output": [],
            "incomplete_details": {"reason": "max_output_tokens"},
        }
    ) == (
        {"role": "assistant", "content": None},
        "m",
        "length",
    )


def test_streamed_response_waits_for_its_completion() -> None:
    def event(kind: str, **data: Any) -> bytes:
        return f"event: {kind}\r\ndata: {json.dumps({'type': kind, **data})}\r\n\r\n".encode()

    done = {
        "id": "resp_9",
        "object": "response",
        "status": "completed",
        "model": "gpt-fake",
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]}
        ],
    }
    stream = b"".join(
        [
            event("response.created", response={**done, "status": "in_progress", "output": []}),
            event(
                "response.output_text.delta",
                item_id="m",
                output_index=0,
                content_index=0,
                delta="response.completed",
            ),
            event("response.output_item.done", output_index=0, item=done["output"][0]),
        ]
    )
    reply = StreamedResponse()
    for at in range(0, len(stream), 7):  # events split anywhere, CRLF line endings
        reply.feed(stream[at : at + 7])
    assert not reply.done  # no response.completed yet (a delta that merely says so does not count)
    failed = StreamedResponse()
    failed.feed(stream + event("response.failed", response={**done, "status": "failed"}))
    assert not failed.done
    reply.feed(event("response.completed", response=done))
    assert reply.done and (reply.response_id, reply.model, reply.finish_reason) == (
        "resp_9",
        "gpt-fake",
        "stop",
    )
    assert reply.message() == {"role": "assistant", "content": "Hi."}

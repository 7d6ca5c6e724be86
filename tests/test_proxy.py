"""The proxy with the official openai client in front and the fake OpenAI server behind it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from typer.testing import CliRunner

from fake_openai import FakeOpenAI, text, tool_call, tool_calls
from kindling.cli.main import app
from kindling.errors import ConfigError
from kindling.proxy import ProxySettings
from kindling.sessions import find_session, iter_sessions
from proxy_support import (
    TOOLS,
    message_of_stream,
    running_proxy,
    save_template,
    status,
    wait_recorded,
)

SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
JSON = {"content-type": "application/json"}


def _client(base_url: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=base_url, api_key="sk-client", default_headers=headers or None, max_retries=0
    )


def _sessions_json(db: str | Path) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["sessions", str(db), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _show(db: str | Path, session_id: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["sessions", str(db), "--show", session_id, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _real(message: dict[str, Any]) -> dict[str, Any]:
    """The parts of a message kindling's canonical model keeps."""
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": c["id"],
                "name": c["function"]["name"],
                "arguments": json.loads(c["function"]["arguments"]),
            }
            for c in message["tool_calls"]
        ]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _headers(fake: FakeOpenAI) -> dict[str, str]:
    return {name.lower(): value for name, value in fake.requests[-1]["headers"].items()}


def _non_streaming_conversation(client: openai.OpenAI, fake: FakeOpenAI, task: str) -> list[dict[str, Any]]:
    """Three requests: a tool call, a second (parallel) call after its result, then a text answer."""
    fake.script = [
        tool_call("read_file", {"path": "src/parser.py"}, "call_read_1"),
        tool_calls(
            ("terminal", {"cmd": "pytest -q"}, "call_run_1"),
            ("read_file", {"path": "setup.cfg"}, "call_read_2"),
        ),
        text("The tokenizer skips the last token; fixed and the tests pass."),
    ]
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": task}]
    for turn in range(3):
        raw = client.chat.completions.with_raw_response.create(
            model="fake-model", messages=messages, tools=TOOLS
        )
        assert raw.http_response.content == fake.responses[-1]  # byte for byte what the upstream sent
        reply = raw.parse().choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls or ():
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": f"result of {call.id} ({turn})"}
            )
    return messages


def _streaming_conversation(client: openai.OpenAI, fake: FakeOpenAI, task: str) -> list[dict[str, Any]]:
    fake.script = [
        tool_call("terminal", {"cmd": "pytest -q tests/test_parser.py"}, "call_s_1"),
        tool_calls(("read_file", {"path": "a.py"}, "call_s_2"), ("read_file", {"path": "b.py"}, "call_s_3")),
        text("Both files define the tokenizer; the failing test is in a.py."),
    ]
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": task}]
    for _ in range(3):
        with client.chat.completions.with_streaming_response.create(
            model="fake-model", messages=messages, tools=TOOLS, stream=True
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            raw = b"".join(response.iter_bytes())
        assert raw == fake.responses[-1]
        reply = message_of_stream(raw)
        messages.append(reply)
        for call in reply.get("tool_calls") or ():
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": f"output of {call['id']}"}
            )
    return messages


def _warm_prefix(raw_bodies: list[bytes], warm_block: bytes) -> int:
    """Where the warm block ends in every upstream body; asserts every body starts with the same bytes there."""
    inner = warm_block[1:-1]
    position = raw_bodies[0].find(inner)
    assert position > 0
    end = position + len(inner)
    for raw in raw_bodies:
        assert raw[:end] == raw_bodies[0][:end]
    return end


def _stored_warm_blocks(db: Path) -> dict[str, bytes | None]:
    import sqlalchemy as sa

    from kindling.db import create_engine

    engine = create_engine(db)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT id, warm_block FROM proxy_sessions")).all()
    finally:
        engine.dispose()
    return {row[0]: row[1].encode() if row[1] else None for row in rows}


def test_conversations_round_trip_warm_once_and_are_recorded_once(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    save_template(tmp_path / "templates")
    db = tmp_path / "proxy.db"
    with running_proxy(fake_openai.base_url, db, templates=str(tmp_path / "templates")) as proxy:
        client = _client(proxy.base_url)
        plain = _non_streaming_conversation(client, fake_openai, "Find the tokenizer bug in src/parser.py")
        plain_upstream = [r["raw"] for r in fake_openai.requests]
        streamed = _streaming_conversation(
            client, fake_openai, "Run the parser tests and read the failing files"
        )
        streamed_upstream = [r["raw"] for r in fake_openai.requests[3:]]
        wait_recorded(proxy.base_url)
        counts = status(proxy.base_url)
        assert (counts["conversations"], counts["warmed"], counts["continued"], counts["replies"]) == (
            2,
            2,
            4,
            6,
        )

    # The first upstream request carries the warm-up right after the system message ...
    first = fake_openai.chat_requests()[0]["messages"]
    assert first[0] == SYSTEM
    assert first[-1] == {"role": "user", "content": "Find the tokenizer bug in src/parser.py"}
    injected = first[1:-1]
    assert injected, "no warm-up was inserted"
    offered = {tool["function"]["name"] for tool in TOOLS}
    shown_tools = {c["function"]["name"] for m in injected for c in m.get("tool_calls") or ()}
    assert shown_tools and shown_tools <= offered  # never a tool the agent was not offered (web_search)
    # ... and every later request of the conversation the identical bytes at the same place.
    blocks = _stored_warm_blocks(db)
    assert len(blocks) == 2 and all(blocks.values())
    for bodies in (plain_upstream, streamed_upstream):
        matching = [b for b in blocks.values() if b is not None and b[1:-1] in bodies[0]]
        assert len(matching) == 1
        _warm_prefix(bodies, matching[0])
    # The rest of each upstream request is exactly what the client sent.
    for request, sent in zip(fake_openai.chat_requests()[1:3], (plain[:4], plain[:7]), strict=True):
        assert [m for m in request["messages"] if m not in injected] == sent

    # `kindling sessions` shows each conversation once, every real message, no injected one.
    counts = _sessions_json(db)
    assert counts["sessions"] == 2
    assert counts["messages"] == len(plain) + len(streamed)
    assert counts["tool_calls"] == 6 and counts["tool_results"] == 6
    assert counts["skipped"] == {}
    sessions = {s.messages[1].content: s for s in iter_sessions(db)}
    for conversation in (plain, streamed):
        session = sessions[conversation[1]["content"]]
        shown = _show(db, session.id)
        assert [_real(m) for m in shown["messages"]] == [_real(m) for m in conversation]
        assert session.model == "fake-model" and session.source == "proxy"
        assert session.metadata["warm"] == "on"

    # A source for stats and build like any other.
    stats = CliRunner().invoke(app, ["stats", str(db), "--json"])
    assert stats.exit_code == 0, stats.output
    figures = json.loads(stats.stdout)
    assert (figures["sessions"], figures["tool_calls"], figures["results_paired"]) == (2, 6, 6)
    built = CliRunner().invoke(app, ["build", "recorded", str(db), "--min-messages", "1", "--json"])
    assert built.exit_code == 0, built.output
    summary = json.loads(built.stdout)
    assert summary["read"]["messages"] == len(plain) + len(streamed)  # no injected message mined
    assert summary["template"]["tools"] == ["read_file", "terminal"]


def test_no_warm_header_off_and_explicit_session(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    save_template(tmp_path / "templates")
    db = tmp_path / "proxy.db"
    task = {"role": "user", "content": "Run the unit tests for the parser"}
    with running_proxy(fake_openai.base_url, db, templates=str(tmp_path / "templates")) as proxy:
        # X-Kindling-Warm: off skips this conversation, on its later requests too.
        off = _client(proxy.base_url, **{"X-Kindling-Warm": "off"})
        reply = off.chat.completions.create(model="fake-model", messages=[SYSTEM, task], tools=TOOLS)
        later = [
            SYSTEM,
            task,
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": "ok"},
        ]
        _client(proxy.base_url).chat.completions.create(model="fake-model", messages=later, tools=TOOLS)
        # An explicit session id groups requests that do not extend each other.
        named = _client(proxy.base_url, **{"X-Kindling-Session": "my-run-7"})
        named.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "first"}])
        named.chat.completions.create(
            model="fake-model",
            messages=[
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "Done."},
                {"role": "user", "content": "second"},
            ],
        )
        wait_recorded(proxy.base_url)
    bodies = fake_openai.chat_requests()
    assert bodies[0]["messages"] == [SYSTEM, task]
    assert bodies[1]["messages"] == later
    counts = _sessions_json(db)
    assert counts["sessions"] == 2
    named_session = find_session(db, "my-run-7")
    assert [m.content for m in named_session.messages] == ["first", "Done.", "second", "Done."]

    fake_openai.requests.clear()
    with running_proxy(
        fake_openai.base_url, tmp_path / "other.db", warm=False, templates=str(tmp_path / "templates")
    ) as proxy:
        _client(proxy.base_url).chat.completions.create(
            model="fake-model", messages=[SYSTEM, task], tools=TOOLS
        )
        wait_recorded(proxy.base_url)
    assert fake_openai.chat_requests()[0]["messages"] == [SYSTEM, task]  # --no-warm: records only
    assert _sessions_json(tmp_path / "other.db")["messages"] == 3


def test_upstream_errors_and_other_paths_pass_through(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.script = [
        {"fault": "status", "status": 429, "headers": {"retry-after": "7"}},
        {"fault": "status", "status": 500},
    ]
    with running_proxy(fake_openai.base_url, tmp_path / "proxy.db") as proxy:
        with httpx.Client(base_url=proxy.base_url) as http:
            limited = http.post(
                "/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "x"}]}
            )
            assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
            assert limited.json() == {"error": {"message": "scripted 429"}}
            streamed = http.post(
                "/chat/completions",
                json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "y"}]},
            )
            assert streamed.status_code == 500 and streamed.json() == {"error": {"message": "scripted 500"}}
            assert http.post("/embeddings", json={"input": "x"}).status_code == 404  # the upstream's answer
            not_json = http.post(
                "/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
            )
            assert not_json.status_code == 200  # forwarded unchanged; the fake answers anything
        models = _client(proxy.base_url).models.list()
        assert [m.id for m in models.data] == ["fake-model"]
        assert fake_openai.requests[-1]["path"] == "/v1/models"
        assert fake_openai.requests[-2]["raw"] == b"{not json"
    gone_upstream = fake_openai.base_url
    fake_openai.stop()
    with running_proxy(gone_upstream, tmp_path / "proxy.db") as proxy:
        gone = httpx.post(f"{proxy.base_url}/chat/completions", json={"model": "m", "messages": []})
        assert gone.status_code == 502 and "cannot reach the upstream" in gone.json()["error"]["message"]


def test_authorization_and_token(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with running_proxy(fake_openai.base_url, tmp_path / "a.db") as proxy:
        _client(proxy.base_url).chat.completions.create(**body)
    assert _headers(fake_openai)["authorization"] == "Bearer sk-client"

    monkeypatch.setenv("UPSTREAM_KEY", "sk-upstream")
    with running_proxy(
        fake_openai.base_url, tmp_path / "b.db", token="proxy-secret", upstream_key_env="UPSTREAM_KEY"
    ) as proxy:
        with pytest.raises(openai.AuthenticationError):
            _client(proxy.base_url).chat.completions.create(**body)
        assert httpx.get(f"{proxy.base_url.removesuffix('/v1')}/kindling/status").status_code == 401
        _client(proxy.base_url, **{"X-Kindling-Token": "proxy-secret"}).chat.completions.create(**body)
        sent = _headers(fake_openai)
        assert sent["authorization"] == "Bearer sk-upstream"
        assert not any(name.startswith("x-kindling") for name in sent)
        # The proxy holds the upstream key, so the client may send the proxy token as its API key.
        openai.OpenAI(base_url=proxy.base_url, api_key="proxy-secret", max_retries=0).chat.completions.create(
            **body
        )
        assert _headers(fake_openai)["authorization"] == "Bearer sk-upstream"

    with pytest.raises(ConfigError, match="without a token"):
        ProxySettings.resolve(fake_openai.base_url, host="0.0.0.0")
    monkeypatch.setenv("KINDLING_PROXY_TOKEN", "t")
    assert ProxySettings.resolve(fake_openai.base_url, host="0.0.0.0").token == "t"
    with pytest.raises(ConfigError, match="not set"):
        ProxySettings.resolve(fake_openai.base_url, upstream_key_env="NO_SUCH_VARIABLE_HERE")


def test_store_down_calls_succeed_and_nothing_is_lost_when_it_returns(
    fake_openai: FakeOpenAI, pg_url: str, tmp_path: Path
) -> None:
    import psycopg

    from conftest import PG_ADMIN_URL

    later = pg_url + "_later"  # a database that does not exist yet: the store is down
    fake_openai.script = [tool_call("terminal", {"cmd": "ls"}, "call_down_1"), text("Listed.")]
    try:
        with running_proxy(fake_openai.base_url, later, token="tok") as proxy:
            # The proxy cannot read the tenants' tokens: only its own --token gets through (fail closed).
            unknown = httpx.post(f"{proxy.base_url}/chat/completions", json={"model": "m", "messages": []})
            assert unknown.status_code == 401
            client = _client(proxy.base_url, **{"X-Kindling-Token": "tok"})
            messages: list[dict[str, Any]] = [{"role": "user", "content": "list the files"}]
            reply = client.chat.completions.create(model="fake-model", messages=messages, tools=TOOLS)
            messages += [
                reply.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": "call_down_1", "content": "a.py b.py"},
            ]
            stream = client.chat.completions.create(
                model="fake-model", messages=messages, tools=TOOLS, stream=True
            )
            assert "".join(c.choices[0].delta.content or "" for c in stream) == "Listed."
            down = status(proxy.base_url, {"x-kindling-token": "tok"})["recorder"]
            assert down["store_state"] == "down" and down["pending"] >= 3 and down["written"] == 0
            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{later.rsplit("/", 1)[1]}"')
            wait_recorded(proxy.base_url, headers={"x-kindling-token": "tok"})
        counts = _sessions_json(later)
        assert (counts["sessions"], counts["messages"], counts["tool_calls"], counts["tool_results"]) == (
            1,
            4,
            1,
            1,
        )
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{later.rsplit("/", 1)[1]}" WITH (FORCE)')


def test_two_proxies_share_postgresql(fake_openai: FakeOpenAI, pg_url: str) -> None:
    conversations = 6
    with (
        running_proxy(fake_openai.base_url, pg_url, warm=False) as first,
        running_proxy(fake_openai.base_url, pg_url, warm=False) as second,
    ):
        errors: list[BaseException] = []

        def converse(index: int) -> None:
            try:
                messages: list[dict[str, Any]] = [{"role": "user", "content": f"task number {index}"}]
                for turn in range(3):
                    proxy = (first, second)[(index + turn) % 2] if index == 0 else (first, second)[index % 2]
                    if index == 0 and turn:
                        wait_recorded(first.base_url)
                        wait_recorded(second.base_url)
                    reply = _client(proxy.base_url).chat.completions.create(
                        model="fake-model", messages=messages
                    )
                    messages += [
                        reply.choices[0].message.model_dump(exclude_none=True),
                        {"role": "user", "content": f"next {turn} of {index}"},
                    ]
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=converse, args=(i,)) for i in range(conversations)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        wait_recorded(first.base_url)
        wait_recorded(second.base_url)
    counts = _sessions_json(pg_url)
    # Conversation 0 alternated between the proxies and is still one session.
    assert counts["sessions"] == conversations
    assert counts["messages"] == conversations * 6
    for session in iter_sessions(pg_url):
        index = session.messages[0].content.rsplit(" ", 1)[1]  # type: ignore[union-attr]
        assert [m.content for m in session.messages] == [
            f"task number {index}",
            "Done.",
            f"next 0 of {index}",
            "Done.",
            f"next 1 of {index}",
            "Done.",
        ]


def test_canonical_prefix_ignores_how_a_client_re_serializes_a_reply() -> None:
    from kindling.proxy.identity import PrefixHasher, canonical_message

    sent = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}],
    }
    echoed = {
        "tool_calls": [{"function": {"arguments": "{ }", "name": "t"}, "id": "c1"}],
        "role": "assistant",
        "content": "",
        "refusal": None,
    }
    assert canonical_message(sent) == canonical_message(echoed)
    assert canonical_message({"role": "user", "content": "a"}) != canonical_message(
        {"role": "user", "content": "b"}
    )
    first, second = PrefixHasher(), PrefixHasher()
    for hasher, messages in (
        (first, [{"role": "user", "content": "ab"}, {"role": "user", "content": "c"}]),
        (second, [{"role": "user", "content": "a"}, {"role": "user", "content": "bc"}]),
    ):
        for message in messages:
            hasher.feed(message)
    assert first.digest() != second.digest()


def test_streamed_reply_follows_split_events_and_both_line_endings() -> None:
    from kindling.proxy.reply import StreamedReply

    events = (
        b'data: {"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}\r\n\r\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"lo","tool_calls":[{"index":0,"id":"c9","function":{"name":"ter","arguments":"{\\"a\\""}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"minal","arguments":": 1}"}}]}}]}\n\n'
        b": keep-alive comment\n\n"
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    reply = StreamedReply()
    for start in range(0, len(events), 7):  # arbitrary chunk boundaries, mid-line and mid-event
        reply.feed(events[start : start + 7])
    assert reply.done and reply.model == "m" and reply.finish_reason == "tool_calls"
    assert reply.message() == {
        "role": "assistant",
        "content": "Hello",
        "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "terminal", "arguments": '{"a": 1}'}}
        ],
    }
    cut = StreamedReply()
    cut.feed(events[:60])
    assert not cut.done


def test_recorder_queue_is_bounded_and_counts_what_it_drops(tmp_path: Path) -> None:
    from kindling.proxy.recorder import ProxyStore, Recorder, Write

    recorder = Recorder(ProxyStore(tmp_path / "r.db"), capacity=3)  # not started: nothing drains
    accepted = [recorder.submit(Write(f"s{i}", float(i))) for i in range(5)]
    assert accepted == [True, True, True, False, False]
    assert recorder.status()["pending"] == 3 and recorder.status()["dropped"] == 2


def test_create_app_refuses_an_open_relay_however_settings_are_built(tmp_path: Path) -> None:
    from kindling.proxy import create_app

    with pytest.raises(ConfigError, match="never an open relay"):
        create_app(ProxySettings(upstream="http://127.0.0.1:9/v1", host="0.0.0.0", db=str(tmp_path / "p.db")))


def test_a_restarted_proxy_repeats_the_stored_warm_up_and_a_warm_up_error_forwards_unchanged(
    fake_openai: FakeOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    save_template(tmp_path / "templates")
    db = tmp_path / "proxy.db"
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Read src/parser.py please"}]
    with running_proxy(fake_openai.base_url, db, templates=str(tmp_path / "templates")) as proxy:
        reply = _client(proxy.base_url).chat.completions.create(
            model="fake-model", messages=messages, tools=TOOLS
        )
    messages += [
        reply.choices[0].message.model_dump(exclude_none=True),
        {"role": "user", "content": "thanks"},
    ]
    # A new proxy on the same store (a restart, or a second proxy) knows the conversation and its bytes.
    with running_proxy(fake_openai.base_url, db, templates=str(tmp_path / "templates")) as proxy:
        _client(proxy.base_url).chat.completions.create(model="fake-model", messages=messages, tools=TOOLS)
        assert status(proxy.base_url)["continued"] == 1
    (block,) = _stored_warm_blocks(db).values()
    assert block is not None
    _warm_prefix([r["raw"] for r in fake_openai.requests], block)

    fake_openai.requests.clear()
    with running_proxy(
        fake_openai.base_url, tmp_path / "other.db", templates=str(tmp_path / "templates"), template="missing"
    ) as proxy:
        sent = {"model": "fake-model", "messages": messages[:2], "tools": TOOLS}
        assert httpx.post(f"{proxy.base_url}/chat/completions", json=sent).status_code == 200
    assert fake_openai.requests[-1]["body"] == sent  # forwarded unwarmed
    assert any("warm-up failed" in r.getMessage() for r in caplog.records)


def test_detecting_a_proxy_store_leaves_a_hermes_database_untouched(tmp_path: Path) -> None:
    import sqlite3

    from kindling.sessions import detect_format, generate_sample_db

    hermes = tmp_path / "state.db"
    generate_sample_db(hermes, sessions=3)
    with sqlite3.connect(hermes) as db:
        db.execute("PRAGMA journal_mode=DELETE")
    before = hermes.read_bytes()
    assert detect_format(hermes) == "hermes"
    assert hermes.read_bytes() == before and not (tmp_path / "state.db-wal").exists()


def test_proxy_status_command(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    with running_proxy(fake_openai.base_url, tmp_path / "p.db", token="tok") as proxy:
        _client(proxy.base_url, **{"X-Kindling-Token": "tok"}).chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}]
        )
        wait_recorded(proxy.base_url, headers={"x-kindling-token": "tok"})
        from kindling.sessions import detect_format

        assert detect_format(tmp_path / "p.db") == "proxy"  # while the proxy has it open (a live WAL)
        runner = CliRunner()
        shown = runner.invoke(app, ["proxy", "status", "--url", proxy.base_url, "--token", "tok", "--json"])
        assert shown.exit_code == 0, shown.output
        data = json.loads(shown.stdout)
        assert (data["conversations"], data["replies"], data["recorder"]["store_state"]) == (1, 1, "up")
        refused = runner.invoke(app, ["proxy", "status", "--url", proxy.base_url])
        assert refused.exit_code != 0 and "answered 401" in refused.output


def test_request_bodies_past_the_limit_are_refused_unread(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    limit = 1024 * 1024
    db = tmp_path / "proxy.db"
    with running_proxy(fake_openai.base_url, db, warm=False, max_body_bytes=limit) as proxy:
        padding = "x" * (limit - 100)
        fits = {"model": "m", "messages": [{"role": "user", "content": padding[: limit - 200]}]}
        too_big = {"model": "m", "messages": [{"role": "user", "content": padding + "y" * 200}]}

        def chunked(payload: dict[str, Any]) -> Iterator[bytes]:
            raw = json.dumps(payload).encode()
            for start in range(0, len(raw), 64 * 1024):
                yield raw[start : start + 64 * 1024]

        with httpx.Client(base_url=proxy.base_url, timeout=30) as http:
            assert http.post("/chat/completions", json=fits).status_code == 200
            for path in ("/chat/completions", "/messages", "/embeddings"):
                declared = http.post(path, json=too_big)
                assert declared.status_code == 413, path
                assert "--max-body-mb" in declared.json()["error"]["message"]
                streamed = http.post(path, content=chunked(too_big), headers=JSON)  # chunked: no length
                assert streamed.status_code == 413, path
            assert http.post("/chat/completions", content=chunked(fits), headers=JSON).status_code == 200
        wait_recorded(proxy.base_url)
    assert len(fake_openai.requests) == 2  # only the two that fit went upstream
    assert len(list(iter_sessions(db))) == 2  # and only they were recorded

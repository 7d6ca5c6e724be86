"""Episodes (successful past tasks as units), per-tool coverage, and rebuild semantics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kindling.mining import load_mining_config
from kindling.mining.model import Example
from kindling.mining.outcome import OutcomeClassifier
from kindling.mining.tasktype import is_substantive, opening_request
from kindling.sessions.model import Message, Session, ToolCall
from kindling.templates import JsonDirStore
from kindling.templates.build import build_template_with_report
from kindling.templates.episodes import EpisodeCollector, cover_tools, episode_of
from kindling.templates.model import Template, export_template, parse_template


def call(call_id: str, name: str, **arguments: Any) -> Message:
    return Message("assistant", None, (ToolCall(call_id, name, arguments),))


def result(call_id: str, content: str, error: bool | None = None) -> Message:
    return Message("tool", content, (), call_id, None, error)


def session(reward: float | None = 1.0, **metadata: Any) -> Session:
    return Session(
        "s1",
        "tau-bench",
        (
            Message("assistant", "Hi! How can I help?"),
            Message("user", "Hello there!"),
            Message("user", "I want to return the blue kettle from my last order"),
            call("c1", "find_user"),
            result("c1", "user_1"),
            call("c2", "get_order", order_id="#1"),
            result("c2", "Error: order not found"),
            call("c3", "get_order", order_id="#2"),
            result("c3", '{"status": "delivered"}'),
            Message("user", "ok", (ToolCall("u1", "user_checklist", {}, None, "user"),)),
            result("u1", "checked"),
            call("c4", "return_items", order_id="#2"),
            result("c4", '{"status": "return requested"}'),
        ),
        reward=reward,
        metadata=metadata,
    )


def test_an_episode_is_the_opening_request_and_the_calls_that_worked_in_order() -> None:
    classify = OutcomeClassifier(load_mining_config().rules())
    episode = episode_of(session(task_id=7), classify)
    assert episode is not None
    assert episode.opening == "I want to return the blue kettle from my last order"  # not the greeting
    assert episode.request == episode.opening  # no benchmark instruction here
    assert [s.tool_name for s in episode.steps] == ["find_user", "get_order", "return_items"]
    assert [s.position for s in episode.steps] == [3, 7, 11]  # the failed look-up and the user's call are out
    assert episode.task_id == "7"
    assert episode.tools == ["find_user", "get_order", "return_items"]
    instructed = episode_of(session(instruction="You are Ann. Return the kettle."), classify)
    assert instructed is not None and instructed.request == "You are Ann. Return the kettle."
    assert instructed.opening == episode.opening


def test_opening_request_skips_greetings_and_compaction_summaries() -> None:
    assert not is_substantive("Hi there, thanks!")
    assert not is_substantive("[CONTEXT COMPACTION — REFERENCE ONLY] earlier turns were about cats and dogs")
    assert is_substantive("cancel my pending order please")
    greeting_only = Session("g", "x", (Message("user", "Hello!"),))
    assert opening_request(greeting_only) == "Hello!"


def test_only_successful_sessions_become_episodes() -> None:
    collector = EpisodeCollector()
    collector(session(reward=0.0))
    collector(session(reward=None))  # no reward recorded: judged by the filters alone
    collector(session(reward=1.0))
    assert len(collector.episodes) == 2
    assert len(EpisodeCollector(min_messages=50).episodes) == 0


def test_coverage_keeps_every_tool_including_rare_writes() -> None:
    ranked = [Example(tool_name="lookup", arguments={"n": i}, count=100 - i) for i in range(60)]
    ranked += [Example(tool_name="book", arguments={"seat": "1A"}), Example(tool_name="refund")]
    kept, left_out = cover_tools(ranked, per_tool=5)
    assert [e.tool_name for e in kept] == ["lookup"] * 5 + ["book", "refund"]
    assert left_out == 55
    capped, _ = cover_tools(ranked, per_tool=5, max_examples=4)
    assert {e.tool_name for e in capped} == {"lookup", "book", "refund"}  # one each before any repeat
    assert len(capped) == 4


def test_episodes_do_not_change_the_legacy_formats() -> None:
    template = Template(
        name="t",
        examples=[Example(tool_name="a")],
        episodes=[{"session_id": "s", "steps": [{"tool_name": "a"}]}],
    )
    for fmt in ("warm_sessions", "session-templates"):
        data = export_template(template, fmt)
        assert "episodes" not in data
        assert parse_template(data).episodes == []
    assert parse_template(export_template(template)).episodes == template.episodes


def _tau_bench_file(path: Path, runs: list[tuple[str, list[tuple[str, dict[str, Any], str]], float]]) -> Path:
    items = []
    for index, (request, calls, reward) in enumerate(runs):
        traj: list[dict[str, Any]] = [
            {"role": "system", "content": "policy"},
            {"role": "user", "content": request},
        ]
        for number, (name, arguments, content) in enumerate(calls):
            call_id = f"call_{index}_{number}"
            traj.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                    ],
                }
            )
            traj.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": content})
        traj.append({"role": "assistant", "content": "Done."})
        items.append({"task_id": index, "trial": 0, "reward": reward, "info": {}, "traj": traj})
    path.write_text(json.dumps(items))
    return path


RUNS = [
    (
        "I want to return my kettle",
        [("find_user", {"zip": "1"}, "u1"), ("return_items", {"id": "#1"}, "ok")],
        1.0,
    ),
    (
        "Please cancel my pending order",
        [("find_user", {"zip": "2"}, "u2"), ("cancel", {"id": "#2"}, "ok")],
        1.0,
    ),
    (
        "Exchange my lamp for a dimmer one",
        [("find_user", {"zip": "3"}, "u3"), ("exchange", {"id": "#3"}, "ok")],
        0.0,
    ),
]


def test_build_keeps_successful_tasks_and_rebuild_keeps_fields_without_needless_versions(
    tmp_path: Path,
) -> None:
    source = _tau_bench_file(tmp_path / "runs.json", RUNS)
    store = JsonDirStore(tmp_path / "templates")
    first = build_template_with_report(
        "shop",
        [source],
        store=store,
        min_messages=0,
        description="Shop tasks",
        task_type="mixed",
        tags=["retail"],
    )
    template = first.template
    assert [e.opening for e in template.episodes] == [
        "I want to return my kettle",
        "Please cancel my pending order",
    ]
    assert {e.tool_name for e in template.examples} == {
        "find_user",
        "return_items",
        "cancel",
    }  # failed run: none
    assert not first.unchanged and template.version == 1
    # The same sources again: nothing changed, no new version.
    again = build_template_with_report("shop", [source], store=store, min_messages=0)
    assert again.unchanged and again.template.version == 1 and store.versions("shop") == [1]
    # New sessions: a new version that keeps type, tags and description unless told otherwise.
    more = _tau_bench_file(
        tmp_path / "more.json", [*RUNS, ("Where is my parcel", [("track", {"id": "#9"}, "ok")], 1.0)]
    )
    rebuilt = build_template_with_report("shop", [more], store=store, min_messages=0).template
    assert rebuilt.version == 2
    assert (rebuilt.description, rebuilt.task_type, rebuilt.tags) == ("Shop tasks", "mixed", ["retail"])
    assert len(rebuilt.episodes) == 3
    told = build_template_with_report(
        "shop", [more], store=store, min_messages=0, tags=["new"], description="D"
    )
    assert (told.template.tags, told.template.description, told.template.version) == (["new"], "D", 3)


def test_build_refuses_a_bad_per_tool(tmp_path: Path) -> None:
    from kindling.errors import TemplateError

    source = _tau_bench_file(tmp_path / "runs.json", RUNS)
    with pytest.raises(TemplateError, match="per_tool"):
        build_template_with_report("shop", [source], store=JsonDirStore(tmp_path / "t"), per_tool=0)


def test_episode_requests_carry_no_personal_data() -> None:
    from kindling.mining.patterns import personal_data_scrubber

    classify = OutcomeClassifier(load_mining_config().rules())
    text = "Hi, I am Yusuf Rossi, zip 19122, email yusuf.rossi@example.com; return my kettle from #W2378156"
    named = Session(
        "p",
        "tau2-bench",
        (
            Message("user", text),
            call("c1", "find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122"),
            result("c1", "yusuf_rossi_9620"),
            call("c2", "get_order_details", order_id="#W2378156"),
            result("c2", '{"order_id": "#W2378156", "user_id": "yusuf_rossi_9620"}'),
        ),
        reward=1.0,
    )
    episode = episode_of(named, classify, scrubber=personal_data_scrubber())
    assert episode is not None
    for value in ("Yusuf", "Rossi", "19122", "yusuf.rossi@example.com", "W2378156"):
        assert value not in episode.opening and value not in episode.request
    assert "kettle" in episode.opening
    kept = episode_of(named, classify, scrubber=personal_data_scrubber(keep_personal_data=True))
    assert kept is not None and kept.opening == text


def test_an_order_id_written_without_its_hash_is_still_replaced() -> None:
    from kindling.mining.patterns import personal_data_scrubber

    classify = OutcomeClassifier(load_mining_config().rules())
    written = Session(
        "w",
        "tau2-bench",
        (
            Message("user", "Hi, when will my order W4284542 arrive?"),
            call("c1", "get_order_details", order_id="#W4284542"),
            result("c1", '{"order_id": "#W4284542", "status": "pending"}'),
        ),
        reward=1.0,
    )
    episode = episode_of(written, classify, scrubber=personal_data_scrubber())
    assert episode is not None
    assert "W4284542" not in episode.opening
    assert episode.opening.startswith("Hi, when will my order <")


DEV_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"


def test_every_tool_that_worked_in_the_development_data_keeps_examples() -> None:
    if not DEV_DATA.is_dir():
        pytest.skip(f"the development data is not at {DEV_DATA}")
    from kindling.sessions import iter_sessions
    from kindling.templates.build import template_from_sessions

    source = DEV_DATA / "tau-bench-avaljotsingh"
    sessions = [s for path in sorted(source.iterdir()) for s in iter_sessions(path)]
    template = template_from_sessions("dev", sessions, min_messages=0, max_examples=100)
    classify = OutcomeClassifier(load_mining_config().rules())
    worked = {
        step.tool_name
        for s in sessions
        if s.reward is not None and s.reward > 0
        for episode in [episode_of(s, classify)]
        if episode is not None
        for step in episode.steps
    }
    # One global cap of 100 kept only the most frequent calls; coverage keeps every tool, writes too.
    assert {e.tool_name for e in template.examples} == worked
    assert {"exchange_delivered_order_items", "modify_pending_order_address"} <= worked
    assert len(template.examples) <= 100
    assert len(template.episodes) == sum(1 for s in sessions if s.reward == 1.0)


def test_cli_rebuild_says_when_nothing_changed(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kindling.cli.main import app

    source = _tau_bench_file(tmp_path / "runs.json", RUNS)
    store = str(tmp_path / "templates")
    runner = CliRunner()
    first = runner.invoke(
        app, ["build", "shop", str(source), "--min-messages", "0", "--tag", "retail", "--store", store]
    )
    assert first.exit_code == 0, first.output
    again = runner.invoke(
        app, ["build", "shop", str(source), "--min-messages", "0", "--store", store, "--json"]
    )
    assert again.exit_code == 0, again.output
    data = json.loads(again.output)
    assert data["unchanged"] is True
    assert data["template"]["version"] == 1 and data["template"]["tags"] == ["retail"]
    assert data["mining"]["episodes"] == 2


def _task(sid: str, started: float, request: str, *commands: str) -> Session:
    messages: list[Message] = [Message("user", request)]
    for n, command in enumerate(commands):
        messages += [
            call(f"{sid}-{n}", "terminal", command=command),
            result(f"{sid}-{n}", '{"exit_code": 0}'),
        ]
    return Session(sid, "cli", tuple(messages), started_at=started)


def test_a_past_task_offers_its_call_when_another_sessions_example_shows_it() -> None:
    # A template keeps one example per distinct call, shown by its newest occurrence: here the
    # log rotation's. The failing-test task made the same call and is the one that resembles the
    # new task, so the call is offered from it, under its request, and it is the past task named.
    from kindling.templates.build import template_from_sessions
    from kindling.warmup.warm import warm_conversation

    similar = _task(
        "fix", 1.0, "Fix the failing parser test in app/parser.py", "pytest -q tests/test_parser.py"
    )
    owner = _task(
        "logs", 2.0, "Rotate the nginx logs every night", "pytest -q tests/test_parser.py", "logrotate -f x"
    )
    template = template_from_sessions("t", [similar, owner], min_messages=0)
    (example,) = [
        e for e in template.examples if e.arguments == {"command": "pytest -q tests/test_parser.py"}
    ]
    assert example.session_id == "logs"  # the newest occurrence shows the call
    (step,) = next(e for e in template.episodes if e.session_id == "fix").steps
    assert (step.example_session, step.example_position) == ("logs", example.position)
    stored = parse_template(export_template(template))
    assert stored.episodes == template.episodes  # the link is kept in the file
    plain = next(e for e in template.episodes if e.session_id == "logs").steps
    assert "example_session" not in plain[0].model_dump()  # a step that is its own example: no link written

    warm = warm_conversation(template, "The parser test fails, fix it", max_examples=1, tools=["terminal"])
    texts = [m.get("content") or "" for m in warm.messages]
    assert any("Fix the failing parser test" in t for t in texts)
    assert not any("Rotate the nginx logs" in t for t in texts)
    assert [p["session_id"] for p in warm.past_tasks] == ["fix"]


def test_worker_builds_link_the_same_steps_as_one_pass(tmp_path: Path) -> None:
    # Mined in worker processes, the episodes come from a pass of their own: their steps must
    # point at the same examples as when everything is read in one pass.
    from kindling.sessions import generate_sample_db

    db = generate_sample_db(tmp_path / "state.db", sessions=120, seed=3)
    one = build_template_with_report(
        "a", [db], store=JsonDirStore(tmp_path / "one"), on_session=lambda s: None
    )
    two = build_template_with_report("a", [db], store=JsonDirStore(tmp_path / "two"), workers=2)
    assert two.template.examples == one.template.examples
    assert two.template.episodes == one.template.episodes
    linked = [s for e in one.template.episodes for s in e.steps if s.example_session is not None]
    assert len(linked) > 100
    places = {(e.session_id, e.position, e.tool_name) for e in one.template.examples}
    assert all((s.example_session, s.example_position, s.tool_name) in places for s in linked)
